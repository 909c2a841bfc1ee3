import { elapsedMs } from "../common/clock.js";
import { sql, type SQL } from "drizzle-orm";
import { events, queue, retention, retentionHeld, subscriptions } from "../../db/schema.js";
import type { StoredPolicy } from "../../retentionPolicy.js";
import type { Retention } from "../../types.js";
import { streamTaken } from "../advance/advanceSubscription.js";

// Retention: events older than the policy's max age, of the streams it takes, that EVERY
// subscription has advanced past (at or below the lowest watermark in log order, paused
// subscriptions included) and that no queue row references (a backlog, a dead key's failed
// event, a paused key's events) are removed — in chunks, each its own short transaction of a
// few statements (src/corq/retention.ts), each statement with a snapshot taken after the one
// before it ended:
//
//   lockPolicy           the policy row FOR UPDATE: one chunk at a time, and a subscription
//                        being created (its trigger holds the row FOR SHARE, drizzle/
//                        0012_retention.sql) commits first, so removeChunk sees its watermark;
//   removeChunk          the chunk, in one statement (below);
//   lockSubscriptions    every subscription row FOR SHARE, after the removal: every statement of
//                        a rewind (src/sql/operate/rewind.ts: its mark, each chunk) writes or
//                        locks its subscription's row, so this waits for the one under way, and
//                        one that starts now waits for this chunk's commit (its snapshot may
//                        predate the commit: nothing it could read is removed, see `low`);
//   requeuedRemoved      with a snapshot taken after that wait: a queue row that references an
//                        event just removed, or a rewind marked since the removal whose range
//                        starts at or before an event removed (its staged rows may reference
//                        them) — then the chunk rolls back and is done again, keeping them.
// A rewind marked before the removal keeps its range out of it: the lowest watermark (`low`)
// counts a rewinding subscription's range start as its watermark, until the rewind ends.
// The subscription rows are held only for the last check and the commit, not for the removal:
// an advance or a rewind's chunk waits milliseconds, not a chunk.
//
// The sweep walks the log by position (the primary key) from a cursor kept in the policy row
// (`swept_to`), so each pass starts where the last one stopped and never reads again what it
// passed: events removed, events of streams the policy does not take, and events a queue held
// — those are remembered in retention_held and re-checked from there, a chunk at a time.

/** The policy row as the statements below return it (node-postgres gives bigint as text). */
export interface RetentionRow {
  max_age_ms: string | number | null;
  streams: string[] | null;
  horizon: string | number | null;
}

export function toRetention(row: RetentionRow): Retention {
  return {
    maxAgeMs: row.max_age_ms === null ? null : Number(row.max_age_ms),
    streams: row.streams,
    horizon: row.horizon === null ? null : Number(row.horizon),
  };
}

const policyColumns = sql.raw("max_age_ms, streams, horizon");
const textArray = (streams: string[] | null) =>
  streams === null ? sql`NULL::text[]` : sql`${sql.param(streams)}::text[]`;
const optionJson = (option: StoredPolicy) => sql`${JSON.stringify(option)}::jsonb`;

/**
 * Sets the policy's fields; a change of streams restarts the sweep from the log's beginning
 * (events it passed as not taken may be taken now), the held events are re-checked anyway.
 */
const assignPolicy = (policy: StoredPolicy) => sql`
  max_age_ms = ${policy.maxAgeMs}::bigint, streams = ${textArray(policy.streams)},
  swept_to = CASE WHEN r.streams IS DISTINCT FROM ${textArray(policy.streams)} THEN 0 ELSE r.swept_to END,
  held_after = CASE WHEN r.streams IS DISTINCT FROM ${textArray(policy.streams)} THEN 0 ELSE r.held_after END,
  updated_at = now()`;

/**
 * The policy in force and the horizon. With this instance's library option: the option is
 * applied first when it is not the option last applied (a deploy changed it); a policy set by
 * PUT /retention stays in force until then.
 */
export function readRetention(option: StoredPolicy | undefined): SQL {
  if (option === undefined) return sql`SELECT ${policyColumns} FROM ${retention} WHERE id = 1`;
  return sql`
    WITH applied AS (
      UPDATE ${retention} r SET ${assignPolicy(option)}, option = ${optionJson(option)}
      WHERE id = 1 AND r.option IS DISTINCT FROM ${optionJson(option)}
      RETURNING ${policyColumns}
    )
    SELECT ${policyColumns} FROM applied
    UNION ALL SELECT ${policyColumns} FROM ${retention} WHERE id = 1 AND NOT EXISTS (SELECT 1 FROM applied)`;
}

/**
 * Sets the policy (PUT /retention). This instance's option, if it has one, is recorded as
 * applied: it does not take the policy back on this instance's next read.
 */
export function writeRetention(policy: StoredPolicy, option: StoredPolicy | undefined): SQL {
  return sql`
    UPDATE ${retention} r SET ${assignPolicy(policy)}
      ${option === undefined ? sql`` : sql`, option = ${optionJson(option)}`}
    WHERE id = 1
    RETURNING ${policyColumns}`;
}

