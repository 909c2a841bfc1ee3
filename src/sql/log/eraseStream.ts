import { sql, type SQL } from "drizzle-orm";
import {
  advanceKicks,
  events,
  idempotencyKeys,
  keys,
  queue,
  rewindStaged,
  streams,
  subscriptions,
} from "../../db/schema.js";
import { tenantTurnsEarlier } from "../common/tenantTurns.js";
import { ADVANCING } from "../advance/advanceSubscription.js";
import { elapsedMs, lockedNow } from "../common/clock.js";

// Erasure of one stream (src/corq/log.ts runs it): its events leave the log and every
// subscription's queue, in rounds that each commit (no long transaction: the xmin horizon is
// everyone's, DESIGN 8). One call:
//   beginErasure   the tombstone: erased_through = the stream's version now. Versions up to it
//                  are erased; events appended later are not. The row, its version and last_tx
//                  stay, so expectedVersion keeps its meaning and appends continue after it.
//   rounds         each one transaction of two statements, until a round erases nothing:
//     holdAdvancers   every subscription's advancer lock (in id order, as rewind takes one),
//                     and its erase_epoch bumped (its row locked to the end);
//     eraseRound      with a snapshot taken after those waits: up to `limit` of the stream's
//                     erased versions, their queue rows in every subscription (and the queue rows
//                     of the positions the round before erased: erase_sweep), their key rows
//                     locked and corrected, the events deleted, and the stream's idempotency keys
//                     of the appends whose events it erased (in any scope: what a key holds —
//                     the fingerprint of what was sent, the positions — must not outlive them).
// Why an advance never queues an erased event after its round: an advance with a SQL key runs
// under the advancer lock (held here) and re-checks erase_epoch on the row it locks (its
// snapshot may predate the round's commit: it then enqueues nothing); one with a key function
// writes with a compare-and-set that includes erase_epoch. A subscription created while a round
// ran is not among those the round locked: the next round sweeps the queue rows of the
// positions erased before it (erase_sweep), after taking that subscription's lock too.
// Why no claim hands out an erased event afterwards: a claim reads the queue and the events
// with one snapshot (never a queue row without its event: the claim's batch joins the events);
// one whose snapshot predates a round finds keys.erased moved on the key row it locked and
// hands out nothing of that key (claimBatch.ts). Why a rewind never queues an erased event: the
// round deletes the rewind's staged rows of the events it erases, a chunk that stages events
// compares erase_epoch between its read and its lock (a round committed in between: it stages
// nothing and reads again), and a requeue chunk waits for the round (it updates its
// subscription's row) and then skips the staged rows the round deleted.

export interface BeginErasureRow {
  version: number;
}

/** Marks the stream erased through its current version; no row: no such stream. */
export function beginErasure(stream: string): SQL {
  return sql`
    UPDATE ${streams} SET erased_through = version, erased_at = now()
    WHERE stream = ${stream}
    RETURNING version`;
}

/**
 * Takes the advancer lock of every subscription, in id order (the order a rewind's one lock
 * keeps; advancers only try theirs), then bumps each one's erase_epoch, which locks its row to
 * the end of the transaction: an advance that was at work has ended, and one that comes while
 * the round runs finds the lock taken (it leaves a kick) or, on its locked row, a new epoch.
 * And JIT off for the rest of the round's transaction (no statement of its own: one round trip
 * less): the round holds every advancer lock, and right after a bulk load (no statistics of
 * queue.position) its estimate passes jit_above_cost (about 210,000 at 1M queued rows; ~550 once
 * analyzed). Local to the transaction: nothing leaks through a pooler, and the server's setting
 * stays the user's. (With no subscription there is nothing queued to estimate.)
 */
export function holdAdvancers(): SQL {
  return sql`
    WITH held AS MATERIALIZED (
      SELECT id, pg_advisory_xact_lock(${ADVANCING}::int4, id)::text AS held,
        set_config('jit', 'off', true) AS jit
      FROM (SELECT id FROM ${subscriptions} ORDER BY id OFFSET 0) s
    )
    UPDATE ${subscriptions} s SET erase_epoch = s.erase_epoch + 1
    FROM held WHERE s.id = held.id
    RETURNING s.id`;
}

