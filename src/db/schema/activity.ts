// The record of batches and the counters GET /metrics and the dashboard read.
import { bigint, doublePrecision, index, integer, primaryKey, text, timestamp } from "drizzle-orm/pg-core";
import { corqSchema } from "./corqSchema.js";

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
