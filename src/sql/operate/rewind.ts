import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, rewindStaged, subscriptions } from "../../db/schema.js";
import { keyExpression, keyProblem, rewindState, streamTaken } from "../advance/advanceSubscription.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { lockedNow } from "../common/clock.js";

// A rewind is a series of statements that each commit (src/rewind.ts), never one transaction:
// any transaction that holds an xid holds the cluster's xmin horizon, and with it every
// subscription's advance (docs/architecture.md, invariant 1).
//   beginRewind     marks the subscription as rewinding (its own advance waits from now on),
//                   the cursor just before the event rewound to;
//   stageChunk      the next `limit` events of the range after the cursor, in log order: those
//                   the subscription takes, with their keys, into rewind_staged; the cursor
//                   moved past them, and cleared once the range is read (a key function's
//                   subscription: readStageChunk, keys computed in JS, writeStageChunk);
//   requeueChunk    the next `limit` staged events in (key, log) order queued again;
//   finishRewind    the mark cleared: the subscription advances again.
// The range ends at the watermark, which stands still while the subscription is rewinding;
// and no advance numbers the keys' events between two chunks — so each key's replay is in
// log order and ends exactly where the key's later events begin. Staged, the requeue writes a
// key's row once (twice where a chunk ends inside its events), however many chunks of the log
// its events are spread over: a chunk of the log can touch as many keys as it has events.

/** The lease's end, `ms` from the database clock. */
const leaseEnd = (ms: number) => sql`${lockedNow} + make_interval(secs => ${ms}::float8 / 1000)`;

export interface BeginRewindRow {
  id: number;
  key: string;
  /** The tx of the event at `to` (null: there is no such event; nothing began). */
  from_tx: string | null;
  /** This rewind began (else another one is under way: `rewinding` says how it is doing). */
  begun: boolean;
  rewinding: "live" | "abandoned" | null;
}

/**
 * Begins a rewind of the subscription named `subscription` from the event at position `to`
 * (inclusive) or the beginning, held by `token` for `leaseMs` — unless another rewind of it is
 * under way, or it is keyed by a function and the caller has none (`functionKey` false). The
 * row lock waits for an advance in progress: the chunks after it see what that advance enqueued.
 */
export function beginRewind(options: {
  subscription: string;
  to: number | "beginning";
  key: string | undefined;
  token: string;
  leaseMs: number;
  functionKey: boolean;
}): SQL {
  const { subscription, to, key, token, leaseMs, functionKey } = options;
  const position = to === "beginning" ? 0 : to;
  return sql`
    WITH target AS (
      SELECT s.id, s.key, s.rewind_token, s.rewind_until,
        ${to === "beginning" ? sql`'0'` : sql`(SELECT e.tx::text FROM ${events} e WHERE e.position = ${to})`} AS from_tx
      FROM ${subscriptions} s WHERE s.name = ${subscription}
    ),
    begun AS (
      -- the cursor is exclusive: (tx, position - 1) is just before (tx, position) in log order
      UPDATE ${subscriptions} s SET rewinds = s.rewinds + 1, rewind_token = ${token}::uuid,
        rewind_until = ${leaseEnd(leaseMs)}, rewind_from_tx = t.from_tx::xid8, rewind_from_position = ${position},
        rewind_cursor_tx = t.from_tx::xid8, rewind_cursor_position = ${position - 1}, rewind_key = ${key ?? null}::text
      FROM target t
      WHERE s.id = t.id AND t.from_tx IS NOT NULL AND s.rewind_token IS NULL
        AND (s.key <> 'function' OR ${functionKey})
      RETURNING s.id, s.key
    )
    SELECT t.id, coalesce(b.key, t.key) AS key, t.from_tx, b.id IS NOT NULL AS begun, ${rewindState(sql`t`)} AS rewinding
    FROM target t LEFT JOIN begun b ON true`;
}

export interface TakeOverRow {
  key: string;
  rewind_key: string | null;
  /** The range is still being staged (else: being requeued). */
  staging: boolean;
}

/**
 * Takes over a rewind whose lease is over (its holder crashed or stalled): `token` holds it
 * from now on and finishes it where it stopped. None where the subscription is keyed by a
 * function the caller does not have.
 */
