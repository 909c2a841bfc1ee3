import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, subscriptions } from "../../db/schema.js";
import { keyExpression, keyProblem, streamTaken } from "../advance/advanceSubscription.js";
import { lockedNow } from "../common/clock.js";
import { seqFloor } from "../common/keySeqFloor.js";

// A rewind runs in ONE transaction of a few statements (src/rewind.ts):
//   holdAdvancing   the advancer's lock of this subscription, held to the end: no advance
//                   moves its watermark or numbers its keys' events meanwhile;
//   rewindTarget    the subscription row, locked (a function-key advance, a PUT wait for us),
//                   read with a snapshot taken after that wait, and where the rewind starts;
//   (function keys) the events' keys computed in JS, staged in a temporary table;
//   requeue         the events queued again, key by key.
// Every statement after the first has a snapshot taken after the locks: it sees every event
// the watermark covers, and the key counters as the last advance left them.

export interface RewindTargetRow {
  id: number;
  key: string;
  events: string[];
  watermark_tx: string;
  watermark_position: string;
  /** The tx of the event at `to` (null: there is no such event). */
  from_tx: string | null;
}

/** The subscription row, locked; with the transaction id of the event at position `to` (when given). */
export function rewindTarget(subscription: string, to: number | "beginning"): SQL {
  return sql`
    SELECT s.id, s.key, s.events, s.watermark_tx::text AS watermark_tx, s.watermark_position,
      ${to === "beginning" ? sql`'0'` : sql`(SELECT e.tx::text FROM ${events} e WHERE e.position = ${to})`} AS from_tx
    FROM ${subscriptions} s WHERE s.name = ${subscription}
    FOR UPDATE OF s`;
}

export interface RewindRange {
  subscriptionId: number;
  /** Inclusive start, in log order: (tx, position) of the event rewound to, or ('0', 0). */
  from: { tx: string; position: number };
  /** Only this key (else every key the range has events of). */
  key?: string;
}

/**
 * The events to queue again, with a key computed in SQL (stream or JSON path): those of the
 * range from `from` through the watermark that the subscription's CURRENT filters (event names,
 * stream prefixes) match and
 * that have a valid key under its current key strategy. One key of a stream-keyed
 * subscription reads that stream alone (its index), not the whole range.
 */
export function matchedInSql(range: RewindRange, byStream: boolean): SQL {
  const oneStream = range.key !== undefined && byStream ? sql`AND e.stream = ${range.key}` : sql``;
  return sql`
    SELECT tx, position, key FROM (
      SELECT e.tx, e.position, ${keyExpression} AS key
      FROM ${events} e, (SELECT events, streams, key, watermark_tx, watermark_position FROM ${subscriptions}
                          WHERE id = ${range.subscriptionId}) sub
      WHERE (e.tx, e.position) >= (${range.from.tx}::xid8, ${range.from.position}::bigint)
        AND (e.tx, e.position) <= (sub.watermark_tx, sub.watermark_position)
        AND ('*' = ANY(sub.events) OR e.name = ANY(sub.events))
        AND ${streamTaken(sql`e.stream`, sql`sub.streams`)} ${oneStream}
    ) scan
    WHERE key IS NOT NULL AND ${keyProblem(sql`key`)} IS NULL
      ${range.key === undefined ? sql`` : sql`AND key = ${range.key}`}`;
}

/** A transaction-scoped table for the keys a key function computed (function-key subscriptions). */
export const stageTable = sql.raw("corq_rewind_staged");

export function createStage(): SQL {
  return sql`CREATE TEMPORARY TABLE IF NOT EXISTS ${stageTable} (tx xid8, position bigint, key text) ON COMMIT DROP`;
}

/**
 * The events of the range, for a key function: `limit` of them after (tx, position), in log
 * order; `matches`: the subscription's current filters (event names, stream prefixes) take it.
 */
export function readRewindRange(
  range: RewindRange,
  after: { tx: string; position: number } | null,
  limit: number,
): SQL {
  return sql`
    SELECT e.position, e.stream, e.version, e.name, e.data, e.meta, e.created_at, e.tx::text AS tx,
      ('*' = ANY(s.events) OR e.name = ANY(s.events)) AND ${streamTaken(sql`e.stream`, sql`s.streams`)} AS matches
    FROM ${events} e, ${subscriptions} s
    WHERE s.id = ${range.subscriptionId}
      AND (e.tx, e.position) >= (${range.from.tx}::xid8, ${range.from.position}::bigint)
      AND (e.tx, e.position) <= (s.watermark_tx, s.watermark_position)
      ${after === null ? sql`` : sql`AND (e.tx, e.position) > (${after.tx}::xid8, ${after.position}::bigint)`}
    ORDER BY e.tx, e.position
    LIMIT ${limit}`;
}

