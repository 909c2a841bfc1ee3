// What consumers claim: the per-key state rows, the queued events, and what bounds a claim
// (tenants' turns, rate limits' buckets, consumer slots).
import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, primaryKey, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { corqSchema, xid8 } from "./corqSchema.js";

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
    // null: never served
    servedAt: timestamp("served_at", { withTimezone: true }),
    // When the fair pick visits the tenant next (its turn: earliest first, fairPick.ts): made
    // earlier by whatever gives one of its keys work (the advance, a retry, a resume), set to
    // now when it is served, and to its next key's time when a visit finds nothing ready.
    // null: no work known (never visited).
    dueAt: timestamp("due_at", { withTimezone: true }),
  },
  (t) => [
    primaryKey({ name: "tenants_pkey", columns: [t.subscriptionId, t.tenant] }),
    index("tenants_due_idx").on(t.subscriptionId, t.dueAt, t.tenant).where(sql`due_at IS NOT NULL`),
  ],
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
    // With a burst above 1 only: the starts of the last perMs, grouped by the claim that took them
    // (its time, and how many), oldest first — what holds every window of perMs to `events`
    // starts (corq.rate_take, drizzle/0030). Null with a burst of 1: the spacing alone does.
    recentAt: timestamp("recent_at", { withTimezone: true }).array(),
    recentCount: integer("recent_count").array(),
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
 * Consumer slots (1 … 1000): a dispatcher starts a consumer invocation only for a slot it
 * claimed (busy_until in the future), so however many kicks dispatch at once, at most
 * CORQ_CONCURRENCY consumers run. A consumer frees its slot when done; a crashed one's slot
 * frees itself at busy_until.
 */
export const consumerSlots = corqSchema.table("consumer_slots", {
  slot: integer("slot").primaryKey(),
  busyUntil: timestamp("busy_until", { withTimezone: true }),
});