export function takeOverRewind(options: {
  subscriptionId: number;
  token: string;
  leaseMs: number;
  functionKey: boolean;
}): SQL {
  const { subscriptionId, token, leaseMs, functionKey } = options;
  return sql`
    UPDATE ${subscriptions} SET rewind_token = ${token}::uuid, rewind_until = ${leaseEnd(leaseMs)}
    WHERE id = ${subscriptionId} AND rewind_token IS NOT NULL AND rewind_until < ${lockedNow}
      AND (key <> 'function' OR ${functionKey})
    RETURNING key, rewind_key, rewind_cursor_tx IS NOT NULL AS staging`;
}

/** Ends the rewind `token` holds: the subscription advances again. */
export function finishRewind(subscriptionId: number, token: string): SQL {
  return sql`
    UPDATE ${subscriptions} SET rewind_token = NULL, rewind_until = NULL, rewind_from_tx = NULL,
      rewind_from_position = NULL, rewind_cursor_tx = NULL, rewind_cursor_position = NULL, rewind_key = NULL
    WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid
    RETURNING id`;
}

export interface ChunkRow {
  /** Events read (of the range, or staged ones): fewer than the limit, and that phase is done. */
  scanned: number;
  /** 0: the rewind is not held by this token any more (taken over, or the subscription deleted). */
  held: number;
  /**
   * Staging only: an erasure round committed after the chunk's events were read (the
   * subscription's erase_epoch moved on): nothing was staged, the cursor stayed; read again.
   */
  stale?: boolean;
}

/**
 * One chunk of staging where the key is computed in SQL (stream or JSON path), in ONE
 * statement: the subscription row locked (only while `token` holds its rewind and it is
 * staging), the next `limit` events after the cursor up to the watermark in log order, those
 * that the subscription's CURRENT filters (event names, stream prefixes) match with a valid
 * key (of `rewind_key` only, when set) staged, the cursor moved past the last event read —
 * cleared when fewer than `limit` were left — unless an erasure round committed between the
 * statement's snapshot and its lock (erase_epoch moved on: the events read may be erased ones;
 * nothing staged, `stale`). A rewind of one stream (`oneStream`: the key is
 * the stream) reads that stream alone, by its index, in version order — within a stream log
 * order is version order (schema.ts, streams.last_tx).
 */
export function stageChunk(options: {
  subscriptionId: number;
  token: string;
  limit: number;
  leaseMs: number;
  oneStream?: string;
}): SQL {
  const { subscriptionId, token, limit, leaseMs, oneStream } = options;
  // the cursor and the watermark as values (scalar subqueries), so that they bound the index
  // scan (see advanceSubscription)
  const cursor = sql`((SELECT rewind_cursor_tx FROM sub), (SELECT rewind_cursor_position FROM sub))`;
  const watermark = sql`((SELECT watermark_tx FROM sub), (SELECT watermark_position FROM sub))`;
  const columns = sql`e.tx, e.position,
        ('*' = ANY(sub.events) OR e.name = ANY(sub.events)) AND ${streamTaken(sql`e.stream`, sql`sub.streams`)} AS matches,
        ${keyExpression} AS key`;
  const scan =
    oneStream === undefined
      ? sql`
      SELECT ${columns}
      FROM ${events} e, sub
      WHERE (e.tx, e.position) > ${cursor} AND (e.tx, e.position) <= ${watermark}
      ORDER BY e.tx, e.position
      LIMIT ${limit}`
      : sql`
      SELECT ${columns}
      FROM ${events} e, sub
      WHERE e.stream = ${oneStream}
        -- past the cursor's version when the cursor is an event of the stream (the first chunk's
        -- is just before the event rewound to, and need not be); versions start at 0
        AND e.version > coalesce((SELECT c.version FROM ${events} c
                                  WHERE c.position = (SELECT rewind_cursor_position FROM sub)
                                    AND c.tx = (SELECT rewind_cursor_tx FROM sub) AND c.stream = ${oneStream}), -1)
        AND (e.tx, e.position) > ${cursor} AND (e.tx, e.position) <= ${watermark}
      ORDER BY e.version
      LIMIT ${limit}`;
  return sql`
    WITH sub AS (
      SELECT id, events, streams, key, rewind_key, watermark_tx, watermark_position, rewind_cursor_tx, rewind_cursor_position,
        erase_epoch
      FROM ${subscriptions}
      WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid AND rewind_cursor_tx IS NOT NULL AND ${asyncCommit}
      FOR UPDATE
    ),
    -- the locked row is the latest version, the events are read with the statement's snapshot:
    -- an erasure round that committed in between bumped the epoch (eraseStream.ts). Not stale
    -- when the rewind is not held any more (no row locked): \`held\` says so
    stale AS (
      SELECT coalesce((SELECT erase_epoch FROM sub) <>
        (SELECT erase_epoch FROM ${subscriptions} WHERE id = ${subscriptionId}), false) AS stale
    ),
    scan AS (${scan}),
    matched AS (
      SELECT tx, position, key FROM scan
      WHERE NOT (SELECT stale FROM stale) AND matches AND key IS NOT NULL AND ${keyProblem(sql`key`)} IS NULL
        AND ((SELECT rewind_key FROM sub) IS NULL OR key = (SELECT rewind_key FROM sub))
    ),
    last AS (SELECT tx, position FROM scan WHERE NOT (SELECT stale FROM stale) ORDER BY tx DESC, position DESC LIMIT 1),
    staged AS (
      INSERT INTO ${rewindStaged} (subscription_id, key, tx, position)
      SELECT ${subscriptionId}, key, tx, position FROM matched ORDER BY key, tx, position
    ),
    ${moveCursor({ subscriptionId, token, leaseMs, done: sql`NOT (SELECT stale FROM stale) AND (SELECT count(*) FROM scan) < ${limit}` })}
    SELECT (SELECT count(*) FROM scan)::int AS scanned, (SELECT count(*) FROM moved)::int AS held,
      (SELECT stale FROM stale) AS stale`;
}

