import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, subscriptions } from "../db/schema.js";
import type { KeyStrategy } from "../config.js";
import { asyncCommit } from "./asyncCommit.js";

export interface AdvanceRow {
  scanned: number;
  enqueued: number;
}

/** The correlation key of event `e` as SQL text; null when a JSON path is missing or null. */
function keyExpression(strategy: Exclude<KeyStrategy, { kind: "function" }>): SQL {
  if (strategy.kind === "stream") return sql`e.stream`;
  const column = strategy.column === "data" ? sql`e.data` : sql`e.meta`;
  return sql`${column} #>> ${`{${strategy.path.join(",")}}`}::text[]`;
}

function nameFilter(names: string[]): SQL {
  return names.includes("*") ? sql`true` : sql`name = ANY(${sql.param(names)}::text[])`;
}

/**
 * Advances one subscription with a stream or JSON-path key, in ONE statement:
 *   lock the subscription row (a concurrent advancer waits, then sees the moved watermark:
 *   nothing is enqueued twice) → scan up to `limit` events past the watermark and below the
 *   xmin horizon in (tx, position) order → enqueue the matching ones and bump their key rows
 *   → move the watermark to the last event scanned (matching or not).
 * A key row that was idle becomes ready now; ready, leased, backoff and dead keys keep their
 * available_at (fairness: the oldest waiter stays first; a dead key stays dead).
 */
export function advanceSubscription(
  subscriptionId: number,
  options: { events: string[]; key: Exclude<KeyStrategy, { kind: "function" }>; limit: number },
): SQL {
  return sql`
    WITH sub AS (
      SELECT id, watermark_tx, watermark_position FROM ${subscriptions} WHERE id = ${subscriptionId} AND ${asyncCommit}
      FOR UPDATE
    ),
    scan AS (
      SELECT e.tx, e.position, e.name, ${keyExpression(options.key)} AS key
      FROM ${events} e, sub
      WHERE (e.tx, e.position) > (sub.watermark_tx, sub.watermark_position)
        AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
      ORDER BY e.tx, e.position
      LIMIT ${options.limit}
    ),
    matched AS (SELECT tx, position, key FROM scan WHERE ${nameFilter(options.events)}),
    last AS (SELECT tx, position FROM scan ORDER BY tx DESC, position DESC LIMIT 1),
    ${enqueueAndMove(sql`(SELECT id FROM sub)`, { tx: sql`(SELECT tx FROM last)`, position: sql`(SELECT position FROM last)` }, sql`true`)}
    SELECT (SELECT count(*) FROM scan)::int AS scanned,
           (SELECT count(*) FROM matched WHERE key IS NOT NULL)::int AS enqueued`;
}

/**
 * The write half shared by both advance paths, given `matched(tx, position, key)`: move the
 * watermark first (only where `condition` holds: the function path's compare-and-set), then
 * enqueue the keyed rows and upsert their key rows only if it moved, and count the events
 * skipped for a missing key. The watermark and the queue change in one statement: nothing is
 * enqueued twice, nothing is lost.
 */
export function enqueueAndMove(subscriptionId: SQL, last: { tx: SQL; position: SQL }, condition: SQL): SQL {
  return sql`
    moved AS (
      UPDATE ${subscriptions} s SET watermark_tx = ${last.tx}, watermark_position = ${last.position},
        skipped = s.skipped + (SELECT count(*) FROM matched WHERE key IS NULL)
      WHERE s.id = ${subscriptionId} AND ${last.position} IS NOT NULL AND ${condition}
      RETURNING s.id
    ),
    enqueued AS (
      INSERT INTO ${queue} (subscription_id, key, tx, position)
      SELECT moved.id, key, tx, position FROM matched, moved WHERE key IS NOT NULL
    ),
    keyed AS (
      INSERT INTO ${keys} AS k (subscription_id, key, pending, available_at)
      SELECT moved.id, key, count(*), now() FROM matched, moved WHERE key IS NOT NULL
      GROUP BY moved.id, key
      ORDER BY key -- one lock order for every writer of key rows: no deadlocks between advancers
      ON CONFLICT (subscription_id, key) DO UPDATE SET
        pending = k.pending + excluded.pending,
        available_at = CASE WHEN k.available_at IS NULL AND k.dead_at IS NULL THEN now() ELSE k.available_at END
    )`;
}
