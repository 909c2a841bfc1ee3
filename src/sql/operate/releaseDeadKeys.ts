import { sql, type SQL } from "drizzle-orm";
import { keys, queue, subscriptions } from "../../db/schema.js";
import { lockedNow } from "../common/clock.js";
import { tenantTurnsEarlier } from "../common/tenantTurns.js";

/**
 * Releases dead keys of a subscription (one key, or all when `key` is undefined), in ONE
 * statement. retry: ready again from the failed event, attempts (and postponements) reset. skip: the failed
 * event (the key's head) is deleted from the queue and recorded as skipped (on the key and in
 * the subscription's skippedDeadLetters), and the key goes on with the next event, or becomes
 * idle when there is none. Either way the keys' tenants get their turn in the fair pick again.
 */
export function releaseDeadKeys(subscription: string, key: string | undefined, mode: "retry" | "skip"): SQL {
  const which = sql`k.dead_at IS NOT NULL AND ${key === undefined ? sql`true` : sql`k.key = ${key}`}`;
  if (mode === "retry") {
    return sql`
      WITH retried AS (
        UPDATE ${keys} k SET dead_at = NULL, attempts = 0, postponed = 0, postponed_since = NULL, available_at = ${lockedNow}
        FROM ${subscriptions} s
        WHERE s.name = ${subscription} AND k.subscription_id = s.id AND ${which}
        RETURNING k.subscription_id, k.key, k.tenant, k.available_at
      ),
      turns AS (${tenantTurnsEarlier(sql`retried`)})
      SELECT key FROM retried`;
  }
  // the subscription row is locked first (its skip counter moves too): the lock order of the
  // advance (subscription, then keys), so the two never deadlock
  return sql`
    WITH sub AS (SELECT id FROM ${subscriptions} WHERE name = ${subscription} FOR UPDATE),
    dead AS (
      SELECT k.subscription_id, k.key, k.last_seq FROM ${keys} k JOIN sub ON k.subscription_id = sub.id
      WHERE ${which}
      ORDER BY k.key
      FOR UPDATE OF k
    ),
    head AS (
      SELECT d.subscription_id, d.key, h.seq, h.tx, h.position FROM dead d
      CROSS JOIN LATERAL (
        SELECT q.seq, q.tx, q.position FROM ${queue} q
        WHERE q.subscription_id = d.subscription_id AND q.key = d.key AND q.seq > d.last_seq
        ORDER BY q.seq LIMIT 1
      ) h
    ),
    removed AS (
      DELETE FROM ${queue} q USING head
      WHERE q.subscription_id = head.subscription_id AND q.key = head.key AND q.seq = head.seq
    ),
    released AS (
      UPDATE ${keys} k SET dead_at = NULL, attempts = 0, postponed = 0, postponed_since = NULL, failed_position = NULL,
        pending = k.pending - 1, skipped = k.skipped + 1, last_seq = head.seq, last_tx = head.tx, last_position = head.position,
        available_at = CASE WHEN k.pending - 1 > 0 THEN ${lockedNow} END, active_at = ${lockedNow}
      FROM head
      WHERE k.subscription_id = head.subscription_id AND k.key = head.key
      RETURNING k.subscription_id, k.key, k.tenant, k.available_at
    ),
    turns AS (${tenantTurnsEarlier(sql`released`)}),
    counted AS (
      UPDATE ${subscriptions} s SET skipped_dead = s.skipped_dead + (SELECT count(*) FROM released)
      FROM sub WHERE s.id = sub.id
    )
    SELECT key FROM released`;
}