export interface EraseRoundRow {
  /** events deleted from the log */
  erased: number;
  /** queue rows deleted (every subscription) */
  dequeued: number;
  /** key rows corrected */
  keys: number;
  /** idempotency keys forgotten (of appends whose events this round erased) */
  idempotency_keys: number;
  /** How long the round's statement ran on the server (ms): what sizes the next one. */
  elapsed_ms: number;
}

/**
 * One round, in ONE statement (after holdAdvancers, in the same transaction):
 *   doomed   up to `limit` events of the stream at or below erased_through, in version order;
 *   hit      the queue rows of those events and of the positions the last round erased
 *            (erase_sweep), in any subscription: the index on queue(position);
 *   locked   their key rows, locked in (subscription, key) order — the order every writer of
 *            several key rows keeps — before any of their queue rows is deleted;
 *   removed  those queue rows (one an ack deleted meanwhile is not counted twice: a DELETE
 *            skips a row another transaction deleted);
 *   settled  each key: pending − what was removed, `erased` + the same; a key not under a live
 *            lease whose queue is now empty becomes idle, and one whose failed event was
 *            erased starts over (a dead key is no longer dead, a key in backoff is ready: its
 *            failure went with the event); a live lease keeps its batch, whose ack or failure
 *            settles the key (ackBatch counts what it deletes);
 *   gone     the events deleted; the tombstone counts them and keeps their positions for the
 *            next round's sweep;
 *   forgotten the stream's idempotency keys, in every scope, of the appends whose last event
 *            this round erased (a key's version is its append's last); the last round (less than
 *            `limit` left) takes every key up to erased_through, also one whose events went
 *            before (retention). Keys of appends made after the erasure began stay with their
 *            events. Found by the primary key (stream, scope, key): one range of the index
 *            (walking every scope instead cost 120–340 ms a round at 10,000 scopes).
 * Rows are found by index (`= ANY(ARRAY(…))`, LATERAL): a join with a CTE may be planned as a
 * scan of the whole table, and the queue, the keys and the log can be large.
 */
