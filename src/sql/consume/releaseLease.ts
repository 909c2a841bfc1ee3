import { sql, type SQL } from "drizzle-orm";
import { keys } from "../../db/schema.js";
import type { Lease } from "./ackBatch.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { lockedNow } from "../common/clock.js";

/**
 * Gives a claimed key back untouched (ready again now): for a claim whose batch came out
 * empty because everything its snapshot saw had been acked by another consumer meanwhile,
 * and for a batch whose handler gave up in a graceful stop (consume.ts). One row when the
 * lease was still ours.
 */
export function releaseLease(lease: Lease): SQL {
  return sql`
    UPDATE ${keys} SET lease_token = NULL, lease_until = NULL, available_at = ${lockedNow}
    WHERE subscription_id = ${lease.subscriptionId} AND key = ${lease.key} AND lease_token = ${lease.token}::uuid AND ${asyncCommit}
    RETURNING 1 AS released`;
}
