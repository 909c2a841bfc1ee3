import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";
import type { KeyStatus } from "../../types.js";

/**
 * The derived status of key row `k` (see the keys table in db/schema.ts). One status per key:
 * dead first (it runs again only when released), then paused (a batch in flight finishes).
 */
export const keyStatus = sql`CASE
  WHEN k.dead_at IS NOT NULL THEN 'dead'
  WHEN k.paused_at IS NOT NULL THEN 'paused'
  WHEN k.lease_until > now() THEN 'leased'
  WHEN k.available_at <= now() THEN 'ready'
  WHEN k.available_at > now() THEN 'backoff'
  ELSE 'idle' END`;

/** Each status as a condition on key row `k`, agreeing with keyStatus (the statuses partition the keys). */
export const statusFilter: Record<KeyStatus, SQL> = {
  dead: sql`k.dead_at IS NOT NULL`,
  paused: sql`k.paused_at IS NOT NULL AND k.dead_at IS NULL`,
  leased: sql`k.lease_until > now() AND k.paused_at IS NULL`,
  ready: sql`k.available_at <= now() AND k.paused_at IS NULL`,
  backoff: sql`k.available_at > now() AND (k.lease_until IS NULL OR k.lease_until <= now()) AND k.paused_at IS NULL`,
  idle: sql`k.available_at IS NULL AND k.dead_at IS NULL AND k.paused_at IS NULL`,
};

/**
 * Keys of a subscription in key order, keyset-paged by `after` (stays fast with millions of
 * keys), or one key (`only`). The subscription id is a scalar subquery, not a join: the
 * planner then walks the primary key (subscription_id, key) in order and stops after `limit`
 * rows; a join made it sort all of a million keys (~1 s). What the reason text needs comes
 * along (the subscription's max attempts and pause, the lease's holder).
 */
export function listKeys(
  subscription: string,
  options: { status?: KeyStatus; after?: string; limit: number; only?: string },
): SQL {
  return sql`
    SELECT k.key, ${keyStatus} AS status, k.pending, k.attempts, k.available_at, k.last_error, k.last_position,
      k.failed_position, k.dead_at, k.paused_at, k.lease_until, k.lease_holder, k.leased_at, k.seq,
      (k.last_seq < k.replay_seq) AS replaying, now() AS now,
      (SELECT max_attempts FROM ${subscriptions} WHERE name = ${subscription}) AS max_attempts,
      (SELECT paused FROM ${subscriptions} WHERE name = ${subscription}) AS subscription_paused
    FROM ${keys} k
    WHERE k.subscription_id = (SELECT id FROM ${subscriptions} WHERE name = ${subscription})
      ${options.status ? sql`AND ${statusFilter[options.status]}` : sql``}
      ${options.after !== undefined ? sql`AND k.key > ${options.after}` : sql``}
      ${options.only !== undefined ? sql`AND k.key = ${options.only}` : sql``}
    ORDER BY k.key
    LIMIT ${options.limit}`;
}