export function stageKeys(rows: { tx: string; position: number; key: string }[]): SQL {
  return sql`
    INSERT INTO ${stageTable} (tx, position, key)
    SELECT t.tx::xid8, t.position, t.key
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS t(tx text, position bigint, key text)
    ORDER BY t.tx::xid8, t.position`;
}

export const staged = (key?: string): SQL =>
  sql`SELECT tx, position, key FROM ${stageTable} ${key === undefined ? sql`` : sql`WHERE key = ${key}`}`;

export interface RequeueRow {
  requeued: number;
  keys: number;
}

/**
 * Queues the events of `matched(tx, position, key)` again, key by key, each key's row locked
 * (in key order, the order every writer of key rows keeps) and its state read after the lock:
 *   covered  its queue already holds an event before the key's first one in the range:
 *            everything from there on is still to be delivered (nothing to do);
 *   append   it is leased: its holder keeps the lease and its batch (one holder per key); the
 *            events go after what is queued, which is delivered first;
 *   replace  otherwise (ready, in backoff, idle, dead): what is queued is dropped and the key
 *            delivers from the range's start — a fresh start: attempts reset, a dead key comes
 *            back (the rewind is the operator's retry from there), a paused key stays paused.
 *            The ack cursor moves past the dropped rows, so a claim whose snapshot still sees
 *            them never hands them out.
 * Requeued events get the next seqs of the key's counter, in log order, and `replay`; the key
 * is replaying (claimed after live keys) until it acks the last of them. A key the range has
 * events of but no row yet (the key strategy changed, or its idle row was compacted) gets one,
 * numbered from the subscription's seq floor. (Compaction cannot delete a row between this
 * statement's snapshot and its locks: it skips a subscription whose row is locked, and the
 * rewind holds that lock from rewindTarget on.)
 */
export function requeue(subscriptionId: number, matched: SQL): SQL {
  // Joins between CTEs are avoided: the planner cannot count a CTE's rows (it guessed 1 for
  // `matched` and joined 50,000 rows to 1,000 keys by nested loop: 9 s instead of 0.7). Keys
  // are looked up by index, and each key's new counter travels in one jsonb object.
  return sql`
    WITH matched AS (${matched}),
    firsts AS (
      SELECT DISTINCT ON (key) key, tx, position, count(*) OVER (PARTITION BY key) AS n
      FROM matched ORDER BY key, tx, position
    ),
    locked AS (
      SELECT k.subscription_id, k.key, k.seq, k.last_seq, k.lease_until, f.tx AS first_tx,
        f.position AS first_position, f.n
      FROM firsts f JOIN ${keys} k ON k.subscription_id = ${subscriptionId} AND k.key = f.key
      ORDER BY k.key
      FOR UPDATE OF k
    ),
    decided AS (
      SELECT l.subscription_id, l.key, l.seq, l.last_seq, l.n, ${lockedNow} AS at,
        CASE WHEN head.position IS NOT NULL AND (head.tx, head.position) < (l.first_tx, l.first_position) THEN 'covered'
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
        pending = CASE WHEN d.mode = 'replace' THEN d.n ELSE k.pending + d.n END,
        last_seq = CASE WHEN d.mode = 'replace' THEN d.seq ELSE k.last_seq END,
        available_at = CASE WHEN d.mode = 'replace' THEN d.at ELSE k.available_at END,
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
      INSERT INTO ${keys} AS k (subscription_id, key, pending, seq, replay_seq, available_at)
      SELECT ${subscriptionId}, f.key, f.n, fl.floor + f.n, fl.floor + f.n, now()
      FROM firsts f, (SELECT ${seqFloor(subscriptionId)} AS floor) fl
      WHERE NOT EXISTS (SELECT 1 FROM ${keys} x WHERE x.subscription_id = ${subscriptionId} AND x.key = f.key)
      ORDER BY f.key
      ON CONFLICT (subscription_id, key) DO UPDATE SET
        pending = k.pending + excluded.pending, seq = k.seq + excluded.pending, replay_seq = k.seq + excluded.pending,
        available_at = coalesce(k.available_at, now())
      RETURNING k.key, k.seq
    ),
    dropped AS (
      DELETE FROM ${queue} q USING updated u
      WHERE u.mode = 'replace' AND q.subscription_id = ${subscriptionId} AND q.key = u.key
        AND q.seq > u.old_last_seq AND q.seq <= u.old_seq
    ),
    -- each requeued key's counter after this rewind (covered keys are not in it); computed
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
    )
    SELECT (SELECT count(*) FROM requeued)::int AS requeued,
      ((SELECT count(*) FROM updated) + (SELECT count(*) FROM fresh))::int AS keys`;
}
