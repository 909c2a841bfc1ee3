// Whatever gives a tenant's key work makes the tenant's turn in the fair pick earlier
// (src/sql/consume/fairPick.ts): the turn is never later than the earliest time one of its
// keys may be ready, or the walk would pass a tenant with ready keys by.
import { sql, type SQL } from "drizzle-orm";
import { subscriptions, tenants } from "../../db/schema.js";

/**
 * An INSERT that makes the turn of each tenant of `rows` (a CTE with `subscription_id`, `tenant`
 * and `available_at`: key rows as an update returned them) no later than its rows' earliest time, making the tenant's row if it has none
 * (a tenant pruned while idle). ON CONFLICT DO UPDATE locks every tenant row it meets, even one
 * it leaves as it is: a claim deciding that tenant's next turn at the same moment
 * (corq.tenant_next_turn, which reads the keys under that lock) either sees this statement's
 * keys, or skips the locked row, or runs first and is then corrected here. Rows in tenant order:
 * one lock order for every writer.
 */
export function tenantTurnsEarlier(rows: SQL): SQL {
  return sql`
    INSERT INTO ${tenants} AS t (subscription_id, tenant, due_at)
    SELECT r.subscription_id, r.tenant, min(r.available_at) FROM ${rows} r
    WHERE r.tenant IS NOT NULL AND r.available_at IS NOT NULL
    GROUP BY r.subscription_id, r.tenant
    ORDER BY r.subscription_id, r.tenant
    ON CONFLICT (subscription_id, tenant) DO UPDATE SET due_at = excluded.due_at
    WHERE t.due_at IS NULL OR t.due_at > excluded.due_at`;
}

/**
 * Keys of a subscription with maxLeasedKeysPerTenant just settled (acked, failed, postponed,
 * released): their tenants have room again, so their turns come now — a tenant a claim found at
 * its cap waits for the first of its leases' ends (corq.tenant_next_turn), not for a settle it
 * cannot see. `rows`: a CTE of key rows with `subscription_id` and `tenant`. Nothing for a
 * subscription without that cap (a claim keeps a tenant with a leased key due at once).
 */
export function roomFreed(rows: SQL): SQL {
  return tenantTurnsEarlier(sql`(
    SELECT r.subscription_id, r.tenant, now() AS available_at FROM ${rows} r
    WHERE (SELECT s.max_leased_keys_per_tenant FROM ${subscriptions} s WHERE s.id = r.subscription_id) IS NOT NULL)`);
}
