import { sql, type SQL } from "drizzle-orm";
import { events, idempotencyKeys, keys, queue, streams, subscriptions } from "../../db/schema.js";
import { valueAt } from "../advance/advanceSubscription.js";

// What a move of a slot (src/cells/move.ts) reads from the cell it leaves and writes to the cell
// it goes to. The slot's streams are named by the caller (a tenant is a function of the stream
// name, computed in JS): every statement here takes them as a text[].

// one text[] parameter (sql.param: drizzle spreads a bare JS array into one parameter per item),
// whose elements the planner sees: it estimates the streams' rows, not a default
const streamList = (names: string[]) => sql`${sql.param(names)}::text[]`;

/** A page of the cell's stream names, in name order after `after`. */
export function streamNames(after: string, limit: number): SQL {
  return sql`SELECT stream FROM ${streams} WHERE stream > ${after} ORDER BY stream LIMIT ${limit}`;
}

export interface BacklogRow {
  subscription: string;
  queued: number;
  /** The slot's events past the subscription's watermark: not advanced yet (by whoever runs its code). */
  unadvanced: number;
  dead_keys: number;
  paused_keys: number;
  paused: boolean;
  rewinding: boolean;
  next_due: string | null;
}

/**
 * What still holds the slot's events in this cell, per subscription: events not yet advanced
 * (a code subscription is advanced only where its code runs — not by a mover without it),
 * queued rows not yet acked (their keys dead or paused among them), and a rewind under way (it
 * may queue them again). Empty when the slot's events are all delivered here.
 */
export function slotBacklog(names: string[]): SQL {
  return sql`SELECT s.name AS subscription, count(k.key)::int AS queued,
      (SELECT count(*) FROM ${events} e WHERE e.stream = ANY(${streamList(names)})
        AND (e.tx, e.position) > (s.watermark_tx, s.watermark_position))::int AS unadvanced,
      count(DISTINCT q.key) FILTER (WHERE k.dead_at IS NOT NULL)::int AS dead_keys,
      count(DISTINCT q.key) FILTER (WHERE k.paused_at IS NOT NULL)::int AS paused_keys,
      s.paused, s.rewind_token IS NOT NULL AS rewinding, min(q.deliver_at)::text AS next_due
    FROM ${subscriptions} s
    LEFT JOIN ${queue} q ON q.subscription_id = s.id
      AND q.position IN (SELECT position FROM ${events} WHERE stream = ANY(${streamList(names)}))
    LEFT JOIN ${keys} k ON k.subscription_id = q.subscription_id AND k.key = q.key AND q.seq > k.last_seq
    GROUP BY s.id
    HAVING count(k.key) > 0 OR s.rewind_token IS NOT NULL OR EXISTS (
      SELECT FROM ${events} e WHERE e.stream = ANY(${streamList(names)})
        AND (e.tx, e.position) > (s.watermark_tx, s.watermark_position))
    ORDER BY s.name`;
}

export interface CopyRow {
  tx: string;
  position: number;
  stream: string;
  version: number;
  name: string;
  data: unknown;
  meta: unknown;
  created_at: string;
  deliver_at: string | null;
  trace_context: string | null;
}

/** The slot's next events after (tx, position), in log order. */
export function eventsToCopy(names: string[], after: { tx: string; position: number } | null, limit: number): SQL {
  const cursor = after ? sql`AND (tx, position) > (${after.tx}::xid8, ${after.position}::bigint)` : sql``;
  return sql`SELECT tx::text AS tx, position, stream, version, name, data, meta, created_at::text AS created_at,
      deliver_at::text AS deliver_at, trace_context
    FROM ${events} WHERE stream = ANY(${streamList(names)}) ${cursor}
    ORDER BY tx, position LIMIT ${limit}`;
}

/**
 * Writes copies in the target cell, in the order given, as history: their transaction is 1 —
 * below every watermark a subscription can have once it read anything (raiseWatermarks), so no
 * subscription here delivers them again, while one made from the beginning later reads them
 * first, in the order they had. Their positions are new. A copy already there (a chunk sent
 * again after a failure) is skipped.
 */
export function insertCopies(rows: CopyRow[]): SQL {
  return sql`INSERT INTO ${events} (tx, stream, version, name, data, meta, created_at, deliver_at, trace_context)
    SELECT '1'::xid8, r->>'stream', (r->>'version')::int, r->>'name', r->'data', r->'meta',
      (r->>'created_at')::timestamptz, (r->>'deliver_at')::timestamptz, r->>'trace_context'
    FROM jsonb_array_elements(${JSON.stringify(rows)}::jsonb) WITH ORDINALITY AS t(r, ord)
    ORDER BY t.ord
    ON CONFLICT (stream, version) DO NOTHING`;
}

/**
 * Every subscription of the target cell that has read nothing yet (the beginning: '0', 0) starts
 * after the copies: its namesake in the cell the slot leaves delivered them (the move drained
 * it first). Events appended in this cell have transactions above 2, so none is skipped.
 */
export const raiseWatermarks = () => sql`UPDATE ${subscriptions}
  SET watermark_tx = '2'::xid8, watermark_position = 0 WHERE watermark_tx < '2'::xid8`;

export interface StreamCopyRow {
  stream: string;
  version: number;
  erased_through: number | null;
  erased_events: number;
  erased_at: string | null;
}

export function streamsToCopy(names: string[]): SQL {
  return sql`SELECT stream, version, erased_through, erased_events, erased_at::text AS erased_at
    FROM ${streams} WHERE stream = ANY(${streamList(names)})`;
}