/**
 * For a key function: the next `limit` events of the range after the cursor of the rewind
 * `token` holds, in log order (none when it holds none, or the range is staged); `matches`:
 * the subscription's current filters (event names, stream prefixes) take it; `erase_epoch`: the
 * subscription's, for writeStageChunk's compare-and-set.
 */
export function readStageChunk(options: { subscriptionId: number; token: string; limit: number }): SQL {
  const { subscriptionId, token, limit } = options;
  return sql`
    WITH sub AS (
      SELECT id, events, streams, watermark_tx, watermark_position, rewind_cursor_tx, rewind_cursor_position, erase_epoch
      FROM ${subscriptions} WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid
    )
    SELECT e.position, e.stream, e.version, e.name, e.data, e.meta, e.created_at, e.tx::text AS tx, sub.erase_epoch,
      ('*' = ANY(sub.events) OR e.name = ANY(sub.events)) AND ${streamTaken(sql`e.stream`, sql`sub.streams`)} AS matches
    FROM ${events} e, sub
    WHERE (e.tx, e.position) > ((SELECT rewind_cursor_tx FROM sub), (SELECT rewind_cursor_position FROM sub))
      AND (e.tx, e.position) <= ((SELECT watermark_tx FROM sub), (SELECT watermark_position FROM sub))
    ORDER BY e.tx, e.position
    LIMIT ${limit}`;
}

/**
 * For a key function: stages the keyed events of one chunk (read by readStageChunk) and moves
 * the cursor to `last` (`done`: the range is read, the cursor cleared) — only while `token`
 * holds the rewind, and only if no erasure round committed since the read (`eraseEpoch`, as
 * read: else nothing is written and the row says `stale`).
 */
export function writeStageChunk(options: {
  subscriptionId: number;
  token: string;
  leaseMs: number;
  last: { tx: string; position: number } | null;
  keyed: { tx: string; position: number; key: string }[];
  done: boolean;
  /** As readStageChunk read it (undefined: it read nothing). */
  eraseEpoch: number | undefined;
}): SQL {
  const { subscriptionId, token, leaseMs, last, keyed, done, eraseEpoch } = options;
  return sql`
    WITH last AS (SELECT ${last?.tx ?? null}::xid8 AS tx, ${last?.position ?? null}::bigint AS position),
    ${moveCursor({ subscriptionId, token, leaseMs, done: sql`${done}::boolean`, eraseEpoch })},
    staged AS (
      INSERT INTO ${rewindStaged} (subscription_id, key, tx, position)
      SELECT ${subscriptionId}, t.key, t.tx::xid8, t.position
      FROM jsonb_to_recordset(${JSON.stringify(keyed)}::jsonb) AS t(tx text, position bigint, key text)
      WHERE EXISTS (SELECT 1 FROM moved)
      ORDER BY t.key, t.tx::xid8, t.position
    )
    SELECT (SELECT count(*) FROM moved)::int AS held,
      NOT EXISTS (SELECT 1 FROM moved) AND EXISTS (
        SELECT 1 FROM ${subscriptions} WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid) AS stale`;
}