/** The policy row, locked for the chunk (see the top of this file). */
export function lockPolicy(): SQL {
  return sql`SELECT id FROM ${retention} WHERE id = 1 FOR UPDATE`;
}

/**
 * Every subscription row FOR SHARE, in id order (see the top of this file). `lock_timeout`
 * (chunkLockTimeout) bounds the wait: the chunk gives up rather than hold the rows it has and
 * stall their advances.
 */
export function lockSubscriptions(): SQL {
  return sql`SELECT count(*)::int AS locked FROM (SELECT id FROM ${subscriptions} ORDER BY id FOR SHARE) s`;
}

/**
 * Whether a rewind may want what the chunk removed: a queue row references one of the `removed`
 * positions (a rewind queued it while the chunk ran), or a rewind whose range starts at or
 * before `last` (the last event removed, in log order) is under way — marked after the removal
 * read the watermarks (one marked before kept its range out of it: `low`), so its staged rows
 * may reference what was removed. One pass over the queue against a hash of the
 * positions: `position = ANY(array)` compared every queue row with every position (15 ms for
 * 500 queued × 2,000 removed, and it runs while the subscription rows are held).
 */
export function requeuedRemoved(removed: number[], last: { tx: string; position: number }): SQL {
  return sql`SELECT EXISTS (SELECT 1 FROM ${queue} q WHERE q.position IN (SELECT unnest(${sql.param(removed)}::bigint[])))
    OR EXISTS (SELECT 1 FROM ${subscriptions} s WHERE s.rewind_token IS NOT NULL
               AND (s.rewind_from_tx, s.rewind_from_position) <= (${last.tx}::xid8, ${last.position}::bigint))
    AS requeued`;
}

/**
 * The chunk transaction's settings. `lock_timeout`: at most this long waiting for a lock (an
 * advance's statement is shorter; a long rewind is not waited for). synchronous_commit off: the
 * commit does not wait for the WAL flush, so the subscription rows are not held through an
 * fsync (under I/O pressure that took seconds). Safe: a crash loses at most the last chunks,
 * and a lost chunk only means its events are still there — the next pass removes them again.
 */
export function chunkSettings(lockTimeoutMs: number): SQL {
  return sql`SELECT set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true) AS lock_timeout,
    set_config('synchronous_commit', 'off', true) AS synchronous_commit`;
}

export interface ChunkRow {
  /** Events removed. */
  deleted: number;
  /** Their positions (requeuedRemoved checks them). */
  positions: (string | number)[] | null;
  /** The last of them in log order (null: none). */
  last_tx: string | null;
  last_position: string | number | null;
  horizon: string | number | null;
  /** The sweep looked at a full chunk without reaching an event that is not due yet: it may have more. */
  sweep_more: boolean;
  /** The re-check of held events read a full chunk of them: more after those. */
  recheck_more: boolean;
  /** false: retention is off (no max age); nothing was looked at. */
  active: boolean;
  /** How long the chunk's statement ran on the server (ms): what sizes the next one. */
  elapsed_ms: number;
}

const LAST_POSITION = sql.raw("9223372036854775807");

/**
 * One chunk, in ONE statement: up to `sweep` events from the sweep's cursor and up to
 * `recheck` held ones after the re-check's cursor (0: none). An event is due when it is older than the cutoff
 * (database clock) and at or below the lowest watermark (log order: (tx, position)); with no
 * subscription at all, age alone decides. Of the events the policy takes:
 *   not due   the first one stops the sweep there (the cursor stays on it: it is still to come);
 *   due       removed, unless a queue row references it: then it is held (retention_held);
 * events of streams the policy does not take are passed. Held events removed, gone (erased) or
 * no longer taken leave retention_held. The cursors and the horizon move in the same statement.
 */
