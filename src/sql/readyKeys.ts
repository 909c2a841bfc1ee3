import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../db/schema.js";

/**
 * How many keys are ready per unpaused subscription, counting at most `cap` each (an index
 * range scan of the partial index that stops at `cap`): what a dispatcher needs to decide how
 * many consumer invocations to start.
 */
export function readyKeys(cap: number): SQL {
  return sql`
    SELECT s.name, (
      SELECT count(*) FROM (
        SELECT 1 FROM ${keys} k WHERE k.subscription_id = s.id AND k.available_at <= now() LIMIT ${cap}
      ) ready
    )::int AS ready
    FROM ${subscriptions} s
    WHERE NOT s.paused`;
}
