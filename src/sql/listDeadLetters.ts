import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../db/schema.js";

/** Dead keys, newest first, with the event that failed. */
export function listDeadLetters(subscription: string | undefined, limit: number): SQL {
  return sql`
    SELECT s.name AS subscription, k.key, k.failed_position, k.attempts, k.last_error, k.dead_at
    FROM ${keys} k JOIN ${subscriptions} s ON s.id = k.subscription_id
    WHERE k.dead_at IS NOT NULL ${subscription === undefined ? sql`` : sql`AND s.name = ${subscription}`}
    ORDER BY k.dead_at DESC, s.name, k.key
    LIMIT ${limit}`;
}
