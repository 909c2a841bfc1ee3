import { sql, type SQL } from "drizzle-orm";
import { keys } from "../../db/schema.js";

/**
 * The keys of a subscription under a live lease, counted up to `cap` (maxLeasedKeys): live and
 * replaying keys each by a range of the ready index (a leased key's available_at is its lease's
 * end, so the range starts at now), then paused keys whose batch still runs (their own small
 * index). The same count as corq.lease_room (drizzle/0018), which claims run under their turn's
 * lock; this one is for display and takes no lock.
 */
export function leasedKeysUpTo(subscriptionId: SQL, cap: SQL): SQL {
  const part = (condition: SQL, order: SQL = sql``) => sql`(SELECT 1 FROM ${keys} l
      WHERE l.subscription_id = ${subscriptionId} AND ${condition} AND l.lease_until > now() ${order} LIMIT ${cap})`;
  const unpaused = (replaying: boolean) =>
    part(
      sql`(l.last_seq < l.replay_seq) IS ${replaying ? sql`TRUE` : sql`FALSE`} AND l.available_at > now() AND l.paused_at IS NULL`,
      sql`ORDER BY l.available_at`,
    );
  return sql`(SELECT count(*) FROM (
      ${unpaused(false)} UNION ALL ${unpaused(true)} UNION ALL ${part(sql`l.paused_at IS NOT NULL`)}) f)::int`;
}
