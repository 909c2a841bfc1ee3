// The fair parts of the claim's pick (claimBatch.ts pickKeys): CTEs that read `sub` (and
// `settled` when the claim settles first) and give `pick_fair` and `pick_untenanted`, rows of
// the pick's columns.
import { sql, type SQL } from "drizzle-orm";
import { keys, tenants } from "../../db/schema.js";
import { atMost, literalLimit } from "../common/literalLimit.js";

/**
 * With maxLeasedKeysPerTenant the live part takes nothing (it would pass the caps), so keys
 * without a tenant (made before the subscription had one, or by a rewind, until their next
 * event names one) are taken here: those among the 64 longest-waiting ready keys, read without
 * a lock, then each locked by its primary key, in that order (the lateral lookups follow the
 * array; the LIMIT stops them, so no more are locked than taken). Keys left waiting age to the
 * head of the ready index, so none waits forever, and the read stays 64 index entries however
 * many keys are ready. (As `key = ANY(…)` under an ORDER BY, PostgreSQL 15 without statistics
 * walked the ready index for them instead: a walk that reads every ready key when fewer than
 * the LIMIT are free.)
 */
export function pickUntenanted(limit: number, columns: SQL, settledFirst: SQL): SQL {
  const ready = (k: string) =>
    sql.raw(`${k}.subscription_id = (SELECT id FROM sub) AND ${k}.available_at <= now() AND ${k}.paused_at IS NULL
        AND (${k}.last_seq < ${k}.replay_seq) IS FALSE`);
  return sql`
    pick_untenanted AS (${atMost(
      limit,
      sql`SELECT taken.* FROM unnest(ARRAY(
          SELECT c.key FROM ${keys} c WHERE ${ready("c")} AND (SELECT max_leased_keys_per_tenant FROM sub) IS NOT NULL
          ORDER BY c.available_at, c.key LIMIT 64)) AS oldest(key)
      CROSS JOIN LATERAL (
        SELECT ${columns}, false AS replaying
        FROM ${keys} k, sub
        WHERE k.key = oldest.key AND ${ready("k")} AND k.tenant IS NULL AND NOT (SELECT paused FROM sub) ${settledFirst}
        FOR UPDATE OF k SKIP LOCKED) taken
      LIMIT ${literalLimit(limit)} - (SELECT count(*) FROM pick_fair)`,
    )})`;
}

/** At most this many tenants visited per claim, whatever the number of tenants (issue 47). */
export const TENANTS_PER_CLAIM = 32;

/**
 * Fairness between tenants (docs/flow-control.md): live keys of a subscription with a tenant,
 * shared round robin between its tenants with ready keys.
 *   fair_walk   the tenants whose turn has come (corq.tenants.due_at <= now, earliest first,
 *               ties by tenant), at most TENANTS_PER_CLAIM of them: a walk of tenants_due_idx,
 *               so tenants whose keys only wait (backoff, delays, rate limits) or have no work
 *               are never read, and a claim costs the same at 10 tenants as at 100,000
 *   fair_order  each with its weight (tenantWeights, default 1) and its place in the walk
 *   pick_fair   in that order, each tenant's oldest ready keys, up to weight × rounds of them,
 *               rounds = limit ÷ the weights of the tenants walked (rounded up: with two
 *               tenants and 16 keys per claim, 8 each; with 32 tenants, 1 each of the first 16),
 *               FOR UPDATE SKIP LOCKED within each tenant's walk; the walk of tenants stops at
 *               `limit` keys. Concurrent claims find the first tenants' keys locked and go on
 *               to the next ones.
 * Turns (claimBatch.ts `served`, corq.tenant_next_turn): a tenant the pick took keys of goes to
 * the back of the line (due now); one it reached and took nothing of is due when its next key
 * may be ready — now if that is within a lease (a leased key may be acked any moment), null if
 * none has work — and whatever gives a key of it work makes its turn earlier (tenantTurns.ts).
 * A tenant with fewer ready keys than its share leaves the rest to the live part (oldest
 * first), so nothing is left idle while a key is ready.
 */
export function pickFair(limit: number, columns: SQL, settledFirst: SQL): SQL {
  return sql`
    fair_walk AS MATERIALIZED (
      SELECT t.tenant, t.due_at FROM ${tenants} t
      WHERE t.subscription_id = (SELECT id FROM sub) AND t.due_at <= now()
        AND (SELECT tenant FROM sub) IS NOT NULL AND NOT (SELECT paused FROM sub)
      ORDER BY t.due_at, t.tenant
      LIMIT ${TENANTS_PER_CLAIM}
    ),
    fair_order AS MATERIALIZED (
      SELECT w.tenant, coalesce((s.tenant_weights ->> w.tenant)::int, 1) AS weight,
        row_number() OVER (ORDER BY w.due_at, w.tenant) AS turn
      FROM fair_walk w CROSS JOIN sub s
    ),
    fair_rounds AS (SELECT ceil(${literalLimit(limit)}::numeric / greatest(sum(weight), 1))::int AS n FROM fair_order),
    pick_fair AS (
      SELECT p.* FROM (SELECT * FROM fair_order ORDER BY turn) o
      CROSS JOIN LATERAL (
        SELECT ${columns}, false AS replaying
        FROM ${keys} k, sub
        WHERE k.subscription_id = (SELECT id FROM sub) AND k.tenant = o.tenant AND k.available_at <= now()
          AND k.paused_at IS NULL AND (k.last_seq < k.replay_seq) IS FALSE ${settledFirst}
        ORDER BY k.available_at, k.key
        -- with maxLeasedKeysPerTenant, no more than the tenant's room (corq.tenant_room, taken
        -- as the walk reaches the tenant: tenants it never reaches are not touched)
        LIMIT CASE WHEN (SELECT max_leased_keys_per_tenant FROM sub) IS NULL THEN o.weight * (SELECT n FROM fair_rounds)
          ELSE least(o.weight * (SELECT n FROM fair_rounds),
                     corq.tenant_room((SELECT id FROM sub), o.tenant, (SELECT max_leased_keys_per_tenant FROM sub))) END
        FOR UPDATE OF k SKIP LOCKED
      ) p
      LIMIT ${literalLimit(limit)}
    )`;
}
