// The subscriptions, with what a rewind of one stages and the advancer's wake-ups.
import {
  bigint,
  boolean,
  doublePrecision,
  integer,
  jsonb,
  primaryKey,
  text,
  timestamp,
  uuid,
} from "drizzle-orm/pg-core";
import { corqSchema, createdAt, xid8 } from "./corqSchema.js";

/** Code and push subscriptions alike; the watermark is the (tx, position) pair last advanced. */
export const subscriptions = corqSchema.table("subscriptions", {
  id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
  name: text("name").notNull().unique("subscriptions_name_key"),
  kind: text("kind").notNull(), // "code" | "push"
  events: text("events").array().notNull(), // ["*"] = every event
  // stream-name prefixes: only events of streams that start with one of them; null = every stream
  streams: text("streams").array(),
  key: text("key").notNull(), // "stream" | "data.x.y" | "meta.x" | "function"
  from: text("from").notNull(),
  batchSize: integer("batch_size").notNull(),
  maxAttempts: integer("max_attempts").notNull(),
  backoffInitialMs: integer("backoff_initial_ms").notNull(),
  backoffMaxMs: integer("backoff_max_ms").notNull(),
  backoffFactor: doublePrecision("backoff_factor").notNull(),
  leaseMs: integer("lease_ms").notNull(),
  // At most this many keys of the subscription leased at once, across every consumer and
  // isolate (claimBatch.ts, corq.lease_room); null: no cap.
  maxLeasedKeys: integer("max_leased_keys"),
  // Fairness between tenants (claimBatch.ts, pickFair): each key's tenant, as "stream", a JSON
  // path ("data.x.y", "meta.x") or "function" (code); null: no tenants, oldest key first.
  tenant: text("tenant"),
  // { "<tenant>": n }: a tenant with weight n gets n keys per round (default 1)
  tenantWeights: jsonb("tenant_weights"),
  // At most this many keys of each tenant leased at once (corq.tenant_room); null: no cap.
  maxLeasedKeysPerTenant: integer("max_leased_keys_per_tenant"),
  // { events, perMs, by: "key" | "tenant" | "subscription" }: at most `events` delivered per
  // `perMs` for each key, tenant or the whole subscription (corq.rate_take); null: no limit
  rateLimit: jsonb("rate_limit"),
  // An event's delay (deliverAt / delayMs) is capped at this for this subscription, at advance
  // time (never refused at append: another subscription may allow it). Default 1 day.
  maxDelayMs: bigint("max_delay_ms", { mode: "number" }).notNull().default(86_400_000),
  // events whose tenant differed from their key's (a key's tenant is fixed when its row is made)
  tenantMismatched: bigint("tenant_mismatched", { mode: "number" }).notNull().default(0),
  deliver: jsonb("deliver"),
  paused: boolean("paused").notNull().default(false),
  watermarkTx: xid8("watermark_tx").notNull(),
  watermarkPosition: bigint("watermark_position", { mode: "number" }).notNull(),
  // events the subscription matched but could not key: skipped = all of them (no key, or an
  // invalid one), skipped_invalid = those whose key broke the key rule; last_skip says why
  skipped: bigint("skipped", { mode: "number" }).notNull().default(0),
  skippedInvalid: bigint("skipped_invalid", { mode: "number" }).notNull().default(0),
  lastSkip: jsonb("last_skip"), // { position, reason }
  // dead letters an operator skipped (their failed event was acknowledged without delivery)
  skippedDead: bigint("skipped_dead", { mode: "number" }).notNull().default(0),
  // advance_kicks.kicked as the last advance round of this subscription read it: a kick above
  // it came while that round ran (the advancer runs again; see advanceSubscription.ts)
  handledKicks: bigint("handled_kicks", { mode: "number" }).notNull().default(0),
  // the last advance of this subscription that failed (cleared by the next one that works)
  advanceError: text("advance_error"),
  advanceErrorAt: timestamp("advance_error_at", { withTimezone: true }),
  // changes when a subscription is deleted and created again under the same name: deliveries
  // carry it, so a receiver never mixes up the seqs of two incarnations
  incarnation: uuid("incarnation").notNull().defaultRandom(),
  // Seqs are never reused: when idle key rows are compacted (deleted) this is raised to the
  // highest seq they had, and a key row created later numbers its events from here
  // (src/sql/common/keySeqFloor.ts). A floor shared by the subscription's keys, so a key that
  // comes back may skip seqs (a gap), never repeat one.
  keySeqFloor: bigint("key_seq_floor", { mode: "number" }).notNull().default(0),
  // bumped by every erasure round (eraseStream.ts): an advance whose events were read before
  // the round committed finds it changed on the locked row and enqueues nothing from that read
  eraseEpoch: bigint("erase_epoch", { mode: "number" }).notNull().default(0),
  // A subscription created `from: "beginning"` after retention removed events: the retention
  // horizon then (set by a trigger on insert, drizzle/0012_retention.sql), where its beginning
  // was. Null: it saw the whole log (or started from now).
  startHorizon: bigint("start_horizon", { mode: "number" }),
  createdAt: createdAt(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  // A rewind in progress (src/rewind.ts): it stages the range's events (rewind_staged) and
  // then requeues them, in chunks that each commit; the subscription's own advance waits until
  // it ends (an advance would number a key's live events between two of its chunks).
  // rewinds: how many rewinds began (the current one's number marks the keys it requeued:
  // keys.rewound_by); rewind_token: its holder; rewind_until: its lease, renewed by every chunk
  // — past it, an advance or the next rewind takes the rewind over and finishes it;
  // rewind_from: where its range starts (the range ends at the watermark, which stands still);
  // rewind_cursor: the last event staged (null once the range is staged: the requeue goes on
  // while staged rows are left); rewind_key: the one key rewound (null: all).
  rewinds: integer("rewinds").notNull().default(0),
  rewindToken: uuid("rewind_token"),
  rewindUntil: timestamp("rewind_until", { withTimezone: true }),
  rewindFromTx: xid8("rewind_from_tx"),
  rewindFromPosition: bigint("rewind_from_position", { mode: "number" }),
  rewindCursorTx: xid8("rewind_cursor_tx"),
  rewindCursorPosition: bigint("rewind_cursor_position", { mode: "number" }),
  rewindKey: text("rewind_key"),
});

/**
 * The events a rewind in progress has found in its range and not yet requeued, with their keys
 * (src/rewind.ts): staged in log order, requeued key by key — so each key's row is written
 * once or twice per rewind, not once per chunk of the log its events are spread over.
 */
export const rewindStaged = corqSchema.table(
  "rewind_staged",
  {
    subscriptionId: integer("subscription_id").notNull(),
    key: text("key").notNull(),
    tx: xid8("tx").notNull(),
    position: bigint("position", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ name: "rewind_staged_pkey", columns: [t.subscriptionId, t.key, t.tx, t.position] })],
);

/**
 * Wake-ups of the advancer, per subscription: every advance() bumps `kicked` first, in a
 * statement of its own; an advancer that found another one at work returns at once, and that
 * one sees the bump when it re-checks (kicked > subscriptions.handled_kicks) and runs again.
 * A row of its own, so bumping never waits for a running advance.
 */
export const advanceKicks = corqSchema.table("advance_kicks", {
  subscriptionId: integer("subscription_id").primaryKey(),
  kicked: bigint("kicked", { mode: "number" }).notNull().default(0),
});
