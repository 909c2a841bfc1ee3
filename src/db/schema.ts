// The whole corq schema, in its own Postgres schema `corq`. drizzle-kit generates
// the migrations in drizzle/ from this file; what drizzle cannot express (storage
// settings) lives in custom migrations there.
import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  customType,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";

export const corqSchema = pgSchema("corq");

/** 64-bit transaction id (Postgres 13+): the commit-safe ordering key of the log. */
const xid8 = customType<{ data: string }>({ dataType: () => "xid8" });

const createdAt = () => timestamp("created_at", { withTimezone: true }).notNull().defaultNow();

/** The append-only log. Log order is (tx, position), never position alone (docs/architecture.md, invariant 1). */
export const events = corqSchema.table(
  "events",
  {
    position: bigint("position", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    stream: text("stream").notNull(),
    version: integer("version").notNull(),
    name: text("name").notNull(),
    data: jsonb("data").notNull(),
    meta: jsonb("meta").notNull().default({}),
    createdAt: createdAt(),
    tx: xid8("tx").notNull().default(sql`pg_current_xact_id()`),
    // Not delivered before this time (deliverAt / delayMs at the append); null: at once.
    deliverAt: timestamp("deliver_at", { withTimezone: true }),
    // The W3C trace context the event was appended under: its `send` span's traceparent, then a
    // space and the tracestate when there is one (src/tracing.ts). Null when no tracer was
    // registered: an untraced append writes nothing more.
    traceContext: text("trace_context"),
  },
  (t) => [
    uniqueIndex("events_stream_version_key").on(t.stream, t.version),
    index("events_tx_position_idx").on(t.tx, t.position),
  ],
);

/** One row per stream: its last version. The row lock serialises appends to one stream. */
export const streams = corqSchema.table("streams", {
  stream: text("stream").primaryKey(),
  version: integer("version").notNull(),
  // The transaction of the stream's last append. The log is read in (tx, position) order, so
  // an append from an OLDER transaction would sort before versions committed earlier: such an
  // append is refused (a retryable conflict) and within a stream log order is version order.
  lastTx: xid8("last_tx"),
  // The tombstone of an erasure (src/sql/log/eraseStream.ts): versions up to erased_through are
  // erased (or being erased: a call that was interrupted is finished by the next one); the row,
  // its version and last_tx stay, so expectedVersion keeps its meaning and appends continue.
  erasedThrough: integer("erased_through"),
  erasedEvents: bigint("erased_events", { mode: "number" }).notNull().default(0),
  erasedAt: timestamp("erased_at", { withTimezone: true }),
  // positions the last erasure round removed: the next round (or call) looks for queue rows of
  // them once more — an advance of a subscription created during that round may have queued them
  eraseSweep: bigint("erase_sweep", { mode: "number" }).array(),
});

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
 * The per-key state row, claimed with FOR UPDATE SKIP LOCKED. Status is derived:
 *   paused   paused_at is not null             (never claimed; its events wait in order)
 *   dead     dead_at is not null               (available_at is null)
 *   leased   lease_until > now()                (available_at = lease_until)
 *   backoff  available_at > now(), no live lease
 *   ready    available_at <= now()              (includes an expired lease)
 *   idle     available_at is null, not dead     (pending = 0)
 */
export const keys = corqSchema.table(
  "keys",
  {
    subscriptionId: integer("subscription_id").notNull(),
    key: text("key").notNull(),
    pending: integer("pending").notNull().default(0),
    attempts: integer("attempts").notNull().default(0),
    availableAt: timestamp("available_at", { withTimezone: true }),
    leaseToken: uuid("lease_token"),
    leaseUntil: timestamp("lease_until", { withTimezone: true }),
    deadAt: timestamp("dead_at", { withTimezone: true }),
    failedPosition: bigint("failed_position", { mode: "number" }),
    lastError: text("last_error"),
    // (last_tx, last_position): the last acked (or skipped) event. A claim reads the queue with
    // its statement's snapshot, which can predate another consumer's ack of the same key; rows
    // at or below this cursor are already done and never handed out again.
    // (last_tx, last_position) is for display (the last acked event); the cursor is last_seq
    lastTx: xid8("last_tx"),
    lastPosition: bigint("last_position", { mode: "number" }),
    acked: bigint("acked", { mode: "number" }).notNull().default(0),
    skipped: bigint("skipped", { mode: "number" }).notNull().default(0),
    // The key's seq counter: the last seq given to a queued event (advance or rewind); never
    // reused, so "seq <= last seen" tells a receiver a true duplicate.
    seq: bigint("seq", { mode: "number" }).notNull().default(0),
    // The ack cursor: queue rows with seq <= last_seq are done. A claim reads the queue with
    // its statement's snapshot, which can predate another consumer's ack (or a rewind) of the
    // same key; rows at or below this cursor, read from the locked key row, are never handed out.
    lastSeq: bigint("last_seq", { mode: "number" }).notNull().default(0),
    // The last seq a rewind queued: while last_seq < replay_seq the key is replaying, and
    // claims take it only when no live key is ready (live traffic first).
    replaySeq: bigint("replay_seq", { mode: "number" }).notNull().default(0),
    // An operator paused this key (POST …/keys/:key/pause): never claimed until resumed.
    pausedAt: timestamp("paused_at", { withTimezone: true }),
    // Who claimed the current lease (a Worker invocation, a process) and when.
    leaseHolder: text("lease_holder"),
    leasedAt: timestamp("leased_at", { withTimezone: true }),
    // The rewind (subscriptions.rewinds) that last queued this key's events again: a later
    // chunk of the same rewind appends the key's next events after them.
    rewoundBy: integer("rewound_by"),
    // The key's last activity: created, an enqueue, an ack, a skip, a resume. An idle key whose
    // last activity is older than CORQ_KEY_IDLE_MS loses its row (src/sql/housekeeping/).
    activeAt: timestamp("active_at", { withTimezone: true }).notNull().defaultNow(),
    // Queued events an erasure removed from this key (eraseStream.ts). A claim whose snapshot
    // predates such a removal sees this counter moved on the row it locked and hands out nothing.
    erased: bigint("erased", { mode: "number" }).notNull().default(0),
    // "Come back later" answers (retryAfterMs, a receiver's 429/503 Retry-After) for the batch at
    // the head, since the first of them: counted apart from attempts, bounded (MAX_POSTPONEMENTS,
    // MAX_POSTPONED_MS), reset by an ack.
    postponed: integer("postponed").notNull().default(0),
    postponedSince: timestamp("postponed_since", { withTimezone: true }),
    // The key's tenant (subscriptions.tenant), from the event that made its row; null without one.
    tenant: text("tenant"),
    // The key waits (available_at) for its rate limit's room, not for a delay or a retry; a
    // claim that leases it clears this.
    rateWaits: boolean("rate_waits").notNull().default(false),
  },
  (t) => [
    primaryKey({ name: "keys_pkey", columns: [t.subscriptionId, t.key] }),
    // Only keys with work that may be claimed are indexed: claims stay fast with millions of
    // idle (or paused) keys. Live keys first, then replaying ones, each oldest waiter first
    // (key breaks ties between keys made ready at the same moment: claims have one total order).
    index("keys_ready_idx")
      .on(t.subscriptionId, sql`(${t.lastSeq} < ${t.replaySeq})`, t.availableAt, t.key)
      .where(sql`available_at IS NOT NULL AND paused_at IS NULL`),
    // A tenanted subscription's keys with work, by tenant: the fair pick lists the tenants with
    // work (a skip scan, one probe per tenant) and walks each one's ready keys, oldest first.
    index("keys_tenant_ready_idx")
      .on(t.subscriptionId, t.tenant, t.availableAt, t.key)
      .where(sql`available_at IS NOT NULL AND paused_at IS NULL AND tenant IS NOT NULL`),
    index("keys_dead_at_idx").on(t.subscriptionId, t.deadAt).where(sql`dead_at IS NOT NULL`),
    index("keys_paused_at_idx").on(t.subscriptionId, t.pausedAt).where(sql`paused_at IS NOT NULL`),
    // Idle keys (nothing to do, not dead, not paused) by last activity: compaction reads only the
    // keys idle past its threshold, whatever the number of keys.
    index("keys_idle_idx")
      .on(t.subscriptionId, t.activeAt)
      .where(sql`available_at IS NULL AND dead_at IS NULL AND paused_at IS NULL`),
  ],
);

/**
 * The tenants of a tenanted subscription (subscriptions.tenant), made by the advance with the
 * first key of each: when the fair pick last served each one (least recently served first).
 */
export const tenants = corqSchema.table(
  "tenants",
  {
    subscriptionId: integer("subscription_id").notNull(),
    tenant: text("tenant").notNull(),
    // null: never served (first in line)
    servedAt: timestamp("served_at", { withTimezone: true }),
  },
  (t) => [primaryKey({ name: "tenants_pkey", columns: [t.subscriptionId, t.tenant] })],
);

/**
 * Rate limits' buckets (subscriptions.rate_limit): one per subscription, tenant or key, as the
 * limit's `by` says — the time its next event is due at the limit's rate (the generic cell rate
 * algorithm's theoretical arrival time). Only corq.rate_take writes them.
 */
export const rateBuckets = corqSchema.table(
  "rate_buckets",
  {
    subscriptionId: integer("subscription_id").notNull(),
    // "s" for the subscription, "t:<tenant>", "k:<key>"
    scope: text("scope").notNull(),
    tat: timestamp("tat", { withTimezone: true }).notNull(),
  },
  (t) => [primaryKey({ name: "rate_buckets_pkey", columns: [t.subscriptionId, t.scope] })],
);

/**
 * Queued, unacked events of one key, in seq order: the advance gives seqs in log order, a
 * rewind queues events again after them with higher seqs (`replay`). References the event;
 * acked rows are deleted.
 */
export const queue = corqSchema.table(
  "queue",
  {
    subscriptionId: integer("subscription_id").notNull(),
    key: text("key").notNull(),
    seq: bigint("seq", { mode: "number" }).notNull(),
    tx: xid8("tx").notNull(),
    position: bigint("position", { mode: "number" }).notNull(),
    replay: boolean("replay").notNull().default(false),
    // the event's deliver_at, copied when it is queued: the claim and the ack find a key's
    // delayed rows in queue_delayed_idx without reading events
    deliverAt: timestamp("deliver_at", { withTimezone: true }),
  },
  (t) => [
    primaryKey({ name: "queue_pkey", columns: [t.subscriptionId, t.key, t.seq] }),
    // Only delayed rows: empty unless events carry deliverAt / delayMs, so a claim's "first
    // delayed row after the cursor" costs one probe of an empty index for everyone else.
    index("queue_delayed_idx").on(t.subscriptionId, t.key, t.seq).where(sql`deliver_at IS NOT NULL`),
    // an erasure finds the queue rows of a stream's events by position, in every subscription
    index("queue_position_idx").on(t.position),
    // The oldest pending event of a subscription (stats): one probe. Without it the stats read
    // every queued row of the subscription (200,000 after a rewind), or through
    // queue_position_idx every row queued for the others (a subscription with nothing queued).
    // Partial on a predicate every row meets (positions start at 1) and only the stats state:
    // no other statement can use it. As a full index it was one more candidate for the ack's
    // delete by (subscription, key, seq), and a plan made on an empty queue took it — reading
    // the subscription's whole queue per ack (test/plans.int.test.ts).
    index("queue_subscription_position_idx").on(t.subscriptionId, t.position).where(sql`position > 0`),
  ],
);

/**
 * Recent batches (the dashboard's timeline and throughput): one row per batch acked, failed or
 * lost to an expired lease, written by the ack / fail / claim statement itself. UNLOGGED (a
 * custom migration): it is telemetry, cheap to write and fine to lose on a crash. The cron
 * prunes it (Corq.pruneActivity).
 */
export const activity = corqSchema.table(
  "activity",
  {
    subscriptionId: integer("subscription_id").notNull(),
    key: text("key").notNull(),
    startedAt: timestamp("started_at", { withTimezone: true }).notNull(),
    finishedAt: timestamp("finished_at", { withTimezone: true }).notNull().defaultNow(),
    events: integer("events").notNull(),
    outcome: text("outcome").notNull(), // "acked" | "failed" | "dead" | "expired"
  },
  // one index serves the timeline (newest first), the throughput window and the pruning
  (t) => [index("activity_finished_at_idx").on(t.finishedAt)],
);

/**
 * Events acked per subscription and 10-second bucket (the dashboard's events/s): one upsert per
 * ack (single consumes) or per recorded drain flush, so the chart reads 30 rows, not 300,000
 * batch rows. UNLOGGED like activity, pruned with it.
 */
export const throughput = corqSchema.table(
  "throughput",
  {
    subscriptionId: integer("subscription_id").notNull(),
    bucket: timestamp("bucket", { withTimezone: true }).notNull(),
    events: bigint("events", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ name: "throughput_pkey", columns: [t.subscriptionId, t.bucket] })],
);

