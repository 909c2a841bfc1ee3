import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, subscriptions } from "../../db/schema.js";
import { keyExpression, keyProblem, rewindState, streamTaken } from "../advance/advanceSubscription.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { lockedNow } from "../common/clock.js";

// A rewind is a series of statements that each commit (src/rewind.ts), never one transaction:
// any transaction that holds an xid holds the cluster's xmin horizon, and with it every
// subscription's advance (docs/architecture.md, invariant 1).
//   beginRewind     marks the subscription as rewinding (its own advance waits from now on)
//                   and sets the cursor just before the event rewound to;
//   rewindChunk     the next `limit` events of the range after the cursor, in log order,
//                   queued again and the cursor moved past them (a key function's subscription:
//                   readRewindChunk, keys computed in JS, writeRewindChunk);
//   finishRewind    the mark cleared: the subscription advances again.
// The range ends at the watermark, which stands still while the subscription is rewinding;
// and no advance numbers the keys' events between two chunks — so each key's replay is in
// log order and ends exactly where the key's later events begin.

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
        rewind_until = ${leaseEnd(leaseMs)}, rewind_cursor_tx = t.from_tx::xid8,
        rewind_cursor_position = ${position - 1}, rewind_key = ${key ?? null}::text
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
}

/**
 * Takes over a rewind whose lease is over (its holder crashed or stalled): `token` holds it
 * from now on and finishes it from its cursor. None where the subscription is keyed by a
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
    RETURNING key, rewind_key`;
}

/** Ends the rewind `token` holds: the subscription advances again. */
export function finishRewind(subscriptionId: number, token: string): SQL {
  return sql`
    UPDATE ${subscriptions} SET rewind_token = NULL, rewind_until = NULL, rewind_cursor_tx = NULL,
      rewind_cursor_position = NULL, rewind_key = NULL
    WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid
    RETURNING id`;
}

export interface ChunkRow {
  /** Events of the range read (matching or not): fewer than the limit, and the range is done. */
  scanned: number;
  requeued: number;
  /** 0: the rewind is not held by this token any more (taken over, or the subscription deleted). */
  held: number;
}

/**
 * One chunk of a rewind whose key is computed in SQL (stream or JSON path), in ONE statement:
 * the subscription row locked (only while `token` holds its rewind), the next `limit` events
 * after the cursor up to the watermark in log order, those that the subscription's CURRENT
 * filters (event names, stream prefixes) match with a valid key (of `rewind_key` only, when
 * set) queued again, the cursor moved past the last event read. A rewind of one stream
 * (`oneStream`: the key is the stream) reads that stream alone, by its index, in version order
 * — within a stream log order is version order (schema.ts, streams.last_tx).
 */
