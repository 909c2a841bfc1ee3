import { sql, type SQL } from "drizzle-orm";
import { alerts, events, streams, subscriptionCounters, subscriptions } from "../../db/schema.js";

// The counters of GET /metrics that are not in the batch-duration table: each read from rows
// that only ever count up, so a counter never goes back — pruning the activity record,
// housekeeping, retention and erasure delete none of them (docs/operations.md, "Metrics").

export interface SubscriptionCounterRow {
  subscription: string;
  batches_expired: string;
  batches_postponed: string;
  keys_dead_lettered: string;
}

/** The key-row counters (kept by a trigger on keys: schema.ts, subscriptionCounters), per existing subscription; 0 before the first. */
export function listSubscriptionCounters(): SQL {
  return sql`
    SELECT s.name AS subscription, coalesce(c.batches_expired, 0) AS batches_expired,
      coalesce(c.batches_postponed, 0) AS batches_postponed, coalesce(c.keys_dead_lettered, 0) AS keys_dead_lettered
    FROM ${subscriptions} s LEFT JOIN ${subscriptionCounters} c ON c.subscription_id = s.id
    ORDER BY s.name`;
}

export interface LogCountersRow {
  head: string | null;
  appended: string;
}

/**
 * The log's last position, and the events ever appended: each stream's row keeps its version
 * (events appended to it, less one) through erasure and retention, and is never deleted, so
 * the sum never goes back; an append pays nothing more than the version it already writes. The
 * sum reads every stream's row (~0.1 s per million streams: docs/operations.md, "Metrics").
 */
export function logCounters(): SQL {
  return sql`
    SELECT (SELECT max(position) FROM ${events}) AS head,
      (SELECT coalesce(sum(version::bigint + 1), 0) FROM ${streams}) AS appended`;
}

export interface AlertCounterRow {
  alert: string;
  sent: string;
  failed: string;
}

/** Each alert's sends: delivered, and given up after their retries (alerts.sent / failed, kept by settleAlertSends). */
export function listAlertCounters(): SQL {
  return sql`SELECT name AS alert, sent, failed FROM ${alerts} ORDER BY name`;
}
