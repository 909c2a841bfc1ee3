import { sql, type SQL } from "drizzle-orm";
import { roomFreed } from "../common/tenantTurns.js";
import { activity, keys, queue, subscriptions } from "../../db/schema.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { lockedNow } from "../common/clock.js";
import { heldUntil } from "../common/delays.js";
import type { AckThrough } from "./ackBatch.js";
import { MAX_POSTPONED_MS, MAX_POSTPONEMENTS } from "../../config.js";

/**
 * The outcome of one claimed batch, to be written with others in ONE statement: an ack through
 * a queue row (its seq, and its event's (tx, position) for display), or a failure with its error. Every settlement is fenced by its own
 * key's lease token: one key's lost lease never touches another key's settlement.
 */
export interface Settlement {
  key: string;
  token: string;
  /** The database clock at the claim: the batch's start in the activity record. */
  claimedAt: Date;
  /** Events acked (ack), or in the failed batch (fail). */
  count: number;
  /**
   * An ack through a queue row; a failure with its error; or a "come back later" answer
   * (`postponeMs`, with `error` saying why): nothing acked, the key waits that long and no
   * attempt is counted — until the postponements' bounds are past, when it fails like `error`.
   */
  outcome: { through: AckThrough } | { error: string; headPosition: number; postponeMs?: number };
}

/** What the statement did with one settlement: `expired` (no row) when the lease was gone. */
export interface SettledRow {
  key: string;
  outcome: "acked" | "retry" | "dead" | "postponed";
  /** acked: events still queued for the key (the same statement cannot claim it again) */
  pending: number | null;
  /** the database clock when the key row was locked: the batch's end in the activity record */
  at: string;
}

/**
 * The CTEs that settle many claimed batches of one subscription in ONE statement, ending in
 * `settled` (one row per settlement whose lease held: SettledRow):
 *   settle   the settlements, one row each (unnest of parallel arrays);
 *   locked   their key rows, locked in key order (the advancer's lock order: no deadlock with it);
 *   fenced   those whose lease is still theirs and unexpired when THEIR row was locked, with
 *            that moment (`at`). The same pattern as fencedKey (ackBatch.ts), per key: the lock
 *            comes first, in a CTE of its own, because an UPDATE evaluates its WHERE and SET
 *            before it waits for a row another session merely locked (see clock.ts). A CTE's
 *            rows are produced one by one, so each key's clock is read after its own lock;
 *   removed  the acked prefix of each key's queue rows, by seq (that key's only);
 *   acked    acks: pending − the rows removed, ready again at `at` if more is queued, the ack
 *            cursor (last_seq) moved;
 *   failed   failures: attempts + 1, backoff from `at` or dead after maxAttempts (as failBatch);
 *            and postponements past their bounds (MAX_POSTPONEMENTS since the last ack, or
 *            MAX_POSTPONED_MS since the first of them), with that reason;
 *   postponed the other postponements: the key waits postpone_ms from `at`, attempts untouched,
 *            the postponement counted (keys.postponed: what the bounds are checked on);
 *   failures the failed batches in the activity record (acks are buffered by the drain loop).
 * Each write names its rows in an index condition of its own (the settled keys, a parameter),
 * not only through its join with a CTE: a plan made while the tables were empty must still
 * read them by key once they are full (docs/architecture.md, "Plans made while a table was empty").
 */
