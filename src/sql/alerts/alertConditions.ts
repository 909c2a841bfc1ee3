import { sql, type SQL } from "drizzle-orm";
import { alertSends, events, keys, subscriptions } from "../../db/schema.js";
import { unadvancedUpTo } from "../common/unadvanced.js";

// The conditions a pass evaluates (src/corq/alerts.ts), each in one statement of index probes:
// what it costs is what there is to report, not the size of the log or of the keys table.

export interface DeadKeyRow {
  alert_id: number;
  subscription: string;
  key: string;
  position: string | null;
  error: string | null;
  dead_at: Date | string;
  /** What the alert is about, as the sends table keys it: [subscription, key] as JSON text. */
  subject: string;
  /** The death: dead_at in microseconds (a key that dies again is another incident). */
  incident: string;
}

/**
 * Per alert, the keys that died after its `since` (keys_dead_at_idx: a range of each
 * subscription's dead keys), oldest first, at most `limit` per subscription — leaving out the
 * ones it has sent about already (this death) or lately (another death of the key within its
 * min interval), so that a pass that stopped at the limit goes on with the next ones.
 */
export function deadKeysSince(watching: { id: number; since: string; minIntervalMs: number }[], limit: number): SQL {
  const subject = sql`jsonb_build_array(s.name, k.key)::text`;
  const incident = sql`(extract(epoch FROM k.dead_at) * 1000000)::bigint::text`;
  return sql`
    SELECT a.id AS alert_id, s.name AS subscription, d.key, d.failed_position AS position, d.last_error AS error,
      d.dead_at, d.subject, d.incident
    FROM jsonb_to_recordset(${JSON.stringify(watching)}::jsonb) AS a(id int, since timestamptz, "minIntervalMs" bigint)
    CROSS JOIN ${subscriptions} s
    CROSS JOIN LATERAL (
      SELECT k.key, k.failed_position, k.last_error, k.dead_at, ${subject} AS subject, ${incident} AS incident
      FROM ${keys} k
      WHERE k.subscription_id = s.id AND k.dead_at > a.since
        AND NOT EXISTS (
          SELECT FROM ${alertSends} x
          WHERE x.alert_id = a.id AND x.type = 'key.dead' AND x.subject = ${subject}
            AND (x.incident = ${incident} OR x.queued_at > now() - a."minIntervalMs" * interval '1 millisecond'))
      ORDER BY k.dead_at
      LIMIT ${limit}
    ) d
    ORDER BY d.dead_at, s.name, d.key`;
}

// The keys that can have pending events, in three disjoint parts, each read through its partial
// index (keys_ready_idx, keys_dead_at_idx, keys_paused_at_idx): with one LIMIT over the three
// OR-ed together the planner walked the subscription's primary key instead, idle keys and all
// (EXPLAIN with 100,000 keys a subscription) — every pass.
const queuedParts = [
  sql`k.available_at IS NOT NULL AND k.paused_at IS NULL`,
  sql`k.dead_at IS NOT NULL AND k.paused_at IS NULL`,
  sql`k.paused_at IS NOT NULL`,
];

export interface SubscriptionConditionRow {
  name: string;
  advance_error: string | null;
  advance_error_at: Date | string | null;
  /** Events not advanced plus events queued, each counted up to the cap (null: no cap asked). */
  lag: string | null;
}

/**
 * Every subscription's advance error, and — with `lagCap` — how many events it has not handled:
 * those past its watermark in log order (events (tx, position)) and those queued (keys with
 * pending events, ready or leased, dead, paused), each part counted up to `lagCap` rows. A
 * count under the cap is exact; one at it says "at least" (subscriptionLag counts it whole).
 */
export function subscriptionConditions(lagCap: number): SQL {
  const lag =
    lagCap > 0
      ? sql`${unadvancedUpTo(lagCap)}
          + ${sql.join(
            queuedParts.map(
              (part) => sql`(SELECT coalesce(sum(q.pending), 0) FROM (SELECT k.pending FROM ${keys} k
                WHERE k.subscription_id = s.id AND ${part} AND k.pending > 0 LIMIT ${lagCap}) q)`,
            ),
            sql` + `,
          )}`
      : sql`NULL`;
  return sql`
    SELECT s.name, s.advance_error, s.advance_error_at, (${lag})::bigint AS lag
    FROM ${subscriptions} s
    ORDER BY s.name`;
}

/** The whole lag (events not advanced plus queued) of the subscriptions named: for an alert's payload. */
export function subscriptionLag(names: string[]): SQL {
  return sql`
    SELECT s.name,
      ((SELECT count(*) FROM ${events} e WHERE (e.tx, e.position) > (s.watermark_tx, s.watermark_position))
        + ${sql.join(
          queuedParts.map(
            (part) =>
              sql`(SELECT coalesce(sum(k.pending), 0) FROM ${keys} k WHERE k.subscription_id = s.id AND ${part})`,
          ),
          sql` + `,
        )})::bigint AS lag
    FROM ${subscriptions} s
    WHERE s.name = ANY (${sql.param(names)}::text[])`;
}
