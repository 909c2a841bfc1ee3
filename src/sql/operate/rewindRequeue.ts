// The requeue phase of a rewind (src/sql/operate/rewind.ts says how a rewind goes): the staged
// events, a chunk at a time in (key, log) order, queued again.
import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, rewindStaged, subscriptions } from "../../db/schema.js";
import { tenantTurnsEarlier } from "../common/tenantTurns.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { elapsedMs, lockedNow } from "../common/clock.js";
import { cappedDeliverAt } from "../common/delays.js";
import { leaseEnd } from "./rewind.js";
import type { ChunkRow } from "./rewindStage.js";

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
      RETURNING s.id, s.rewinds AS mark, s.key_seq_floor AS floor, s.max_delay_ms
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
      (SELECT tx FROM last_taken) AS last_tx, (SELECT position FROM last_taken) AS last_position,
      ${elapsedMs} AS elapsed_ms`;
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
      RETURNING k.key, k.seq, d.mode, d.seq AS old_seq, d.last_seq AS old_last_seq, k.subscription_id, k.tenant, k.available_at
    ),
    -- their tenants' turns in the fair pick no later than their keys' times (a key made here has
    -- no tenant until its next enqueue)
    turns AS (${tenantTurnsEarlier(sql`updated`)}),
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
        -- a delay is the event's in every delivery (capped at maxDelayMs, as the advance does): a
        -- replayed event whose time has passed goes at once, one still ahead holds its key again
        -- (one primary-key probe per row)
        (SELECT ${cappedDeliverAt(sql`e`, sql`(SELECT max_delay_ms FROM moved)`)} FROM ${events} e WHERE e.position = m.position)
      -- the counter looked up before the sort (carrying the jsonb through it cost seconds)
      FROM (SELECT m.key, m.tx, m.position, (c.seqs ->> m.key)::bigint AS last
            FROM matched m, counters c WHERE c.seqs ? m.key OFFSET 0) m
      ORDER BY m.key, m.tx, m.position
      RETURNING key
    )`;
}