/**
 * The CTE `moved`: the cursor moved to \`last(tx, position)\` (kept where it has no row), or
 * cleared when `done`; the lease renewed — only while `token` holds the rewind and it stages
 * (and, given `eraseEpoch`, while the subscription's erase_epoch is still that).
 */
function moveCursor(options: {
  subscriptionId: number;
  token: string;
  leaseMs: number;
  done: SQL;
  eraseEpoch?: number;
}): SQL {
  const { subscriptionId, token, leaseMs, done, eraseEpoch } = options;
  const sameEpoch = eraseEpoch === undefined ? sql`` : sql`AND s.erase_epoch = ${eraseEpoch}`;
  return sql`moved AS (
      UPDATE ${subscriptions} s SET
        rewind_cursor_tx = CASE WHEN ${done} THEN NULL ELSE coalesce((SELECT tx FROM last), s.rewind_cursor_tx) END,
        rewind_cursor_position = CASE WHEN ${done} THEN NULL
                                      ELSE coalesce((SELECT position FROM last), s.rewind_cursor_position) END,
        rewind_until = ${leaseEnd(leaseMs)}
      WHERE s.id = ${subscriptionId} AND s.rewind_token = ${token}::uuid AND s.rewind_cursor_tx IS NOT NULL ${sameEpoch}
        AND ${asyncCommit}
      RETURNING s.id
    )`;
}

/**
 * Fresh statistics of rewind_staged, between staging and the requeue: the requeue walks it in
 * key order, and planned on the statistics of the table as it was (empty, say: every
 * subscription counted as 0.5% of it), the walk was a bitmap scan and a sort of every staged
 * row left, in every chunk (a million staged events: 1.6 s per chunk at first; 0.1 s after
 * this). A table's owner may ANALYZE it; anyone else gets a warning, not an error.
 */
export function analyzeStaged(): SQL {
  return sql`ANALYZE ${rewindStaged}`;
}

export interface RequeueChunkRow extends ChunkRow {
  requeued: number;
  /** The last staged event taken (null: none was left): the next chunk takes what follows it. */
  last_key: string | null;
  last_tx: string | null;
  last_position: string | null;
}

/**
 * One chunk of the requeue, in ONE statement: the lease renewed (only while `token` holds the
 * rewind and its range is staged), the next `limit` staged events after `after` in (key, log)
 * order taken out of rewind_staged (by their row ids, read in the same statement: nothing else
 * writes a rewind's staged rows) and queued again. `after` (the last one the chunk before took;
 * null at first) starts the index scan past the rows taken so far: left dead until vacuum, a
 * scan from the start of the subscription's rows would step over all of them in every chunk.
 */
export function requeueChunk(options: {
  subscriptionId: number;
  token: string;
  limit: number;
  leaseMs: number;
  after: { key: string; tx: string; position: number } | null;
}): SQL {
  const { subscriptionId, token, limit, leaseMs, after } = options;
  const past =
    after === null
      ? sql``
      : sql`AND (key, tx, position) > (${after.key}::text, ${after.tx}::xid8, ${after.position}::bigint)`;
  return sql`
    WITH moved AS (
      UPDATE ${subscriptions} s SET rewind_until = ${leaseEnd(leaseMs)}
      WHERE s.id = ${subscriptionId} AND s.rewind_token = ${token}::uuid AND s.rewind_cursor_tx IS NULL AND ${asyncCommit}
      RETURNING s.id, s.rewinds AS mark, s.key_seq_floor AS floor
    ),
    matched AS (
      DELETE FROM ${rewindStaged}
      WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM ${rewindStaged} WHERE subscription_id = ${subscriptionId} ${past}
        ORDER BY subscription_id, key, tx, position LIMIT ${limit}))
        AND EXISTS (SELECT 1 FROM moved)
      RETURNING key, tx, position
    ),
    last_taken AS (SELECT key, tx::text AS tx, position FROM matched ORDER BY key DESC, tx DESC, position DESC LIMIT 1),
    ${requeue(subscriptionId)}
    SELECT (SELECT count(*) FROM matched)::int AS scanned, (SELECT count(*) FROM requeued)::int AS requeued,
      (SELECT count(*) FROM moved)::int AS held, (SELECT key FROM last_taken) AS last_key,
      (SELECT tx FROM last_taken) AS last_tx, (SELECT position FROM last_taken) AS last_position`;
}

