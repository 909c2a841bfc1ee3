// The stage phase of a rewind (src/sql/operate/rewind.ts says how a rewind goes): the range's
// events, a chunk at a time in log order, with their keys into rewind_staged.
import { elapsedMs } from "../common/clock.js";
import { sql, type SQL } from "drizzle-orm";
import { events, rewindStaged, subscriptions } from "../../db/schema.js";
import { keyExpression, keyProblem, streamTaken } from "../advance/advanceSubscription.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { leaseEnd } from "./rewind.js";

export interface ChunkRow {
  /** Events read (of the range, or staged ones): fewer than the limit, and that phase is done. */
  scanned: number;
  /** 0: the rewind is not held by this token any more (taken over, or the subscription deleted). */
  held: number;
  /** How long the chunk ran on the server (ms): what sizes the next one. */
  elapsed_ms: number;
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
      (SELECT stale FROM stale) AS stale, ${elapsedMs} AS elapsed_ms`;
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
