import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";

/**
 * Milliseconds until the next key of these subscriptions (or of any push subscription)
 * becomes ready — a backoff that ends, a lease that expires — by the database clock, or null
 * when none is waiting. One index probe per unpaused subscription (the partial ready index,
 * first row past now()). What a woken consumer sleeps until, instead of polling.
 */
export function nextDue(codeSubscriptions: string[]): SQL {
  return sql`
    SELECT ceil(extract(epoch FROM min(k.available_at) - now()) * 1000)::int AS due_in_ms
    FROM ${subscriptions} s
    CROSS JOIN LATERAL (
      SELECT available_at FROM ${keys} k
      WHERE k.subscription_id = s.id AND k.available_at > now()
      ORDER BY k.available_at LIMIT 1
    ) k
    WHERE NOT s.paused AND (s.kind = 'push' OR s.name = ANY(${sql.param(codeSubscriptions)}::text[]))`;
}