export function rewindChunk(options: {
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
      SELECT id, events, streams, key, rewind_key, watermark_tx, watermark_position, rewind_cursor_tx, rewind_cursor_position
      FROM ${subscriptions}
      WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid AND ${asyncCommit}
      FOR UPDATE
    ),
    scan AS (${scan}),
    matched AS (
      SELECT tx, position, key FROM scan
      WHERE matches AND key IS NOT NULL AND ${keyProblem(sql`key`)} IS NULL
        AND ((SELECT rewind_key FROM sub) IS NULL OR key = (SELECT rewind_key FROM sub))
    ),
    last AS (SELECT tx, position FROM scan ORDER BY tx DESC, position DESC LIMIT 1),
    ${requeueAndMove({ subscriptionId, token, leaseMs })}
    SELECT (SELECT count(*) FROM scan)::int AS scanned, (SELECT count(*) FROM requeued)::int AS requeued,
      (SELECT count(*) FROM moved)::int AS held`;
}

/**
 * For a key function: the next `limit` events of the range after the cursor of the rewind
 * `token` holds, in log order (none when it holds none); `matches`: the subscription's current
 * filters (event names, stream prefixes) take it.
 */
export function readRewindChunk(options: { subscriptionId: number; token: string; limit: number }): SQL {
  const { subscriptionId, token, limit } = options;
  return sql`
    WITH sub AS (
      SELECT id, events, streams, watermark_tx, watermark_position, rewind_cursor_tx, rewind_cursor_position
      FROM ${subscriptions} WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid
    )
    SELECT e.position, e.stream, e.version, e.name, e.data, e.meta, e.created_at, e.tx::text AS tx,
      ('*' = ANY(sub.events) OR e.name = ANY(sub.events)) AND ${streamTaken(sql`e.stream`, sql`sub.streams`)} AS matches
    FROM ${events} e, sub
    WHERE (e.tx, e.position) > ((SELECT rewind_cursor_tx FROM sub), (SELECT rewind_cursor_position FROM sub))
      AND (e.tx, e.position) <= ((SELECT watermark_tx FROM sub), (SELECT watermark_position FROM sub))
    ORDER BY e.tx, e.position
    LIMIT ${limit}`;
}

/**
 * For a key function: queues the keyed events of one chunk (read by readRewindChunk) again and
 * moves the cursor to `last` (null: the range had nothing left) — only while `token` holds the rewind.
 */
export function writeRewindChunk(options: {
  subscriptionId: number;
  token: string;
  leaseMs: number;
  last: { tx: string; position: number } | null;
  keyed: { tx: string; position: number; key: string }[];
}): SQL {
  const { subscriptionId, token, leaseMs, last, keyed } = options;
  return sql`
    WITH matched AS (
      SELECT t.tx::xid8 AS tx, t.position, t.key
      FROM jsonb_to_recordset(${JSON.stringify(keyed)}::jsonb) AS t(tx text, position bigint, key text)
    ),
    last AS (SELECT ${last?.tx ?? null}::xid8 AS tx, ${last?.position ?? null}::bigint AS position),
    ${requeueAndMove({ subscriptionId, token, leaseMs })}
    SELECT (SELECT count(*) FROM requeued)::int AS requeued, (SELECT count(*) FROM moved)::int AS held`;
}

/**
 * The write half of a chunk, given `matched(tx, position, key)` and `last(tx, position)` (at
 * most one row: the last event read): first the subscription row — the cursor moved to `last`
 * and the lease renewed, only while `token` holds the rewind (else nothing below happens) —
 * then the events of `matched` queued again, key by key, each key's row locked (in key order,
 * the order every writer of key rows keeps) and its state read after the lock:
 *   append   this rewind queued the key's earlier events again in an earlier chunk
 *            (rewound_by), or it is leased (its holder keeps the lease and its batch: one holder
 *            per key): the events go after what is queued, which is delivered first; an idle
 *            key becomes ready;
 *   covered  its queue already holds an event before the key's first one here: everything
 *            from there on is still to be delivered (nothing to do). A later chunk finds the
 *            same, or what was queued delivered up to an event of its own (replaced below:
 *            nothing before it is lost);
 *   replace  otherwise (ready, in backoff, idle, dead): what is queued is dropped and the key
 *            delivers from its first event here — a fresh start: attempts reset, a dead key comes
 *            back (the rewind is the operator's retry from there), a paused key stays paused.
 *            The ack cursor moves past the dropped rows, so a claim whose snapshot still sees
 *            them never hands them out.
 * Requeued events get the next seqs of the key's counter, in log order, and `replay`; the key
 * is replaying (claimed after live keys) until it acks the last of them. A key with events here
 * but no row yet (the key strategy changed) gets one.
 */
function requeueAndMove(options: { subscriptionId: number; token: string; leaseMs: number }): SQL {
  const { subscriptionId, token, leaseMs } = options;
  // Joins between CTEs are avoided: the planner cannot count a CTE's rows (it guessed 1 for
  // `matched` and joined 50,000 rows to 1,000 keys by nested loop: 9 s instead of 0.7). Keys
  // are looked up by index, and each key's new counter travels in one jsonb object.
  return sql`
    moved AS (
      UPDATE ${subscriptions} s SET
        rewind_cursor_tx = coalesce((SELECT tx FROM last), s.rewind_cursor_tx),
        rewind_cursor_position = coalesce((SELECT position FROM last), s.rewind_cursor_position),
        rewind_until = ${leaseEnd(leaseMs)}
      WHERE s.id = ${subscriptionId} AND s.rewind_token = ${token}::uuid AND ${asyncCommit}
      RETURNING s.id, s.rewinds AS mark
    ),
    firsts AS (
      SELECT DISTINCT ON (key) key, tx, position, count(*) OVER (PARTITION BY key) AS n
      FROM matched WHERE EXISTS (SELECT 1 FROM moved) ORDER BY key, tx, position
    ),
    locked AS (
      SELECT k.subscription_id, k.key, k.seq, k.last_seq, k.lease_until, k.rewound_by, f.tx AS first_tx,
        f.position AS first_position, f.n
      FROM firsts f JOIN ${keys} k ON k.subscription_id = ${subscriptionId} AND k.key = f.key
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
      RETURNING k.key, k.seq, d.mode, d.seq AS old_seq, d.last_seq AS old_last_seq
    ),
    fresh AS (
      INSERT INTO ${keys} AS k (subscription_id, key, pending, seq, replay_seq, available_at, rewound_by)
      SELECT ${subscriptionId}, f.key, f.n, f.n, f.n, now(), (SELECT mark FROM moved) FROM firsts f
      WHERE NOT EXISTS (SELECT 1 FROM ${keys} x WHERE x.subscription_id = ${subscriptionId} AND x.key = f.key)
      ORDER BY f.key
      ON CONFLICT (subscription_id, key) DO UPDATE SET
        pending = k.pending + excluded.pending, seq = k.seq + excluded.seq, replay_seq = k.seq + excluded.seq,
        available_at = coalesce(k.available_at, now()), rewound_by = excluded.rewound_by
      RETURNING k.key, k.seq
    ),
    dropped AS (
      DELETE FROM ${queue} q USING updated u
      WHERE u.mode = 'replace' AND q.subscription_id = ${subscriptionId} AND q.key = u.key
        AND q.seq > u.old_last_seq AND q.seq <= u.old_seq
    ),
    -- each requeued key's counter after this chunk (covered keys are not in it); computed
    -- once (inlined, the planner re-ran the aggregate for every requeued row)
    counters AS MATERIALIZED (
      SELECT jsonb_object_agg(key, seq) AS seqs
      FROM (SELECT key, seq FROM updated UNION ALL SELECT key, seq FROM fresh) c
    ),
    requeued AS (
      INSERT INTO ${queue} (subscription_id, key, seq, tx, position, replay)
      SELECT ${subscriptionId}, m.key,
        m.last - count(*) OVER (PARTITION BY m.key) + row_number() OVER (PARTITION BY m.key ORDER BY m.tx, m.position),
        m.tx, m.position, true
      -- the counter looked up before the sort (carrying the jsonb through it cost seconds)
      FROM (SELECT m.key, m.tx, m.position, (c.seqs ->> m.key)::bigint AS last
            FROM matched m, counters c WHERE c.seqs ? m.key OFFSET 0) m
      ORDER BY m.key, m.tx, m.position
      RETURNING key
    )`;
}