export function settleCtes(
  subscriptionId: number,
  settlements: Settlement[],
  { freesRoom = true }: { freesRoom?: boolean } = {},
): SQL {
  const ack = (s: Settlement) => ("through" in s.outcome ? s.outcome : undefined);
  const fail = (s: Settlement) => ("error" in s.outcome ? s.outcome : undefined);
  const column = <T>(values: T[]) => sql.param(values);
  // the settled keys, as a parameter: each write below names them in its own index condition
  const settled = sql`${sql.param(settlements.map((s) => s.key))}::text[]`;
  const failing = settlements.some((x) => fail(x) !== undefined);
  const settledKeys = failing
    ? sql`(SELECT subscription_id, tenant FROM acked UNION ALL SELECT subscription_id, tenant FROM failed
           UNION ALL SELECT subscription_id, tenant FROM postponed)`
    : sql`acked`;
  const room = freesRoom
    ? sql`,
    ${settledRoom(settledKeys)}`
    : sql``;
  return sql`
    settle AS (
      SELECT * FROM unnest(
        ${column(settlements.map((s) => s.key))}::text[], ${column(settlements.map((s) => s.token))}::uuid[],
        ${column(settlements.map((s) => s.claimedAt.toISOString()))}::timestamptz[],
        ${column(settlements.map((s) => s.count))}::int[],
        ${column(settlements.map((s) => ack(s)?.through.tx ?? null))}::xid8[],
        ${column(settlements.map((s) => ack(s)?.through.position ?? null))}::bigint[],
        ${column(settlements.map((s) => ack(s)?.through.seq ?? null))}::bigint[],
        ${column(settlements.map((s) => fail(s)?.error ?? null))}::text[],
        ${column(settlements.map((s) => fail(s)?.headPosition ?? null))}::bigint[],
        ${column(settlements.map((s) => fail(s)?.postponeMs ?? null))}::bigint[]
      ) AS i(key, token, claimed_at, count, through_tx, through_position, through_seq, error, head_position, postpone_ms)
    ),
    locked AS (
      -- by primary key (= ANY): a join with settle may be planned as a scan of every key row
      SELECT k.subscription_id, k.key, k.lease_token, k.lease_until, k.postponed, k.postponed_since FROM ${keys} k
      WHERE k.subscription_id = ${subscriptionId} AND k.key = ANY(${settled})
      ORDER BY k.key
      FOR UPDATE
    ),
    fenced AS (
      SELECT l.subscription_id, l.key, i.token, i.claimed_at, i.count, i.through_tx, i.through_position,
             i.through_seq, i.error, i.head_position, i.postpone_ms, l.postponed, ${lockedNow} AS at,
             -- a postponement within its bounds (past them it is a failed attempt)
             (i.postpone_ms IS NOT NULL AND l.postponed < ${MAX_POSTPONEMENTS}
               AND coalesce(l.postponed_since, ${lockedNow}) > ${lockedNow} - ${MAX_POSTPONED_MS} * interval '1 millisecond')
               AS postpones
      FROM locked l JOIN settle i ON i.key = l.key
      WHERE l.lease_token = i.token AND l.lease_until > ${lockedNow}
    ),
    removed AS (
      DELETE FROM ${queue} q USING fenced a
      WHERE a.error IS NULL AND q.subscription_id = a.subscription_id AND q.key = a.key AND q.seq <= a.through_seq
        AND q.subscription_id = ${subscriptionId} AND q.key = ANY(${settled})
      RETURNING q.key
    ),
    -- what each ack deleted: pending goes down by that, not by the batch's count (an erasure
    -- may have removed some of the batch's events, and counted them, while it was in flight)
    removed_per_key AS (SELECT key, count(*) AS n FROM removed GROUP BY key),
    acked AS (
      UPDATE ${keys} k SET
        pending = k.pending - coalesce(r.n, 0),
        -- more queued: ready at once, or when its next event may be delivered (a delayed one)
        available_at = CASE WHEN k.pending - coalesce(r.n, 0) > 0
          THEN greatest(f.at, ${heldUntil({ subscriptionId: sql`k.subscription_id`, key: sql`k.key`, after: sql`f.through_seq`, at: sql`f.at` })}) END,
        lease_token = NULL, lease_until = NULL, attempts = 0, last_error = NULL, failed_position = NULL,
        postponed = 0, postponed_since = NULL,
        last_seq = f.through_seq, last_tx = f.through_tx, last_position = f.through_position,
        acked = k.acked + f.count, active_at = f.at
      FROM fenced f LEFT JOIN removed_per_key r ON r.key = f.key
      WHERE f.error IS NULL AND k.subscription_id = f.subscription_id AND k.key = f.key AND ${asyncCommit}
        AND k.subscription_id = ${subscriptionId} AND k.key = ANY(${settled})
      RETURNING k.subscription_id, k.key, k.pending, k.last_seq, f.at, k.tenant
    ),
    ${failing ? failureCtes(subscriptionId, settled) : acksOnly}${room}`;
}

