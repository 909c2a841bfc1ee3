import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, subscriptions } from "../../db/schema.js";
import { statusFilter } from "./listKeys.js";

/**
 * Settings and live figures of every subscription (or one). Key counts read only keys with
 * work or paused (the partial indexes), so they cost what is pending, not how many keys ever
 * existed; they count each key once, by its status (listKeys.ts).
 * lag = events in the log past the watermark (matching or not); oldest pending age = age of
 * the lowest queued position.
 */
export function subscriptionStats(name?: string): SQL {
  return sql`
    SELECT s.id, s.name, s.kind, s.events, s.streams, s.key, s."from", s.batch_size, s.max_attempts, s.lease_ms,
      s.backoff_initial_ms, s.backoff_max_ms, s.backoff_factor, s.deliver, s.paused, s.watermark_position, s.skipped,
      s.skipped_invalid, s.last_skip, s.skipped_dead, s.advance_error, s.advance_error_at, s.incarnation,
      (SELECT count(*) FROM ${events} e WHERE (e.tx, e.position) > (s.watermark_tx, s.watermark_position))::bigint AS lag,
      c.pending, c.ready, c.leased, c.backoff, c.dead, c.paused_keys,
      (SELECT (extract(epoch FROM now() - e.created_at) * 1000)::bigint FROM ${events} e
        WHERE e.position = (SELECT min(q.position) FROM ${queue} q WHERE q.subscription_id = s.id)) AS oldest_pending_age_ms
    FROM ${subscriptions} s
    CROSS JOIN LATERAL (
      SELECT coalesce(sum(k.pending), 0)::bigint AS pending,
        count(*) FILTER (WHERE ${statusFilter.ready})::int AS ready,
        count(*) FILTER (WHERE ${statusFilter.leased})::int AS leased,
        count(*) FILTER (WHERE ${statusFilter.backoff})::int AS backoff,
        count(*) FILTER (WHERE ${statusFilter.dead})::int AS dead,
        count(*) FILTER (WHERE ${statusFilter.paused})::int AS paused_keys
      FROM ${keys} k
      -- the three partial indexes (ready, dead, paused): idle keys are never read
      WHERE k.subscription_id = s.id
        AND ((k.available_at IS NOT NULL AND k.paused_at IS NULL) OR k.dead_at IS NOT NULL OR k.paused_at IS NOT NULL)
    ) c
    ${name === undefined ? sql`` : sql`WHERE s.name = ${name}`}
    ORDER BY s.name`;
}

/** The head of the log: last position and number of events. */
export function logHead(): SQL {
  return sql`SELECT (SELECT max(position) FROM ${events}) AS head, (SELECT count(*) FROM ${events}) AS events`;
}

/** The last position of the log alone (an index probe; logHead also counts every event). */
export function logPosition(): SQL {
  return sql`SELECT (SELECT max(position) FROM ${events}) AS head`;
}
