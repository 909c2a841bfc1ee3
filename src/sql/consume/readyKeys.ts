import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";

/**
 * Per unpaused subscription: keys ready to claim and keys under a live lease (consumers at
 * work), each counted up to `cap` by a range scan of the partial index that stops at `cap`.
 * Paused keys are never claimed, so they do not count (and the index leaves them out).
 * What a dispatcher needs to decide how many consumer invocations to start.
 */
export function readyKeys(cap: number): SQL {
  return sql`
    SELECT s.name, s.kind,
      (SELECT count(*) FROM (
        SELECT 1 FROM ${keys} k WHERE k.subscription_id = s.id AND k.available_at <= now() AND k.paused_at IS NULL LIMIT ${cap}
      ) ready)::int AS ready,
      (SELECT count(*) FROM (
        SELECT 1 FROM ${keys} k WHERE k.subscription_id = s.id AND k.available_at > now() AND k.lease_until > now() AND k.paused_at IS NULL
          LIMIT ${cap}
      ) leased)::int AS leased
    FROM ${subscriptions} s
    WHERE NOT s.paused`;
}