export function removeChunk({ sweep, recheck }: { sweep: number; recheck: number }): SQL {
  const due = (tx: SQL, position: SQL, createdAt: SQL) => sql`(${createdAt} < p.cutoff
    AND (NOT EXISTS (SELECT 1 FROM low) OR (${tx}, ${position}) <= ((SELECT tx FROM low), (SELECT position FROM low))))`;
  return sql`
    WITH policy AS (
      SELECT max_age_ms, streams, swept_to, held_after, clock_timestamp() - max_age_ms * interval '1 millisecond' AS cutoff
      FROM ${retention} WHERE id = 1 AND max_age_ms IS NOT NULL
    ),
    -- the lowest watermark in log order: every subscription has advanced past what is at or below
    -- it; a rewind's range counts as not advanced past (from just before its first event)
    low AS (
      SELECT tx, position FROM (
        SELECT watermark_tx AS tx, watermark_position AS position FROM ${subscriptions}
        UNION ALL
        SELECT rewind_from_tx, rewind_from_position - 1 FROM ${subscriptions} WHERE rewind_token IS NOT NULL
      ) w
      ORDER BY tx, position LIMIT 1
    ),
    swept AS (
      SELECT e.position, e.tx, e.stream, e.created_at FROM ${events} e
      WHERE e.position >= (SELECT swept_to FROM policy)
      ORDER BY e.position
      LIMIT ${sweep}
    ),
    judged AS (
      SELECT s.position, s.tx, ${streamTaken(sql`s.stream`, sql`p.streams`)} AS taken,
        ${due(sql`s.tx`, sql`s.position`, sql`s.created_at`)} AS due
      FROM swept s, policy p
    ),
    stop AS (SELECT min(position) AS position FROM judged WHERE taken AND NOT due),
    rechecked AS (
      SELECT h.position, e.tx, e.position IS NOT NULL AS present,
        e.position IS NOT NULL AND ${streamTaken(sql`e.stream`, sql`p.streams`)} AS taken,
        ${due(sql`e.tx`, sql`e.position`, sql`e.created_at`)} AS due
      FROM policy p, ${retentionHeld} h LEFT JOIN ${events} e ON e.position = h.position
      -- the cursor as a value (a scalar subquery): a bound of the index scan, not a filter of every held row
      WHERE h.position > (SELECT held_after FROM policy)
      ORDER BY h.position
      LIMIT ${recheck}
    ),
    candidates AS (
      SELECT position, tx FROM judged
      WHERE taken AND due AND position < coalesce((SELECT position FROM stop), ${LAST_POSITION})
      UNION
      SELECT position, tx FROM rechecked WHERE taken AND due
    ),
    -- the candidates a queue row still references: one probe of queue_position_idx each, which
    -- stops at the first row (a semi-join with the candidates was planned as a read of the whole
    -- queue, every chunk: 1M queued rows, an estimated cost of 45,000 before ANALYZE)
    queued AS (
      SELECT c.position FROM (SELECT DISTINCT position FROM candidates) c
      CROSS JOIN LATERAL (SELECT 1 FROM ${queue} q WHERE q.position = c.position LIMIT 1) referenced
    ),
    removed AS (
      DELETE FROM ${events} e
      WHERE e.position IN (SELECT c.position FROM candidates c
                           WHERE NOT EXISTS (SELECT 1 FROM queued q WHERE q.position = c.position))
      RETURNING e.position, e.tx
    ),
    held AS (
      INSERT INTO ${retentionHeld} (position)
      SELECT position FROM queued ORDER BY position
      ON CONFLICT (position) DO NOTHING
    ),
    released AS (
      DELETE FROM ${retentionHeld} h
      WHERE h.position IN (SELECT position FROM rechecked WHERE NOT present OR NOT taken)
         OR h.position IN (SELECT position FROM removed)
    ),
    moved AS (
      UPDATE ${retention} r SET
        swept_to = coalesce((SELECT position FROM stop), (SELECT max(position) + 1 FROM swept), r.swept_to),
        held_after = CASE WHEN ${recheck} = 0 THEN r.held_after
                          WHEN (SELECT count(*) FROM rechecked) < ${recheck} THEN 0
                          ELSE (SELECT max(position) FROM rechecked) END,
        horizon = greatest(r.horizon, (SELECT max(position) + 1 FROM removed)),
        (removed_tx, removed_position) = (
          SELECT tx, position FROM (SELECT tx, position FROM removed
                                    UNION ALL SELECT r.removed_tx, r.removed_position WHERE r.removed_tx IS NOT NULL) l
          ORDER BY tx DESC, position DESC LIMIT 1)
      WHERE id = 1 AND EXISTS (SELECT 1 FROM policy)
      RETURNING r.horizon
    )
    SELECT (SELECT count(*) FROM removed)::int AS deleted, (SELECT array_agg(position ORDER BY position) FROM removed) AS positions,
      (SELECT tx::text FROM removed ORDER BY tx DESC, position DESC LIMIT 1) AS last_tx,
      (SELECT position FROM removed ORDER BY tx DESC, position DESC LIMIT 1) AS last_position,
      coalesce((SELECT horizon FROM moved), (SELECT horizon FROM ${retention} WHERE id = 1)) AS horizon,
      ${sweep} > 0 AND (SELECT count(*) FROM swept) = ${sweep} AND (SELECT position FROM stop) IS NULL AS sweep_more,
      ${recheck} > 0 AND (SELECT count(*) FROM rechecked) = ${recheck} AS recheck_more,
      EXISTS (SELECT 1 FROM policy) AS active, ${elapsedMs} AS elapsed_ms`;
}

/**
 * Whether a rewind to `to` would start below what retention removed: `to` is below the horizon,
 * or its event sorts before the last event removed in log order (a transaction that took a lower
 * position can commit after one with a higher: log order is (tx, position)). With the horizon.
 */
export function rewindBelowHorizon(to: number): SQL {
  return sql`
    SELECT r.horizon, coalesce(${to}::bigint < r.horizon
      OR (SELECT (e.tx, e.position) < (r.removed_tx, r.removed_position) FROM ${events} e WHERE e.position = ${to}::bigint),
      false) AS below
    FROM ${retention} r WHERE id = 1`;
}
