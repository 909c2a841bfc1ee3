import { sql, type SQL } from "drizzle-orm";
import { roomFreed } from "../common/tenantTurns.js";
import { keys } from "../../db/schema.js";
import type { Lease } from "./ackBatch.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { lockedNow } from "../common/clock.js";
import { heldUntil } from "../common/delays.js";

/**
 * Gives a claimed key back untouched: ready again now (or when its delayed head may go), or
 * idle when nothing is queued. For a claim whose batch stopped at a delayed head, for a
 * claim whose batch came out empty — everything its snapshot saw had been acked by another
 * consumer meanwhile, or an erasure round took events of the key after its snapshot
 * (claimBatch.ts) — and for a batch whose handler gave up in a graceful stop (consume.ts).
 * One row when the lease was still ours. Under maxLeasedKeysPerTenant its tenant has room again
 * (roomFreed).
 */
export function releaseLease(lease: Lease): SQL {
  return sql`
    WITH released AS (
      UPDATE ${keys} k SET lease_token = NULL, lease_until = NULL,
        -- ready now, or at its head's time when that is a delayed event (a claim's empty batch);
        -- nothing queued (an erasure took the key's events while its lease ran): idle, not ready
        available_at = CASE WHEN pending > 0 THEN greatest(${lockedNow}, ${heldUntil({
          subscriptionId: sql`${lease.subscriptionId}::int`,
          key: sql`${lease.key}::text`,
          after: sql`k.last_seq`,
          at: lockedNow,
        })}) END,
        attempts = CASE WHEN pending > 0 THEN attempts ELSE 0 END
      WHERE subscription_id = ${lease.subscriptionId} AND key = ${lease.key} AND lease_token = ${lease.token}::uuid AND ${asyncCommit}
      RETURNING k.subscription_id, k.tenant
    ),
    released_room AS (${roomFreed(sql`released`)})
    SELECT 1 AS released FROM released`;
}