export function eraseRound(stream: string, limit: number): SQL {
  return sql`
    WITH tomb AS (SELECT erased_through, coalesce(erase_sweep, '{}') AS sweep FROM ${streams} WHERE stream = ${stream}),
    doomed AS MATERIALIZED (
      SELECT e.position, e.version FROM ${events} e
      WHERE e.stream = ${stream} AND e.version <= (SELECT erased_through FROM tomb)
      ORDER BY e.version
      LIMIT ${limit}
    ),
    targets AS MATERIALIZED (SELECT position FROM doomed UNION SELECT unnest(sweep) FROM tomb),
    hit AS MATERIALIZED (
      SELECT DISTINCT q.subscription_id, q.key FROM ${queue} q
      WHERE q.position = ANY(ARRAY(SELECT position FROM targets ORDER BY position))
      ORDER BY q.subscription_id, q.key
    ),
    locked AS (
      SELECT k.subscription_id, k.key, k.pending, k.lease_until, k.failed_position
      FROM hit h, LATERAL (
        SELECT subscription_id, key, pending, lease_until, failed_position FROM ${keys}
        WHERE subscription_id = h.subscription_id AND key = h.key
        -- one row (the primary key): said, so the estimate does not multiply without statistics
        LIMIT 1
        FOR UPDATE) k
    ),
    -- read over the locked rows (see clock.ts): whether a live lease holds the key
    judged AS (
      SELECT subscription_id, key, pending, failed_position,
        coalesce(lease_until > ${lockedNow}, false) AS live, ${lockedNow} AS at
      FROM locked
    ),
    removed AS (
      DELETE FROM ${queue} q USING judged j
      WHERE q.position = ANY(ARRAY(SELECT position FROM targets ORDER BY position))
        AND q.subscription_id = j.subscription_id AND q.key = j.key
      RETURNING q.subscription_id, q.key, q.position
    ),
    per_key AS (
      SELECT r.subscription_id, r.key, count(*)::int AS n,
        -- a key not under a live lease starts over when its queue is empty or its failed event went
        NOT j.live AND (j.pending - count(*) = 0 OR coalesce(j.failed_position = ANY(array_agg(r.position ORDER BY r.position)), false)) AS fresh,
        j.live, j.at
      FROM removed r JOIN judged j ON j.subscription_id = r.subscription_id AND j.key = r.key
      GROUP BY r.subscription_id, r.key, j.pending, j.failed_position, j.live, j.at
    ),
    settled AS (
      UPDATE ${keys} k SET
        pending = k.pending - r.n,
        erased = k.erased + r.n,
        attempts = CASE WHEN r.fresh THEN 0 ELSE k.attempts END,
        last_error = CASE WHEN r.fresh THEN NULL ELSE k.last_error END,
        failed_position = CASE WHEN r.fresh THEN NULL ELSE k.failed_position END,
        dead_at = CASE WHEN r.fresh THEN NULL ELSE k.dead_at END,
        lease_token = CASE WHEN r.fresh THEN NULL ELSE k.lease_token END,
        lease_until = CASE WHEN r.fresh THEN NULL ELSE k.lease_until END,
        available_at = CASE WHEN r.live THEN k.available_at
                            WHEN k.pending - r.n = 0 THEN NULL
                            WHEN r.fresh THEN r.at
                            ELSE k.available_at END
      FROM per_key r
      WHERE k.subscription_id = r.subscription_id AND k.key = r.key
        -- by primary key (= ANY): a join with per_key may be planned as a scan of every key row
        AND k.subscription_id = ANY(ARRAY(SELECT subscription_id FROM per_key ORDER BY subscription_id))
        AND k.key = ANY(ARRAY(SELECT key FROM per_key ORDER BY key))
      RETURNING k.subscription_id, k.tenant, CASE WHEN r.fresh THEN k.available_at END AS available_at
    ),
    -- a key that starts over: its tenant's turn in the fair pick no later than its time
    turns AS (${tenantTurnsEarlier(sql`settled`)}),
    -- a rewind under way may have staged them (src/sql/operate/rewind.ts): they go from there too
    -- (whether one is under way is checked once: no scan of rewind_staged when none is)
    unstaged AS (
      DELETE FROM ${rewindStaged} r
      WHERE EXISTS (SELECT 1 FROM ${subscriptions} s WHERE s.rewind_token IS NOT NULL)
        AND r.position = ANY(ARRAY(SELECT position FROM targets ORDER BY position))
    ),
    gone AS (
      DELETE FROM ${events} e WHERE e.position = ANY(ARRAY(SELECT position FROM doomed ORDER BY position))
      RETURNING e.position
    ),
    forgotten AS (
      DELETE FROM ${idempotencyKeys} k
      WHERE k.stream = ${stream}
        AND k.version <= (CASE WHEN (SELECT count(*) FROM doomed) < ${limit} THEN (SELECT erased_through FROM tomb)
                               ELSE (SELECT max(version) FROM doomed) END)
      RETURNING 1
    ),
    tombstone AS (
      UPDATE ${streams} SET erased_events = erased_events + (SELECT count(*) FROM gone),
        erase_sweep = ARRAY(SELECT position FROM gone ORDER BY position)
      WHERE stream = ${stream}
    )
    SELECT (SELECT count(*) FROM gone)::int AS erased, (SELECT count(*) FROM removed)::int AS dequeued,
           (SELECT count(*) FROM settled)::int AS keys, (SELECT count(*) FROM forgotten)::int AS idempotency_keys,
           ${elapsedMs} AS elapsed_ms`;
}

export interface AfterRoundRow {
  /** an advance found a held advancer lock during the round and left a kick */
  kicked: boolean;
  /** a subscription was created after the round took its locks: sweep once more */
  created: boolean;
}

/** After a round committed: kicks left meanwhile (of the subscriptions `held`), and subscriptions created since. */
export function afterRound(held: number[]): SQL {
  return sql`
    SELECT EXISTS (
        SELECT 1 FROM ${subscriptions} s JOIN ${advanceKicks} k ON k.subscription_id = s.id
        WHERE s.id = ANY(${sql.param(held)}::int[]) AND k.kicked > s.handled_kicks) AS kicked,
      EXISTS (SELECT 1 FROM ${subscriptions} WHERE id > ${Math.max(0, ...held)}) AS created`;
}