// Settlements that are all acks (what a drain settles nearly always): `settled` from the acks
// alone. The failure CTEs are left out of the statement's text, not only run on no rows: a
// Worker's statements (unnamed, over HTTP) are planned on every call, and a settle of 16 acks
// with a plain claim planned in 1.9 ms without them against 2.3 ms with them (EXPLAIN, median
// of 30; the claim alone 1.1 ms).
const acksOnly = sql`settled AS (SELECT key, 'acked' AS outcome, pending, at FROM acked)`;

/**
 * `settled_room`: under maxLeasedKeysPerTenant, the settled keys' tenants have room again
 * (roomFreed), in ONE upsert of the statement (two would meet the same tenant row twice); it
 * returns the tenants it set, which a claim in the same statement leaves to it (claimBatch.ts).
 * Left out of the text (settleCtes' `freesRoom` false) for a claim of a subscription without that
 * cap, as the failure CTEs are: a Worker plans every statement on every call.
 */
function settledRoom(rows: SQL): SQL {
  return sql`settled_room AS (${roomFreed(rows)} RETURNING t.tenant)`;
}

/** Failures and postponements (settleCtes' `failed`, `postponed`, `failures`), then `settled` from all three. */
function failureCtes(subscriptionId: number, settled: SQL): SQL {
  return sql`
    failed AS (
      UPDATE ${keys} k SET
        -- pending 0: an erasure took every event of the key while the batch ran; nothing is
        -- left to retry, so the key is idle, no attempt counted (never dead on a missing event)
        attempts = CASE WHEN k.pending = 0 THEN 0 ELSE k.attempts + 1 END,
        last_error = CASE WHEN f.postpone_ms IS NULL THEN f.error
          ELSE 'gave up after ' || f.postponed || ' postponements: ' || f.error END,
        failed_position = CASE WHEN k.pending > 0 THEN f.head_position END,
        lease_token = NULL, lease_until = NULL,
        dead_at = CASE WHEN k.attempts + 1 >= s.max_attempts AND k.pending > 0 THEN f.at END,
        available_at = CASE WHEN k.attempts + 1 >= s.max_attempts OR k.pending = 0 THEN NULL
          ELSE f.at + least(s.backoff_max_ms, s.backoff_initial_ms * power(s.backoff_factor, least(k.attempts, 60)))
                       * interval '1 millisecond' END
      FROM fenced f, ${subscriptions} s
      WHERE f.error IS NOT NULL AND NOT f.postpones AND k.subscription_id = f.subscription_id AND k.key = f.key
        AND s.id = ${subscriptionId} AND ${asyncCommit}
        AND k.subscription_id = ${subscriptionId} AND k.key = ANY(${settled})
      RETURNING k.subscription_id, k.key, k.dead_at IS NOT NULL AS dead, f.at, f.claimed_at, f.count, k.tenant
    ),
    postponed AS (
      UPDATE ${keys} k SET
        lease_token = NULL, lease_until = NULL, last_error = f.error,
        postponed = k.postponed + 1, postponed_since = coalesce(k.postponed_since, f.at),
        -- (pending 0: an erasure took the key's events meanwhile; idle, as for a failure)
        available_at = CASE WHEN k.pending > 0 THEN f.at + f.postpone_ms * interval '1 millisecond' END
      FROM fenced f
      WHERE f.postpones AND k.subscription_id = f.subscription_id AND k.key = f.key AND ${asyncCommit}
        AND k.subscription_id = ${subscriptionId} AND k.key = ANY(${settled})
      RETURNING k.subscription_id, k.key, f.at, k.tenant
    ),

    failures AS (
      INSERT INTO ${activity} (subscription_id, key, started_at, events, outcome)
      SELECT subscription_id, key, claimed_at, count, CASE WHEN dead THEN 'dead' ELSE 'failed' END
      FROM failed ORDER BY key
    ),
    settled AS (
      SELECT key, 'acked' AS outcome, pending, at FROM acked
      UNION ALL
      SELECT key, CASE WHEN dead THEN 'dead' ELSE 'retry' END, NULL, at FROM failed
      UNION ALL
      SELECT key, 'postponed', NULL, at FROM postponed
    )`;
}
