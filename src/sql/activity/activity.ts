import { sql, type SQL } from "drizzle-orm";
import { activity, batchDurations, events, subscriptionCounters, subscriptions, throughput } from "../../db/schema.js";
import type { BatchRecord } from "../../types.js";
import { eventColumns } from "../common/eventColumns.js";

/** The batches that finished in the last `sinceMs`, newest first, one row each (Corq.activity; the dashboard draws timelineBatches). */
export function recentBatches(subscription: string | undefined, sinceMs: number, limit: number): SQL {
  return sql`
    SELECT s.name AS subscription, a.key, a.started_at, a.finished_at, a.events, a.outcome
    FROM ${activity} a JOIN ${subscriptions} s ON s.id = a.subscription_id
    WHERE a.finished_at > now() - ${sinceMs} * interval '1 millisecond'
      ${subscription === undefined ? sql`` : sql`AND s.name = ${subscription}`}
    ORDER BY a.finished_at DESC
    LIMIT ${limit}`;
}

export interface BatchRow {
  subscription: string;
  key: string;
  started_at: Date;
  finished_at: Date;
  events: number;
  outcome: BatchRecord["outcome"];
}

export function toBatchRecord(row: BatchRow): BatchRecord {
  return {
    subscription: row.subscription,
    key: row.key,
    startedAt: new Date(row.started_at).toISOString(),
    finishedAt: new Date(row.finished_at).toISOString(),
    events: row.events,
    outcome: row.outcome,
  };
}

/** The 10-second bucket (its start) that time `at` falls in: `throughput.bucket`. */
const bucketOf = (at: SQL) => sql`to_timestamp(floor(extract(epoch FROM ${at}) / 10) * 10)`;

/**
 * Adds `events` acked by `source`'s (subscription_id, events_column) rows to their buckets.
 * Rows go in (subscription, bucket) order, so concurrent writers lock counters in one order.
 */
export function countAcked(source: SQL, at: SQL, eventsColumn: SQL): SQL {
  return sql`
    INSERT INTO ${throughput} (subscription_id, bucket, events)
    SELECT subscription_id, ${bucketOf(at)}, sum(${eventsColumn}) FROM ${source} GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (subscription_id, bucket) DO UPDATE SET events = ${throughput}.events + excluded.events`;
}

/**
 * Events acked per subscription in buckets of `bucketMs` (a multiple of 10 s) over the last
 * `windowMs`, complete 10-second buckets only: bucket 0 is the newest. Every subscription has
 * a row (bucket null when nothing was acked); empty buckets are absent (the caller fills zeros).
 */
export function ackedPerBucket(windowMs: number, bucketMs: number): SQL {
  const current = bucketOf(sql`now()`);
  return sql`
    SELECT s.name AS subscription,
      floor(extract(epoch FROM ${current} - t.bucket - interval '10 seconds') * 1000 / ${bucketMs})::int AS bucket,
      sum(t.events)::bigint AS events
    FROM ${subscriptions} s LEFT JOIN ${throughput} t ON t.subscription_id = s.id
      AND t.bucket < ${current} AND t.bucket >= ${current} - ${windowMs} * interval '1 millisecond'
    GROUP BY 1, 2`;
}

export interface BatchRecordRow {
  subscriptionId: number;
  key: string;
  startedAt: Date;
  finishedAt: Date;
  events: number;
  outcome: "acked" | "expired";
}

/**
 * Records batches, many in one statement: the consumer buffers what its ack+claim statements
 * acked (and the expired leases its claims took over) and writes it here now and then. An
 * insert inside every ack+claim statement cost a quarter of the consume throughput.
 */
export function recordBatches(rows: BatchRecordRow[]): SQL {
  return sql`
    WITH batch AS (
      SELECT * FROM unnest(
        ${sql.param(rows.map((r) => r.subscriptionId))}::int[], ${sql.param(rows.map((r) => r.key))}::text[],
        ${sql.param(rows.map((r) => r.startedAt.toISOString()))}::timestamptz[],
        ${sql.param(rows.map((r) => r.finishedAt.toISOString()))}::timestamptz[], ${sql.param(rows.map((r) => r.events))}::int[],
        ${sql.param(rows.map((r) => r.outcome))}::text[]
      ) AS b(subscription_id, key, started_at, finished_at, events, outcome)
    ),
    recorded AS (
      INSERT INTO ${activity} (subscription_id, key, started_at, finished_at, events, outcome)
      SELECT subscription_id, key, started_at, finished_at, events, outcome FROM batch
    )
    ${countAcked(sql`(SELECT * FROM batch WHERE outcome = 'acked') acked`, sql`finished_at`, sql`events`)}`;
}