/** The slot's streams with their versions and tombstones; last_tx is the old cell's and means nothing here. */
export function insertStreams(rows: StreamCopyRow[]): SQL {
  return sql`INSERT INTO ${streams} AS s (stream, version, last_tx, erased_through, erased_events, erased_at)
    SELECT stream, version, NULL, erased_through, erased_events, erased_at
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      AS t(stream text, version int, erased_through int, erased_events bigint, erased_at timestamptz)
    ORDER BY stream
    ON CONFLICT (stream) DO UPDATE SET version = excluded.version, last_tx = NULL,
      erased_through = excluded.erased_through, erased_events = excluded.erased_events, erased_at = excluded.erased_at`;
}

export interface IdempotencyCopyRow {
  scope: string;
  stream: string;
  key: string;
  fingerprint: string;
  version: number;
  count: number;
  created_at: string;
}

export function idempotencyToCopy(names: string[]): SQL {
  return sql`SELECT scope, stream, key, fingerprint, version, jsonb_array_length(positions) AS count,
      created_at::text AS created_at
    FROM ${idempotencyKeys} WHERE stream = ANY(${streamList(names)})`;
}

/** The keys' answers, with the positions their events have here (found by stream and version). */
export function insertIdempotency(rows: IdempotencyCopyRow[]): SQL {
  return sql`INSERT INTO ${idempotencyKeys} AS k (scope, stream, key, fingerprint, version, positions, created_at)
    SELECT t.scope, t.stream, t.key, t.fingerprint, t.version,
      coalesce((SELECT jsonb_agg(e.position ORDER BY e.version) FROM ${events} e
        WHERE e.stream = t.stream AND e.version > t.version - t.count AND e.version <= t.version), '[]'::jsonb),
      t.created_at
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      AS t(scope text, stream text, key text, fingerprint text, version int, count int, created_at timestamptz)
    ORDER BY t.stream, t.scope, t.key
    ON CONFLICT (stream, scope, key) DO NOTHING`;
}

export interface SeqRow {
  subscription: string;
  floor: number;
  keys: { key: string; seq: number }[];
}

/**
 * Per subscription: the seq floor a key must start above in the target cell (every seq this
 * cell gave, its floor included), and the slot's keys with their seqs — for key rows the target
 * cell already has (a tenant that comes back). A key made by a function is not listed (its keys
 * cannot be computed here): the floor covers those that are new there.
 */
export function seqsToCarry(names: string[]): SQL {
  return sql`SELECT s.name AS subscription,
      greatest(s.key_seq_floor, (SELECT coalesce(max(seq), 0) FROM ${keys} WHERE subscription_id = s.id)) AS floor,
      coalesce((SELECT jsonb_agg(jsonb_build_object('key', k.key, 'seq', k.seq) ORDER BY k.key) FROM ${keys} k
        WHERE k.subscription_id = s.id AND s.key <> 'function' AND k.key IN (
          SELECT ${valueAt(sql`s.key`)} FROM ${events} e WHERE e.stream = ANY(${streamList(names)}))), '[]'::jsonb) AS keys
    FROM ${subscriptions} s`;
}

/**
 * In the target cell: a key made from here on starts above the floor, and a key row already here
 * goes on above its seq in the old cell (an idle one's ack cursor with it): receivers that
 * dedupe by "seq ≤ last seen" stay right. Seqs may skip (a gap), never repeat.
 */
export function carrySeqs(rows: SeqRow[]): SQL {
  return sql`WITH input AS (
      SELECT s.id, t.floor, t.keys FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS t(subscription text, floor bigint, keys jsonb)
      JOIN ${subscriptions} s ON s.name = t.subscription
    ),
    floors AS (
      UPDATE ${subscriptions} s SET key_seq_floor = greatest(s.key_seq_floor, i.floor) FROM input i WHERE s.id = i.id
      RETURNING 1
    )
    UPDATE ${keys} k SET seq = x.seq, last_seq = CASE WHEN k.last_seq = k.seq THEN x.seq ELSE k.last_seq END
    FROM (SELECT i.id, c.key, c.seq FROM input i, jsonb_to_recordset(i.keys) AS c(key text, seq bigint)) x
    WHERE k.subscription_id = x.id AND k.key = x.key AND k.seq < x.seq`;
}

/** Cleaning the cell a slot left: up to `limit` of its events. → how many. */
export function deleteMovedEvents(names: string[], limit: number): SQL {
  return sql`WITH gone AS (
      DELETE FROM ${events} WHERE position IN (
        SELECT position FROM ${events} WHERE stream = ANY(${streamList(names)}) ORDER BY position LIMIT ${limit})
      RETURNING 1
    ) SELECT count(*)::int AS deleted FROM gone`;
}

/** …then its streams and idempotency keys (after the last events). */
export function deleteMovedStreams(names: string[]): SQL {
  return sql`WITH keys_gone AS (DELETE FROM ${idempotencyKeys} WHERE stream = ANY(${streamList(names)}))
    DELETE FROM ${streams} WHERE stream = ANY(${streamList(names)})`;
}

/** A rolled-back move: the copies written in the target cell go (nothing there read them). */
export function deleteCopies(names: string[], limit: number): SQL {
  return sql`WITH gone AS (
      DELETE FROM ${events} WHERE position IN (
        SELECT position FROM ${events} WHERE stream = ANY(${streamList(names)}) AND tx = '1'::xid8
        ORDER BY position LIMIT ${limit})
      RETURNING 1
    ) SELECT count(*)::int AS deleted FROM gone`;
}