/**
 * Batch durations for GET /metrics: a cumulative Prometheus histogram per subscription and
 * outcome, one row per bucket (`le`, the bucket's upper bound in seconds; Infinity for +Inf),
 * counted NON-cumulatively here (the renderer adds them up). Kept by a statement-level trigger
 * on activity (a custom migration), so every writer of a batch record — ack, fail, a claim that
 * took over an expired lease, the drain's buffered records — is counted, with one upsert per
 * statement. UNLOGGED like activity: after a crash it restarts from zero, which Prometheus
 * reads as a counter reset. Never pruned (it does not grow with traffic).
 */
export const batchDurations = corqSchema.table(
  "batch_durations",
  {
    subscriptionId: integer("subscription_id").notNull(),
    outcome: text("outcome").notNull(),
    le: doublePrecision("le").notNull(),
    batches: bigint("batches", { mode: "number" }).notNull(),
    events: bigint("events", { mode: "number" }).notNull(),
    seconds: doublePrecision("seconds").notNull(),
  },
  (t) => [primaryKey({ name: "batch_durations_pkey", columns: [t.subscriptionId, t.outcome, t.le] })],
);

/**
 * Counters for GET /metrics that the key rows say exactly, one row per subscription: batches
 * whose lease ran out (counted when a claim takes the key over), "come back later" answers
 * within their bounds, keys dead-lettered (a failure, or an expired lease, on the last attempt).
 * Kept by a row trigger on keys (a custom migration, drizzle/0021_counters.sql) that fires only
 * for those transitions — rare: the acks and claims that make up the traffic pass its WHEN
 * without running it — so no statement of the hot path writes this row. One row per
 * subscription, so a statement locks at most one (no lock order to keep between them).
 * Logged: a crash loses nothing. Pruned with the activity record once the subscription is gone.
 */
