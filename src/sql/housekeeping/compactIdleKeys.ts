import { sql, type SQL } from "drizzle-orm";
import { keys, queue, rateBuckets, subscriptions } from "../../db/schema.js";

export interface CompactedRow {
  /** Key rows deleted. */
  deleted: number;
  /** Subscriptions left out because another statement held their row or a rewind is under way (compacted next time). */
  busy: number;
}

/**
 * Deletes up to `limit` idle key rows, in ONE statement, and raises each subscription's seq floor
 * to the highest seq of its rows deleted (src/sql/common/keySeqFloor.ts): a key that comes back
 * numbers on above every seq it had. Idle: nothing queued (pending 0 and no queue row), no lease
 * (no live one), not dead, not paused, and no activity (keys.active_at) for `idleMs` by the
 * database's clock.
 *   subs    the subscription rows, locked FOR NO KEY UPDATE SKIP LOCKED, in id order (the lock
 *           order of every writer of key rows: subscription, then keys). A subscription whose
 *           row is held — by an advance, a rewind's chunk, a pause — is skipped, never waited
 *           for: such a writer may be adding events to a key that looks idle here. Any writer that comes after waits for this statement and
 *           reads the raised floor from the row it locks. A subscription being rewound is
 *           skipped too: the rewind commits chunk by chunk without holding its row, and a key row
 *           its staged events will requeue must not go between two chunks.
 *   idle    their idle key rows, locked SKIP LOCKED (a row another session holds is in use).
 *           The conditions are in this query, next to its FOR UPDATE: a row that changed since
 *           the statement's snapshot is checked again in its latest version (a DELETE … WHERE
 *           key IN (SELECT …) would check only its own WHERE again, and delete a row an advance
 *           or a pause had just changed).
 *   deleted the rows, with their counters;  raised  the floors;  buckets  their rate-limit buckets.
 * No ORDER BY: which idle keys go first does not matter, and the index scan (keys_idle_idx, the
 * threshold an index condition) stops after `limit` rows however many keys are idle. The clock
 * is now(), not clock_timestamp() (which is volatile: no index condition could use it): this
 * statement never waits for a lock, so its start is the moment it looks. Bounded by `limit`:
 * each chunk commits in milliseconds and holds the subscription rows only that long.
 */
export function compactIdleKeys({ idleMs, limit }: { idleMs: number; limit: number }): SQL {
  return sql`
    WITH subs AS (
      SELECT id FROM ${subscriptions} WHERE rewind_token IS NULL ORDER BY id FOR NO KEY UPDATE SKIP LOCKED
    ),
    idle AS (
      SELECT k.subscription_id, k.key FROM ${keys} k
      WHERE k.subscription_id = ANY(ARRAY(SELECT id FROM subs ORDER BY id))
        AND k.available_at IS NULL AND k.dead_at IS NULL AND k.paused_at IS NULL
        AND k.active_at < now() - ${idleMs} * interval '1 millisecond'
        AND k.pending = 0 AND (k.lease_until IS NULL OR k.lease_until <= now())
        AND NOT EXISTS (SELECT 1 FROM ${queue} q WHERE q.subscription_id = k.subscription_id AND q.key = k.key)
      LIMIT ${limit}
      FOR UPDATE OF k SKIP LOCKED
    ),
    deleted AS (
      DELETE FROM ${keys} k USING idle i
      WHERE k.subscription_id = i.subscription_id AND k.key = i.key
      RETURNING k.subscription_id, k.key, k.seq
    ),
    -- a rate limit by key: the key's bucket goes with it (one that comes back starts with full room)
    buckets AS (
      DELETE FROM ${rateBuckets} b USING deleted d
      WHERE b.subscription_id = d.subscription_id AND b.scope = 'k:' || d.key
    ),
    raised AS (
      UPDATE ${subscriptions} s SET key_seq_floor = greatest(s.key_seq_floor, d.seq)
      FROM (SELECT subscription_id, max(seq) AS seq FROM deleted GROUP BY subscription_id) d
      WHERE s.id = d.subscription_id
    )
    SELECT (SELECT count(*) FROM deleted)::int AS deleted,
      ((SELECT count(*) FROM ${subscriptions}) - (SELECT count(*) FROM subs))::int AS busy`;
}