/**
 * Queues the events of `matched(tx, position, key)` (one chunk of the staged ones, given the
 * rewind's number as `moved.mark`) again, key by key, each key's row locked (in key order, the
 * order every writer of key rows keeps) and its state read after the lock:
 *   append   this rewind queued the key's earlier events again in the chunk before
 *            (rewound_by), or it is leased (its holder keeps the lease and its batch: one holder
 *            per key): the events go after what is queued, which is delivered first; an idle
 *            key becomes ready;
 *   covered  its queue already holds an event before the key's first one in the range:
 *            everything from there on is still to be delivered (nothing to do);
 *   replace  otherwise (ready, in backoff, idle, dead): what is queued is dropped and the key
 *            delivers from its first event in the range — a fresh start: attempts reset, a dead
 *            key comes back (the rewind is the operator's retry from there), a paused key stays
 *            paused. The ack cursor moves past the dropped rows, so a claim whose snapshot
 *            still sees them never hands them out.
 * Requeued events get the next seqs of the key's counter, in log order, and `replay`; the key
 * is replaying (claimed after live keys) until it acks the last of them. A key with events here
 * but no row yet (the key strategy changed, or its idle row was compacted) gets one, numbered
 * from the subscription's seq floor as the chunk's lock of the subscription row returns it
 * (`moved.floor`: src/sql/common/keySeqFloor.ts). Compaction leaves a rewinding subscription
 * alone, so no row of a key staged here goes between two chunks.
 */