export const subscriptionCounters = corqSchema.table("subscription_counters", {
  subscriptionId: integer("subscription_id").primaryKey(),
  batchesExpired: bigint("batches_expired", { mode: "number" }).notNull().default(0),
  batchesPostponed: bigint("batches_postponed", { mode: "number" }).notNull().default(0),
  keysDeadLettered: bigint("keys_dead_lettered", { mode: "number" }).notNull().default(0),
});

/**
 * Webhook ids already acted on (replay protection for the signed dead-letter webhook): an id is
 * kept for 10 minutes, twice the signature's timestamp window, so a captured request cannot be
 * replayed while its signature is still accepted.
 */
export const webhookIds = corqSchema.table("webhook_ids", {
  id: text("id").primaryKey(),
  seenAt: timestamp("seen_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * Idempotent appends (an append's `idempotencyKey`, the HTTP Idempotency-Key header): one row per
 * (stream, key) that wrote, committed with its events, holding what the append answered and a
 * fingerprint of what it was sent. Within the window the same key replays that answer; the
 * housekeeping prunes rows past it (created_at, by the index).
 */
export const idempotencyKeys = corqSchema.table(
  "idempotency_keys",
  {
    stream: text("stream").notNull(),
    key: text("key").notNull(),
    /** SHA-256 (hex) of the events and expectedVersion as sent. */
    fingerprint: text("fingerprint").notNull(),
    version: integer("version").notNull(),
    /** The appended events' positions, in input order (a JSON array of numbers). */
    positions: jsonb("positions").notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ name: "idempotency_keys_pkey", columns: [t.stream, t.key] }),
    index("idempotency_keys_created_at_idx").on(t.createdAt),
  ],
);

/**
 * Dashboard logins, one row per session: logout deletes its row (ending that session only),
 * a login prunes the expired ones. The cookie holds the id and its MAC
 * (src/http/dashboard/session.ts); a cookie without its row is refused.
 */
export const dashboardSessions = corqSchema.table(
  "dashboard_sessions",
  {
    id: text("id").primaryKey(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    // the scoped token the session logged in with (its scopes are the session's); null: the
    // bootstrap admin token. Revoking the token deletes its sessions (ON DELETE CASCADE).
    tokenId: uuid("token_id").references(() => tokens.id, { onDelete: "cascade" }),
  },
  (t) => [index("dashboard_sessions_token_id_idx").on(t.tokenId)],
);

/**
 * Scoped API tokens (src/http/auth.ts). Only the SHA-256 of the secret is stored; a request's
 * token is found by that hash through the unique index (one indexed read; nothing compares the
 * secret itself). Revoking deletes the row. last_used_at is moved by the lookup itself, at most
 * once a minute per token (src/sql/operate/tokens.ts).
 */
export const tokens = corqSchema.table(
  "tokens",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    name: text("name").notNull(),
    scopes: text("scopes").array().notNull(),
    // appends only to streams whose name starts with it (null: any stream); reads are not limited
    streamPrefix: text("stream_prefix"),
    hash: text("hash").notNull(),
    createdAt: createdAt(),
    lastUsedAt: timestamp("last_used_at", { withTimezone: true }),
  },
  (t) => [
    uniqueIndex("tokens_hash_key").on(t.hash),
    check(
      "tokens_scopes_check",
      sql`cardinality(scopes) > 0 AND scopes <@ ARRAY['append', 'read', 'operate', 'admin']::text[]`,
    ),
  ],
);

/** Applied migrations (our own runner: it takes an advisory lock, drizzle's does not). */
export const migrations = corqSchema.table("migrations", {
  tag: text("tag").primaryKey(),
  appliedAt: timestamp("applied_at", { withTimezone: true }).notNull().defaultNow(),
});

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

/**
 * Consumer slots (1 … 1000): a dispatcher starts a consumer invocation only for a slot it
 * claimed (busy_until in the future), so however many kicks dispatch at once, at most
 * CORQ_CONCURRENCY consumers run. A consumer frees its slot when done; a crashed one's slot
 * frees itself at busy_until.
 */
export const consumerSlots = corqSchema.table("consumer_slots", {
  slot: integer("slot").primaryKey(),
  busyUntil: timestamp("busy_until", { withTimezone: true }),
});

/**
 * The retention policy, one row (src/sql/lifecycle/retention.ts): events older than max_age_ms
 * (null: kept forever), of streams with one of `streams` as prefix (null: every stream), that
 * every subscription has advanced past and no queue holds, are removed in chunks. `option` is
 * the library option (createCorq({ retention }), CORQ_RETENTION_*) last applied: an instance
 * whose option differs applies its own (a deploy changed it), a PUT stays until then.
 * The sweep's state: `swept_to` the next position it looks at, `held_after` where the re-check
 * of held events goes on; `horizon` is 1 + the highest position removed, (removed_tx,
 * removed_position) the last event removed in log order.
 */
export const retention = corqSchema.table(
  "retention",
  {
    id: integer("id").primaryKey().default(1),
    maxAgeMs: bigint("max_age_ms", { mode: "number" }),
    streams: text("streams").array(),
    option: jsonb("option"),
    sweptTo: bigint("swept_to", { mode: "number" }).notNull().default(0),
    heldAfter: bigint("held_after", { mode: "number" }).notNull().default(0),
    horizon: bigint("horizon", { mode: "number" }),
    removedTx: xid8("removed_tx"),
    removedPosition: bigint("removed_position", { mode: "number" }),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  () => [check("retention_one_row", sql`id = 1`)],
);

/**
 * Events a retention sweep passed that a queue still held (a backlog, a dead or paused key):
 * re-checked by later passes and removed once nothing holds them, without sweeping the log
 * below the cursor again.
 */
export const retentionHeld = corqSchema.table("retention_held", {
  position: bigint("position", { mode: "number" }).primaryKey(),
});

/**
 * Alerts (src/corq/alerts.ts, docs/operations.md "Alerts"): where to POST, signed with `secret`
 * (shown once, as a push subscription's), on which conditions, with their thresholds.
 * checked_at: the last pass that looked (the cron, serve's loop): dead keys are looked for from
 * a little before it (a failure's dead_at is read before its statement commits). last_send:
 * what the newest send said (the dashboard, GET /alerts); sent / failed: sends delivered, and
 * given up after their retries.
 */
export const alerts = corqSchema.table(
  "alerts",
  {
    id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
    name: text("name").notNull().unique("alerts_name_key"),
    url: text("url").notNull(),
    secret: text("secret").notNull(),
    conditions: text("conditions").array().notNull(),
    lagOver: bigint("lag_over", { mode: "number" }),
    heldOverMs: bigint("held_over_ms", { mode: "number" }),
    minIntervalMs: bigint("min_interval_ms", { mode: "number" }).notNull(),
    checkedAt: timestamp("checked_at", { withTimezone: true }).notNull().defaultNow(),
    sent: bigint("sent", { mode: "number" }).notNull().default(0),
    failed: bigint("failed", { mode: "number" }).notNull().default(0),
    lastSend: jsonb("last_send"),
    createdAt: createdAt(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  () => [
    check(
      "alerts_conditions_check",
      sql`cardinality(conditions) > 0 AND conditions <@ ARRAY['key.dead', 'subscription.lag', 'advance.failed', 'horizon.held']::text[]`,
    ),
  ],
);

/**
 * One row per alert, condition type and subject (a subscription's key, a subscription, a
 * transaction holding the horizon): the newest send about it. A condition seen again within the
 * alert's min_interval_ms of queued_at (or, for a dead key, the same death: `incident`) sends
 * nothing; the insert that wins the row is the one that sends, so several processes send once.
 * next_at: due for a try (null: sent, or given up); sending_until: a sender's lease, past which
 * another takes the send over. Done rows are pruned once neither rule needs them.
 */
export const alertSends = corqSchema.table(
  "alert_sends",
  {
    alertId: integer("alert_id")
      .notNull()
      .references(() => alerts.id, { onDelete: "cascade" }),
    type: text("type").notNull(),
    subject: text("subject").notNull(),
    incident: text("incident"),
    messageId: text("message_id").notNull(),
    payload: jsonb("payload").notNull(),
    queuedAt: timestamp("queued_at", { withTimezone: true }).notNull().defaultNow(),
    attempts: integer("attempts").notNull().default(0),
    nextAt: timestamp("next_at", { withTimezone: true }),
    sendingUntil: timestamp("sending_until", { withTimezone: true }),
    sentAt: timestamp("sent_at", { withTimezone: true }),
    lastError: text("last_error"),
  },
  (t) => [
    primaryKey({ name: "alert_sends_pkey", columns: [t.alertId, t.type, t.subject] }),
    // the sends due: empty but for the moments an alert goes out (or waits for its retry)
    index("alert_sends_next_at_idx").on(t.nextAt).where(sql`next_at IS NOT NULL`),
  ],
);
