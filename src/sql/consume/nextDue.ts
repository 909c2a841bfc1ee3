import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";

/**
 * Milliseconds until the next key of these subscriptions (or of any push subscription)
 * becomes ready — a backoff that ends, a lease that expires, a delayed event's time — by the
 * database clock, or null when none is waiting. A key that became ready within the last
 * `recentMs` counts too (a due time ≤ 0: look now): it may have come due after the last claim
 * found nothing and before this read, and would otherwise wait for the next key's time or the
 * safety net (seen as 3 s late delayed events). Older ready keys do not: a consumer that looked
 * and could not take them (a subscription at its maxLeasedKeys) is not woken over and over. Two index probes per unpaused subscription: the partial ready index's
 * first live and first replaying row past now() (its second column named as it is indexed, as
 * in claimBatch.ts: one probe over both would sort every waiting key). A paused key is never
 * claimed, so it wakes no one (and only with paused_at IS NULL does the partial index apply).
 * A float8 (a number in the drivers; whole milliseconds, exact far past any due time): an int
 * overflowed past 2^31 ms, 24.8 days, and a delay may be a year (maxDelayMs).
 */
export function nextDue(codeSubscriptions: string[], { recentMs = 0 }: { recentMs?: number } = {}): SQL {
  const first = (replaying: boolean) => sql`(SELECT k.available_at FROM ${keys} k
        WHERE k.subscription_id = s.id AND (k.last_seq < k.replay_seq) IS ${replaying ? sql`TRUE` : sql`FALSE`}
          AND k.available_at > now() - ${recentMs} * interval '1 millisecond' AND k.paused_at IS NULL
        ORDER BY k.available_at LIMIT 1)`;
  return sql`
    SELECT ceil(extract(epoch FROM min(least(${first(false)}, ${first(true)})) - now()) * 1000)::float8 AS due_in_ms
    FROM ${subscriptions} s
    WHERE NOT s.paused AND (s.kind = 'push' OR s.name = ANY(${sql.param(codeSubscriptions)}::text[]))`;
}
