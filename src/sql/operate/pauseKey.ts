import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";
import { tenantTurnsEarlier } from "../common/tenantTurns.js";

/**
 * Pauses one key of a subscription: it is never claimed (the claim's index leaves paused keys
 * out) and keeps its events in order; a batch already in flight finishes. A key with no row
 * yet gets one (numbered from the subscription's seq floor, read from its row as locked:
 * src/sql/common/keySeqFloor.ts), so its first events wait too. Pausing again keeps the first
 * pause's time. Returns the key when the subscription exists.
 */
export function pauseKey(subscription: string, key: string): SQL {
  return sql`
    INSERT INTO ${keys} AS k (subscription_id, key, paused_at, seq)
    SELECT id, ${key}, now(), key_seq_floor FROM ${subscriptions} WHERE name = ${subscription} ORDER BY id FOR SHARE
    ON CONFLICT (subscription_id, key) DO UPDATE SET paused_at = coalesce(k.paused_at, excluded.paused_at)
    RETURNING k.key`;
}

/**
 * Resumes one paused key (claimable again at once, as the waiter it was; its tenant's turn in
 * the fair pick no later than the key's time); returns it when it exists.
 */
export function resumeKey(subscription: string, key: string): SQL {
  return sql`
    WITH resumed AS (
      UPDATE ${keys} k SET paused_at = NULL, active_at = now()
      FROM ${subscriptions} s
      WHERE s.name = ${subscription} AND k.subscription_id = s.id AND k.key = ${key}
      RETURNING k.subscription_id, k.key, k.tenant, k.available_at
    ),
    turns AS (${tenantTurnsEarlier(sql`resumed`)})
    SELECT key FROM resumed`;
}