/** How long the batch records and throughput buckets are kept by default (the dashboard's longest window). */
export const ACTIVITY_KEPT_MS = 900_000;

/**
 * Forgets batches and throughput buckets older than `olderThanMs`, and the batch-duration and
 * key-outcome counters of deleted subscriptions (never an existing one's); counts the batches.
 */
export function pruneActivity(olderThanMs: number): SQL {
  return sql`
    WITH ${pruneActivityCtes(olderThanMs)}
    SELECT count(*)::int AS pruned FROM pruned`;
}

/** pruneActivity's CTEs, ending in `pruned` (one row per batch record forgotten). */
export function pruneActivityCtes(olderThanMs: number): SQL {
  const cutoff = sql`now() - ${olderThanMs} * interval '1 millisecond'`;
  return sql`
    pruned AS (DELETE FROM ${activity} WHERE finished_at < ${cutoff} RETURNING 1),
    buckets AS (DELETE FROM ${throughput} WHERE bucket < ${cutoff} - interval '10 seconds'),
    durations AS (
      DELETE FROM ${batchDurations} d WHERE NOT EXISTS (SELECT 1 FROM ${subscriptions} s WHERE s.id = d.subscription_id)
    ),
    counters AS (
      DELETE FROM ${subscriptionCounters} c WHERE NOT EXISTS (SELECT 1 FROM ${subscriptions} s WHERE s.id = c.subscription_id)
    )`;
}

/**
 * The newest committed events of the log, newest first (a display, not a safe cursor read),
 * below position `before` when given: the page after one that ended at `before`.
 */
export function logTail(limit: number, before?: number): SQL {
  return sql`
    SELECT ${eventColumns} FROM ${events} e
    ${before === undefined ? sql`` : sql`WHERE e.position < ${before}`}
    ORDER BY e.position DESC LIMIT ${limit}`;
}

/**
 * The dashboard's timeline over the last `sinceMs`: the batches of the `maxKeys` most recently
 * active keys, merged per key, outcome and `slotMs` slot of start time (one bar per slot, not
 * one per batch), newest first. Merging is what lets the whole window fit in `limit` rows: the
 * newest 5,000 single batches of a busy subscription covered only the last ~95 s of 15 minutes.
 */
export function timelineBatches(options: {
  subscription?: string;
  sinceMs: number;
  maxKeys: number;
  slotMs: number;
  limit: number;
}): SQL {
  return sql`
    WITH recent AS (
      SELECT a.subscription_id, a.key, a.started_at, a.finished_at, a.events, a.outcome
      FROM ${activity} a
      WHERE a.finished_at > now() - ${options.sinceMs} * interval '1 millisecond'
        ${options.subscription === undefined ? sql`` : sql`AND a.subscription_id = (SELECT id FROM ${subscriptions} WHERE name = ${options.subscription})`}
    ),
    top AS (
      SELECT subscription_id, key FROM recent GROUP BY 1, 2 ORDER BY max(finished_at) DESC LIMIT ${options.maxKeys}
    )
    SELECT s.name AS subscription, r.key, min(r.started_at) AS started_at, max(r.finished_at) AS finished_at,
      sum(r.events)::int AS events, r.outcome, count(*)::int AS batches
    FROM recent r JOIN top USING (subscription_id, key) JOIN ${subscriptions} s ON s.id = r.subscription_id
    GROUP BY s.name, r.key, r.outcome, floor(extract(epoch FROM r.started_at) * 1000 / ${options.slotMs})
    ORDER BY max(r.finished_at) DESC
    LIMIT ${options.limit}`;
}

/** Batches per outcome over the last `sinceMs` (every key: the timeline's totals). */
export function batchCounts(subscription: string | undefined, sinceMs: number): SQL {
  return sql`
    SELECT a.outcome, count(*)::int AS batches FROM ${activity} a
    WHERE a.finished_at > now() - ${sinceMs} * interval '1 millisecond'
      ${subscription === undefined ? sql`` : sql`AND a.subscription_id = (SELECT id FROM ${subscriptions} WHERE name = ${subscription})`}
    GROUP BY 1`;
}