function requeue(subscriptionId: number): SQL {
  // Joins between CTEs are avoided: the planner cannot count a CTE's rows (it guessed 1 for
  // `matched` and joined 50,000 rows to 1,000 keys by nested loop: 9 s instead of 0.7). Keys
  // are looked up by index, and each key's new counter travels in one jsonb object. Each write
  // names its rows by primary key (= ANY of the chunk's keys) beside its join: a join with a
  // CTE was planned as a hash join over every key row of the table (statistics of a table
  // that was small then), once per chunk.
  return sql`
    firsts AS (
      SELECT DISTINCT ON (key) key, tx, position, count(*) OVER (PARTITION BY key) AS n
      FROM matched WHERE EXISTS (SELECT 1 FROM moved) ORDER BY key, tx, position
    ),
    locked AS (
      SELECT k.subscription_id, k.key, k.seq, k.last_seq, k.lease_until, k.rewound_by, f.tx AS first_tx,
        f.position AS first_position, f.n
      FROM firsts f JOIN ${keys} k ON k.subscription_id = ${subscriptionId} AND k.key = f.key
      WHERE k.key = ANY(ARRAY(SELECT key FROM firsts ORDER BY key))
      ORDER BY k.key
      FOR UPDATE OF k
    ),
    decided AS (
      SELECT l.subscription_id, l.key, l.seq, l.last_seq, l.n, ${lockedNow} AS at,
        CASE WHEN l.rewound_by = (SELECT mark FROM moved) THEN 'append'
             WHEN head.position IS NOT NULL AND (head.tx, head.position) < (l.first_tx, l.first_position) THEN 'covered'
             WHEN l.lease_until > ${lockedNow} THEN 'append'
             ELSE 'replace' END AS mode
      FROM locked l
      LEFT JOIN LATERAL (
        SELECT q.tx, q.position FROM ${queue} q
        WHERE q.subscription_id = l.subscription_id AND q.key = l.key AND q.seq > l.last_seq
        ORDER BY q.seq LIMIT 1
      ) head ON true
    ),
    updated AS (
      UPDATE ${keys} k SET
        seq = d.seq + d.n,
        replay_seq = d.seq + d.n,
        rewound_by = (SELECT mark FROM moved),
        active_at = now(),
        pending = CASE WHEN d.mode = 'replace' THEN d.n ELSE k.pending + d.n END,
        last_seq = CASE WHEN d.mode = 'replace' THEN d.seq ELSE k.last_seq END,
        available_at = CASE WHEN d.mode = 'replace' OR (k.available_at IS NULL AND k.dead_at IS NULL) THEN d.at
                            ELSE k.available_at END,
        attempts = CASE WHEN d.mode = 'replace' THEN 0 ELSE k.attempts END,
        last_error = CASE WHEN d.mode = 'replace' THEN NULL ELSE k.last_error END,
        failed_position = CASE WHEN d.mode = 'replace' THEN NULL ELSE k.failed_position END,
        dead_at = CASE WHEN d.mode = 'replace' THEN NULL ELSE k.dead_at END,
        lease_token = CASE WHEN d.mode = 'replace' THEN NULL ELSE k.lease_token END,
        lease_until = CASE WHEN d.mode = 'replace' THEN NULL ELSE k.lease_until END
      FROM decided d
      WHERE k.subscription_id = d.subscription_id AND k.key = d.key AND d.mode <> 'covered'
        AND k.subscription_id = ${subscriptionId} AND k.key = ANY(ARRAY(SELECT key FROM decided ORDER BY key))
      RETURNING k.key, k.seq, d.mode, d.seq AS old_seq, d.last_seq AS old_last_seq
    ),
    fresh AS (
      INSERT INTO ${keys} AS k (subscription_id, key, pending, seq, replay_seq, available_at, rewound_by)
      SELECT ${subscriptionId}, f.key, f.n, m.floor + f.n, m.floor + f.n, now(), m.mark FROM firsts f, moved m
      -- not an anti-join with keys: planned on a keys table without statistics (its first
      -- rewind, say), it probed by subscription alone, every fresh key against every row
      -- inserted so far (5 s for 5,000 keys); a hashed subplan over the rows found
      WHERE f.key NOT IN (SELECT key FROM locked)
      ORDER BY f.key
      ON CONFLICT (subscription_id, key) DO UPDATE SET
        pending = k.pending + excluded.pending, seq = k.seq + excluded.pending, replay_seq = k.seq + excluded.pending,
        available_at = coalesce(k.available_at, now()), rewound_by = excluded.rewound_by
      RETURNING k.key, k.seq
    ),
    dropped AS (
      DELETE FROM ${queue} q USING updated u
      WHERE u.mode = 'replace' AND q.subscription_id = ${subscriptionId} AND q.key = u.key
        AND q.seq > u.old_last_seq AND q.seq <= u.old_seq
        AND q.key = ANY(ARRAY(SELECT key FROM updated WHERE mode = 'replace' ORDER BY key))
    ),
    -- each requeued key's counter after this chunk (covered keys are not in it); computed
    -- once (inlined, the planner re-ran the aggregate for every requeued row)
    counters AS MATERIALIZED (
      SELECT jsonb_object_agg(key, seq) AS seqs
      FROM (SELECT key, seq FROM updated UNION ALL SELECT key, seq FROM fresh) c
    ),
    requeued AS (
      INSERT INTO ${queue} (subscription_id, key, seq, tx, position, replay, deliver_at)
      SELECT ${subscriptionId}, m.key,
        m.last - count(*) OVER (PARTITION BY m.key) + row_number() OVER (PARTITION BY m.key ORDER BY m.tx, m.position),
        m.tx, m.position, true,
        -- a delay is the event's in every delivery: a replayed event whose time has passed goes
        -- at once, one still ahead holds its key again (one primary-key probe per row)
        (SELECT e.deliver_at FROM ${events} e WHERE e.position = m.position)
      -- the counter looked up before the sort (carrying the jsonb through it cost seconds)
      FROM (SELECT m.key, m.tx, m.position, (c.seqs ->> m.key)::bigint AS last
            FROM matched m, counters c WHERE c.seqs ? m.key OFFSET 0) m
      ORDER BY m.key, m.tx, m.position
      RETURNING key
    )`;
}
