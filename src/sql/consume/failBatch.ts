import { sql, type SQL } from "drizzle-orm";
import { roomFreed } from "../common/tenantTurns.js";
import { activity, keys, subscriptions } from "../../db/schema.js";
import { fencedKey, type Lease } from "./ackBatch.js";
import { asyncCommit } from "../common/asyncCommit.js";

/**
 * Fails a claimed batch in ONE statement (fenced by the lease like ackBatch: fencedKey): attempts + 1,
 * then either backoff (initialMs · factor^(attempts-1), capped at maxMs, computed in SQL
 * from the subscription's settings and the database clock) or dead after maxAttempts.
 * The batch stays at the head of its key: order is kept. The batch (`count` events) is
 * recorded in the activity table.
 */
export function failBatch(
  lease: Lease,
  { error, headPosition, count, claimedAt }: { error: string; headPosition: number; count: number; claimedAt: Date },
): SQL {
  return sql`
    WITH ${fencedKey(lease)},
    failed AS (
      UPDATE ${keys} k SET
        -- pending 0: an erasure took every event of the key while the batch ran; nothing is
        -- left to retry, so the key is idle, no attempt counted (never dead on a missing event)
        attempts = CASE WHEN k.pending = 0 THEN 0 ELSE k.attempts + 1 END,
        last_error = ${error},
        failed_position = CASE WHEN k.pending > 0 THEN ${headPosition}::bigint END,
        lease_token = NULL, lease_until = NULL,
        dead_at = CASE WHEN k.attempts + 1 >= s.max_attempts AND k.pending > 0 THEN f.at END,
        available_at = CASE WHEN k.attempts + 1 >= s.max_attempts OR k.pending = 0 THEN NULL
          ELSE f.at + least(s.backoff_max_ms, s.backoff_initial_ms * power(s.backoff_factor, least(k.attempts, 60)))
                       * interval '1 millisecond' END
      FROM fenced f, ${subscriptions} s
      WHERE k.subscription_id = f.subscription_id AND k.key = f.key AND ${asyncCommit}
        AND k.subscription_id = ${lease.subscriptionId} AND k.key = ${lease.key} AND s.id = ${lease.subscriptionId}
      RETURNING k.subscription_id, k.key, k.dead_at IS NOT NULL AS dead, k.tenant
    ),
    failed_room AS (${roomFreed(sql`failed`)}),
    recorded AS (
      INSERT INTO ${activity} (subscription_id, key, started_at, events, outcome)
      SELECT subscription_id, key, ${claimedAt.toISOString()}::timestamptz, ${count}, CASE WHEN dead THEN 'dead' ELSE 'failed' END
      FROM failed
    )
    SELECT dead FROM failed`;
}
