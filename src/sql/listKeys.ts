import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../db/schema.js";
import type { KeyStatus } from "../types.js";

/** The derived status of key row `k` (see the keys table in db/schema.ts). */
export const keyStatus = sql`CASE
  WHEN k.dead_at IS NOT NULL THEN 'dead'
  WHEN k.lease_until > now() THEN 'leased'
  WHEN k.available_at <= now() THEN 'ready'
  WHEN k.available_at > now() THEN 'backoff'
  ELSE 'idle' END`;

const statusFilter: Record<KeyStatus, SQL> = {
  dead: sql`k.dead_at IS NOT NULL`,
  leased: sql`k.lease_until > now()`,
  ready: sql`k.available_at <= now()`,
  backoff: sql`k.available_at > now() AND (k.lease_until IS NULL OR k.lease_until <= now())`,
  idle: sql`k.available_at IS NULL AND k.dead_at IS NULL`,
};

/**
 * Keys of a subscription in key order, keyset-paged by `after` (stays fast with millions of
 * keys). The subscription id is a scalar subquery, not a join: the planner then walks the
 * primary key (subscription_id, key) in order and stops after `limit` rows; a join made it
 * sort all of a million keys (~1 s).
 */
export function listKeys(subscription: string, options: { status?: KeyStatus; after?: string; limit: number }): SQL {
  return sql`
    SELECT k.key, ${keyStatus} AS status, k.pending, k.attempts, k.available_at, k.last_error, k.last_position
    FROM ${keys} k
    WHERE k.subscription_id = (SELECT id FROM ${subscriptions} WHERE name = ${subscription})
      ${options.status ? sql`AND ${statusFilter[options.status]}` : sql``}
      ${options.after !== undefined ? sql`AND k.key > ${options.after}` : sql``}
    ORDER BY k.key
    LIMIT ${options.limit}`;
}
