import { sql, type SQL } from "drizzle-orm";
import { roomFreed } from "../common/tenantTurns.js";
import { activity, keys, queue } from "../../db/schema.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { countAcked } from "../activity/activity.js";
import { lockedNow } from "../common/clock.js";
import { heldUntil } from "../common/delays.js";

export interface Lease {
  subscriptionId: number;
  key: string;
  token: string;
}

/** The last event of an acked prefix: its queue seq (the cursor) and its place in the log (for display). */
export interface AckThrough {
  tx: string;
  position: number;
  seq: number;
}

/**
 * Acks the prefix of a claimed batch through queue row `through.seq`, `count` events, in ONE
 * statement: only while the lease is ours and unexpired when the row is locked (fencing; a
 * stale ack changes nothing and returns no row). The key row's pending counter is the truth about remaining
 * work: an advance that commits while we ack bumps it under the same row lock, so a key is
 * never left idle with events queued. The batch is recorded in the activity table (the
 * dashboard's timeline); ackAndClaim leaves that to the drain loop (recordBatches).
 */
export function ackBatch(
  lease: Lease,
  { through, count, claimedAt }: { through: AckThrough; count: number; claimedAt: Date },
): SQL {
  return sql`
    WITH ${ackCtes(lease, through, count)},
    recorded AS (
      INSERT INTO ${activity} (subscription_id, key, started_at, events, outcome)
      SELECT subscription_id, key, ${claimedAt.toISOString()}::timestamptz, ${count}, 'acked' FROM acked
    ),
    counted AS (${countAcked(sql`acked`, sql`now()`, sql`${count}::int`)})
    SELECT count(*)::int AS acked, (SELECT pending FROM acked) AS pending FROM acked`;
}

/**
 * The ack of a transactional handler's batch: the last statement of the transaction that holds
 * the handler's writes (so durable: no asyncCommit), fenced like ackBatch. It records nothing:
 * the activity and throughput rows are shared counters (one throughput row per subscription
 * and 10 seconds), and a row written here stays locked through COMMIT and its WAL flush — every
 * other transactional ack of the subscription, and the drains' activity writes, would queue
 * behind it. The caller records the batch after COMMIT (recordBatches) with `at`: the database
 * clock when the key row was locked, i.e. when the handler was done (`now()` here would be the
 * transaction's BEGIN: a batch as long as its handler would show as ~0 ms).
 */
export function ackInTransaction(lease: Lease, { through, count }: { through: AckThrough; count: number }): SQL {
  return sql`
    WITH ${ackCtes(lease, through, count, { durable: true })}
    SELECT count(*)::int AS acked, (SELECT pending FROM acked) AS pending, (SELECT at FROM fenced) AS at FROM acked`;
}

/**
 * The CTEs `locked` and `fenced`: the lease's key row, locked, and kept only if the lease is
 * still ours and unexpired at the moment the lock was granted; `fenced.at` is that moment.
 * The lock comes first on purpose: an UPDATE evaluates its WHERE and SET before it waits for
 * a row that another session merely locked (no new row version, no re-check), so a fence or a
 * time computed there is as old as the statement (see clock.ts).
 */
export function fencedKey(lease: Lease): SQL {
  return sql`
    locked AS (
      SELECT subscription_id, key, lease_token, lease_until FROM ${keys}
      WHERE subscription_id = ${lease.subscriptionId} AND key = ${lease.key}
      FOR UPDATE
    ),
    fenced AS (
      SELECT subscription_id, key, ${lockedNow} AS at FROM locked
      WHERE lease_token = ${lease.token}::uuid AND lease_until > ${lockedNow}
    )`;
}

/**
 * The CTEs `removed` (the acked queue rows, when the lease held) and `acked` (the key row); see ackBatch.
 * `durable`: the ack of a transactional handler's batch, last statement of the transaction that
 * holds the handler's writes — those are the app's data, committed synchronously (no asyncCommit).
 */
export function ackCtes(lease: Lease, through: AckThrough, count: number, options: { durable?: boolean } = {}): SQL {
  // pending goes down by the queue rows this ack deleted, not by the batch's `count`: an erasure
  // may have removed some of the batch's events (and counted them) while it was in flight
  return sql`
    ${fencedKey(lease)},
    removed AS (
      DELETE FROM ${queue} q USING fenced f
      WHERE q.subscription_id = f.subscription_id AND q.key = f.key
        AND q.subscription_id = ${lease.subscriptionId} AND q.key = ${lease.key} AND q.seq <= ${through.seq}
      RETURNING q.seq
    ),
    acked AS (
      UPDATE ${keys} k SET
        pending = k.pending - (SELECT count(*) FROM removed),
        -- more queued: ready at once, or when its next event may be delivered (a delayed one)
        available_at = CASE WHEN k.pending - (SELECT count(*) FROM removed) > 0
          THEN greatest(f.at, ${heldUntil({ subscriptionId: sql`k.subscription_id`, key: sql`k.key`, after: sql`${through.seq}::bigint`, at: sql`f.at` })}) END,
        lease_token = NULL, lease_until = NULL, attempts = 0, last_error = NULL, failed_position = NULL,
        postponed = 0, postponed_since = NULL,
        last_seq = ${through.seq}, last_tx = ${through.tx}::xid8, last_position = ${through.position},
        acked = k.acked + ${count}, active_at = f.at
      FROM fenced f
      WHERE k.subscription_id = f.subscription_id AND k.key = f.key ${options.durable ? sql`` : sql`AND ${asyncCommit}`}
        AND k.subscription_id = ${lease.subscriptionId} AND k.key = ${lease.key}
      RETURNING k.subscription_id, k.key, k.pending, k.tenant
    ),
    acked_room AS (${roomFreed(sql`acked`)})`;
}
