// The rate-limit part of the claim statement (claimBatch.ts): CTEs that read `sub` and `taken`
// and give `granted` (the keys leased) and `limited` (the keys that wait for their bucket).
import { sql, type SQL } from "drizzle-orm";
import { keys } from "../../db/schema.js";

/**
 * Rate limits (docs/flow-control.md; nothing runs without one): of the keys taken, how many
 * events each may have, from its bucket — its own ("k:<key>"), its tenant's ("t:<tenant>") or
 * the subscription's ("s"), as the limit's `by` says.
 *   rate_wants  each key's batch as it will be (one event after a failure, else batchSize;
 *               no more than it has queued); a key that dies here wants nothing
 *   rated       each bucket's room for the sum of its keys' wants, taken in ONE call of
 *               corq.rate_take per bucket, in bucket order (claims that share buckets lock
 *               them in one order); the function takes its turn on the bucket's row and reads
 *               it afresh, so claims of one bucket never grant the same room twice; at most
 *               `burst` events at once (default 1: one every perMs / events)
 *   shares      the room dealt to the bucket's keys in pick order: a key may get a smaller
 *               batch than it wanted; one that gets none is limited
 *   granted     the keys leased: every taken one but the limited
 *   limited     the limited keys wait (available_at) until their bucket has room for their
 *               batch after the batches of the limited keys before them (each of those takes at
 *               most `burst` events when it comes back), marked rate_waits
 *               (the keys view says why): no lease, no attempt
 */
export function rateLimited(): SQL {
  const limit = (field: string) => sql`(SELECT (rate_limit ->> ${field})::int FROM sub)`;
  // a limit stored by the previous release has no burst (migration 0030 gave every stored one 1)
  const burst = sql`(SELECT coalesce((rate_limit ->> 'burst')::int, 1) FROM sub)`;
  return sql`
    rate_wants AS (
      SELECT t.key, t.dies, row_number() OVER (ORDER BY t.replaying, t.waited_since, t.key) AS turn,
        CASE (SELECT rate_limit ->> 'by' FROM sub) WHEN 'key' THEN 'k:' || t.key
          WHEN 'tenant' THEN 't:' || coalesce(t.tenant, '') ELSE 's' END AS bucket,
        CASE WHEN t.dies THEN 0
          ELSE least(CASE WHEN t.attempts + t.expired::int > 0 THEN 1 ELSE (SELECT batch_size FROM sub) END, t.pending)
        END AS want
      FROM taken t WHERE (SELECT rate_limit FROM sub) IS NOT NULL
    ),
    rated AS MATERIALIZED (
      SELECT b.bucket, r.granted, r.next_at
      FROM (SELECT bucket, sum(want)::int AS want FROM rate_wants GROUP BY bucket ORDER BY bucket) b
      CROSS JOIN LATERAL corq.rate_take((SELECT id FROM sub), b.bucket, ${limit("events")}, ${limit("perMs")}, ${burst}, b.want) r
    ),
    dealt AS (
      SELECT w.key, w.want, w.bucket, w.turn, r.next_at,
        least(w.want, greatest(0, r.granted - (sum(w.want) OVER (PARTITION BY w.bucket ORDER BY w.turn) - w.want))) AS share
      FROM rate_wants w JOIN rated r ON r.bucket = w.bucket
    ),
    shares AS (
      -- a bucket's limited keys wait one behind the other: each until there is room for the
      -- batches of those before it too (all at next_at, they would all come back at once, and
      -- each claim then would take one and send the rest back to wait); a key that comes back
      -- takes at most the burst's events (the bucket never holds more room)
      SELECT d.key, d.want, d.share,
        d.next_at + (sum(least(d.want, ${burst})) OVER (PARTITION BY d.bucket, d.share = 0 ORDER BY d.turn)
          - least(d.want, ${burst}))
          * (${limit("perMs")}::float8 / ${limit("events")}) * interval '1 millisecond' AS wait_until
      FROM dealt d
    ),
    granted AS (
      SELECT t.*, s.share FROM taken t LEFT JOIN shares s ON s.key = t.key
      WHERE t.dies OR s.key IS NULL OR s.share > 0 OR s.want = 0
    ),
    limited AS (
      UPDATE ${keys} k SET available_at = s.wait_until, rate_waits = true
      FROM shares s
      WHERE s.share = 0 AND s.want > 0 AND k.subscription_id = (SELECT id FROM sub) AND k.key = s.key
        AND k.key = ANY(ARRAY(SELECT key FROM shares WHERE share = 0 AND want > 0 ORDER BY key))
      RETURNING k.key
    )`;
}
