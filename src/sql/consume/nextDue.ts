import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";

/**
 * Milliseconds until the next key of these subscriptions (or of any push subscription)
 * becomes ready — a backoff that ends, a lease that expires — by the database clock, or null
 * when none is waiting. Two index probes per unpaused subscription: the partial ready index's
 * first live and first replaying row past now() (its second column named as it is indexed, as
 * in claimBatch.ts: one probe over both would sort every waiting key). A paused key is never
 * claimed, so it wakes no one (and only with paused_at IS NULL does the partial index apply).
 */
export function nextDue(codeSubscriptions: string[]): SQL {
  const first = (replaying: boolean) => sql`(SELECT k.available_at FROM ${keys} k
        WHERE k.subscription_id = s.id AND (k.last_seq < k.replay_seq) IS ${replaying ? sql`TRUE` : sql`FALSE`}
          AND k.available_at > now() AND k.paused_at IS NULL
        ORDER BY k.available_at LIMIT 1)`;
  return sql`
    SELECT ceil(extract(epoch FROM min(least(${first(false)}, ${first(true)})) - now()) * 1000)::int AS due_in_ms
    FROM ${subscriptions} s
    WHERE NOT s.paused AND (s.kind = 'push' OR s.name = ANY(${sql.param(codeSubscriptions)}::text[]))`;
}
