import { sql, type SQL } from "drizzle-orm";
import { activity, events, subscriptions } from "../db/schema.js";
import { eventColumns } from "./eventColumns.js";

/** The batches that finished in the last `sinceMs`, newest first (the dashboard's timeline). */
export function recentBatches(subscription: string | undefined, sinceMs: number, limit: number): SQL {
  return sql`
    SELECT s.name AS subscription, a.key, a.started_at, a.finished_at, a.events, a.outcome
    FROM ${activity} a JOIN ${subscriptions} s ON s.id = a.subscription_id
    WHERE a.finished_at > now() - ${sinceMs} * interval '1 millisecond'
      ${subscription === undefined ? sql`` : sql`AND s.name = ${subscription}`}
    ORDER BY a.finished_at DESC
    LIMIT ${limit}`;
}

/**
 * Events acked per subscription in buckets of `bucketMs` over the last `windowMs`: bucket 0
 * is the newest (it ends now). Empty buckets are absent (the caller fills zeros).
 */
export function ackedPerBucket(windowMs: number, bucketMs: number): SQL {
  return sql`
    SELECT s.name AS subscription,
      floor(extract(epoch FROM now() - a.finished_at) * 1000 / ${bucketMs})::int AS bucket,
      sum(a.events)::bigint AS events
    FROM ${activity} a JOIN ${subscriptions} s ON s.id = a.subscription_id
    WHERE a.outcome = 'acked' AND a.finished_at > now() - ${windowMs} * interval '1 millisecond'
    GROUP BY 1, 2`;
}

export interface BatchRecordRow {
  subscriptionId: number;
  key: string;
  startedAt: Date;
  finishedAt: Date;
  events: number;
}

/**
 * Records acked batches, many in one statement: the drain loop buffers what its ack+claim
 * statements acked and writes it here now and then (an insert in every ack+claim cost a
 * quarter of the consume throughput).
 */
export function recordBatches(rows: BatchRecordRow[]): SQL {
  return sql`
    INSERT INTO ${activity} (subscription_id, key, started_at, finished_at, events, outcome)
    SELECT *, 'acked' FROM unnest(
      ${sql.param(rows.map((r) => r.subscriptionId))}::int[], ${sql.param(rows.map((r) => r.key))}::text[],
      ${sql.param(rows.map((r) => r.startedAt.toISOString()))}::timestamptz[],
      ${sql.param(rows.map((r) => r.finishedAt.toISOString()))}::timestamptz[], ${sql.param(rows.map((r) => r.events))}::int[])`;
}

/** Forgets batches older than `olderThanMs`. */
export function pruneActivity(olderThanMs: number): SQL {
  return sql`
    WITH pruned AS (DELETE FROM ${activity} WHERE finished_at < now() - ${olderThanMs} * interval '1 millisecond' RETURNING 1)
    SELECT count(*)::int AS pruned FROM pruned`;
}

/** The newest committed events of the log, newest first (a display, not a safe cursor read). */
export function logTail(limit: number): SQL {
  return sql`SELECT ${eventColumns} FROM ${events} e ORDER BY e.position DESC LIMIT ${limit}`;
}

/** Every subscription's name. */
export function subscriptionNames(): SQL {
  return sql`SELECT name FROM ${subscriptions} ORDER BY name`;
}
