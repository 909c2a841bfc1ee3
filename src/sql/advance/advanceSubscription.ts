import { sql, type SQL } from "drizzle-orm";
import { advanceKicks, events, keys, queue, subscriptions } from "../../db/schema.js";
import { tenantTurnsEarlier } from "../common/tenantTurns.js";
import { MAX_KEY_BYTES, keyReasons, tenantReasons } from "../../config.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { lockedNow } from "../common/clock.js";
import { cappedDeliverAt } from "../common/delays.js";

export interface AdvanceRow {
  scanned: number;
  enqueued: number;
  /** 0: another advancer was at work on this subscription, or it is being rewound; nothing was done */
  held: number;
  /** A rewind of the subscription is under way ('live') or its holder is gone ('abandoned'): no advance until it ends. */
  rewinding: "live" | "abandoned" | null;
}

/**
 * Whether the subscription row `s` is being rewound (src/rewind.ts): null, 'live', or
 * 'abandoned' (its lease is over: whoever finds it so takes it over and finishes it).
 */
export const rewindState = (s: SQL) =>
  sql`CASE WHEN ${s}.rewind_token IS NULL THEN NULL WHEN ${s}.rewind_until < ${lockedNow} THEN 'abandoned' ELSE 'live' END`;

// Advisory lock class of "advancing subscription <id>" (any fixed number; the id is the key).
export const ADVANCING = 736_420_198;

/**
 * The correlation key of event `e` as SQL text, from the LOCKED subscription row `sub` (its
 * current key, not the one listed before the lock: an update that committed while this
 * statement waited applies): "stream", or a JSON path "data.a.b" / "meta.x" (null when the
 * path is missing or null).
 */
export const keyExpression = valueAt(sql`sub.key`);

/**
 * The value named by `spec` ("stream", or a JSON path "data.a.b" / "meta.x") in event `e`, as
 * text: the key's and the tenant's one definition.
 */
export function valueAt(spec: SQL): SQL {
  return sql`CASE WHEN ${spec} = 'stream' THEN e.stream
  ELSE (CASE WHEN split_part(${spec}, '.', 1) = 'data' THEN e.data ELSE e.meta END)
       #>> (string_to_array(${spec}, '.'))[2:] END`;
}

/**
 * Whether `stream` is taken by a stream filter (`prefixes`: text[], null = every stream). `^@`
 * is starts_with(): an exact prefix. Never LIKE: `_` is a stream-name character and would
 * match any character there (`team_a-` would take `teamXa-1`).
 */
export const streamTaken = (stream: SQL, prefixes: SQL) => sql`(${prefixes} IS NULL OR ${stream} ^@ ANY(${prefixes}))`;

/** Why a key (or, with tenantReasons, a tenant) breaks the key rule (config.ts keyProblem), or null. */
export const keyProblem = (key: SQL, reasons: Record<keyof typeof keyReasons, string> = keyReasons) => sql`CASE
  WHEN ${key} = '' THEN ${reasons.empty}
  WHEN ${key} IN ('.', '..') THEN ${reasons.dots}
  WHEN octet_length(${key}) > ${MAX_KEY_BYTES} THEN ${reasons.long} END`;

/**
 * A tenanted subscription's tenant of an event, as stored with a key made for it: the value
 * `tenant` ("" when the event names none: the key rule keeps "" from any real tenant), or null
 * when the subscription has no tenant.
 */
export const storedTenant = (spec: SQL, tenant: SQL) =>
  sql`CASE WHEN ${spec} IS NOT NULL THEN coalesce(${tenant}, '') END`;

/**
 * Advances one subscription with a stream or JSON-path key, in ONE statement:
 *   lock the subscription row (a concurrent advancer waits, then sees the moved watermark:
 *   nothing is enqueued twice) and read its filters and key there → scan up to `limit` events
 *   past the watermark and below the xmin horizon in (tx, position) order → enqueue the
 *   matching ones (event name and stream prefix) with a valid key, each delay capped at the
 *   subscription's maxDelayMs, and bump their key rows → move the watermark to the last
 *   event scanned (matching or not). A key that breaks the key rule skips its event.
 * A key row that was idle becomes ready now; ready, leased, backoff and dead keys keep their
 * available_at (fairness: the oldest waiter stays first; a dead key stays dead).
 * A subscription whose key became a function (code changed) is left to the function path, and
 * one being rewound to its rewind (the row's lock and rewind_token: a rewind that began while
 * this statement waited for the row is seen there; `rewinding` says so).
 * Coalesced: one advancer per subscription at a time (a transaction-scoped advisory lock);
 * another one gets held = 0 and does nothing (a kick returns; an explicit advance waits with
 * waitForAdvancer and tries again, with a snapshot taken after that round) — advance() bumped the subscription's kick counter
 * before (syncSubscriptions), and the advancer at work re-checks it (kicksPending) and runs
 * again. Each round
 * records the counter as it read it (handled_kicks).
 */
export function advanceSubscription(subscriptionId: number, limit: number): SQL {
  return sql`
    WITH sub AS (
      SELECT id, watermark_tx, watermark_position, events, streams, key, tenant, max_delay_ms FROM ${subscriptions}
      WHERE id = ${subscriptionId} AND key <> 'function' AND rewind_token IS NULL AND ${asyncCommit}
        AND pg_try_advisory_xact_lock(${ADVANCING}::int4, ${subscriptionId}::int4)
        -- an erasure round committed after this statement's snapshot (its events still visible
        -- here): the locked row's epoch moved, so nothing is done, as if another advancer held it
        AND erase_epoch = (SELECT erase_epoch FROM ${subscriptions} WHERE id = ${subscriptionId})
      FOR UPDATE
    ),
    scan AS (
      SELECT e.tx, e.position,
        -- its delay as this subscription allows it (maxDelayMs: delays.ts)
        ${cappedDeliverAt(sql`e`, sql`sub.max_delay_ms`)} AS deliver_at,
        ('*' = ANY(sub.events) OR e.name = ANY(sub.events)) AND ${streamTaken(sql`e.stream`, sql`sub.streams`)} AS matches,
        ${keyExpression} AS key,
        CASE WHEN sub.tenant IS NOT NULL THEN ${valueAt(sql`sub.tenant`)} END AS tenant
      FROM ${events} e, sub
      -- the watermark as values (scalar subqueries), not as columns of the joined row: only
      -- then is it a bound of the index scan. As a join filter the scan walked the index from
      -- the start of the log: 370 ms per advance, even caught up, at 1M events
      WHERE (e.tx, e.position) > ((SELECT watermark_tx FROM sub), (SELECT watermark_position FROM sub))
        AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
      ORDER BY e.tx, e.position
      LIMIT ${limit}
    ),
    checked AS (
      SELECT tx, position, deliver_at, key, tenant,
        -- an event with no key is skipped as such, whatever its tenant
        coalesce(${keyProblem(sql`key`)}, CASE WHEN key IS NOT NULL THEN ${keyProblem(sql`tenant`, tenantReasons)} END) AS invalid
      FROM scan WHERE matches
    ),
    matched AS (
      SELECT tx, position, deliver_at, CASE WHEN invalid IS NULL THEN key END AS key, invalid,
        ${storedTenant(sql`(SELECT tenant FROM sub)`, sql`tenant`)} AS tenant
      FROM checked
    ),
    last AS (SELECT tx, position FROM scan ORDER BY tx DESC, position DESC LIMIT 1),
    ${enqueueAndMove(sql`(SELECT id FROM sub)`, { tx: sql`(SELECT tx FROM last)`, position: sql`(SELECT position FROM last)` }, sql`true`)}
    SELECT (SELECT count(*) FROM scan)::int AS scanned,
           (SELECT count(*) FROM matched WHERE key IS NOT NULL)::int AS enqueued,
           (SELECT count(*) FROM sub)::int AS held,
           (SELECT ${rewindState(sql`s`)} FROM ${subscriptions} s WHERE s.id = ${subscriptionId}) AS rewinding`;
}

/**
 * The write half shared by both advance paths, given `matched(tx, position, deliver_at, key,
 * invalid, tenant)` (key null: no key, or an invalid one, whose reason is `invalid`; tenant as
 * storedTenant gives it): move the watermark first
 * (only where `condition` holds: the function path's compare-and-set), then enqueue the keyed
 * rows and upsert their key rows only if it moved, and count the skipped events. The
 * watermark and the queue change in one statement: nothing is enqueued twice, nothing is
 * lost. Each queued event gets the next seqs of its key's counter, in log order (the upsert
 * bumps the counter, the queue rows are numbered from what it returns); a key row created here
 * numbers from the subscription's key_seq_floor as the watermark UPDATE returns it (the row's
 * latest version, under its lock: src/sql/common/keySeqFloor.ts). A working advance also
 * clears the subscription's last advance error.
 * Tenants (fairness): a key row made here takes the tenant of its first event here (a row made
 * without one — by a pause, a rewind, before the subscription had a tenant — takes it from its
 * next enqueue), and each tenant of the keys enqueued here gets its turn in the fair pick no
 * later than its keys' times (a tenant met for the first time gets its row: tenantTurns.ts). Events whose tenant differs from their key's are counted (tenant_mismatched).
 */
export function enqueueAndMove(subscriptionId: SQL, last: { tx: SQL; position: SQL }, condition: SQL): SQL {
  return sql`
    moved AS (
      UPDATE ${subscriptions} s SET
        handled_kicks = coalesce((SELECT kicked FROM ${advanceKicks} WHERE subscription_id = s.id), s.handled_kicks),
        watermark_tx = coalesce(${last.tx}, s.watermark_tx),
        watermark_position = coalesce(${last.position}, s.watermark_position),
        skipped = s.skipped + (SELECT count(*) FROM matched WHERE key IS NULL),
        skipped_invalid = s.skipped_invalid + (SELECT count(*) FROM matched WHERE invalid IS NOT NULL),
        last_skip = coalesce((SELECT jsonb_build_object('position', position, 'reason', invalid) FROM matched
                              WHERE invalid IS NOT NULL ORDER BY tx DESC, position DESC LIMIT 1), s.last_skip),
        tenant_mismatched = s.tenant_mismatched + ${tenantMismatches(subscriptionId)},
        advance_error = NULL, advance_error_at = NULL
      WHERE s.id = ${subscriptionId} AND ${condition}
      RETURNING s.id, s.key_seq_floor
    ),
    keyed AS (
      -- available_at of a key that gets its first work here: now, or when its first event
      -- here may be delivered (a delayed head holds the key: greatest ignores a null)
      INSERT INTO ${keys} AS k (subscription_id, key, pending, seq, available_at, tenant)
      SELECT moved.id, key, count(*), moved.key_seq_floor + count(*),
        greatest(now(), (array_agg(deliver_at ORDER BY tx, position))[1]),
        (array_agg(tenant ORDER BY tx, position))[1]
      FROM matched, moved WHERE key IS NOT NULL
      GROUP BY moved.id, moved.key_seq_floor, key
      ORDER BY key -- one lock order for every writer of key rows: no deadlocks between advancers
      ON CONFLICT (subscription_id, key) DO UPDATE SET
        pending = k.pending + excluded.pending,
        seq = k.seq + excluded.pending,
        available_at = CASE WHEN k.available_at IS NULL AND k.dead_at IS NULL THEN excluded.available_at
          ELSE k.available_at END,
        active_at = now(),
        tenant = coalesce(k.tenant, excluded.tenant)
      RETURNING k.subscription_id, k.key, k.seq, k.tenant, k.available_at
    ),
    -- the turns of their tenants in the fair pick, no later than their keys' times
    tenant_turns AS (${tenantTurnsEarlier(sql`keyed`)}),
    -- each key's counter as the upsert left it (the latest row version, under its lock), in
    -- one jsonb object computed once: a join of two CTEs is planned on guessed row counts
    -- (a guess of 1 makes it a nested loop)
    counters AS MATERIALIZED (SELECT jsonb_object_agg(key, seq) AS seqs FROM keyed),
    enqueued AS (
      -- seqs in log order: the last of the key's events here gets the counter itself
      INSERT INTO ${queue} (subscription_id, key, seq, tx, position, deliver_at)
      SELECT (SELECT id FROM moved), m.key,
        m.last - count(*) OVER (PARTITION BY m.key) + row_number() OVER (PARTITION BY m.key ORDER BY m.tx, m.position),
        m.tx, m.position, m.deliver_at
      FROM (SELECT m.key, m.tx, m.position, m.deliver_at, (c.seqs ->> m.key)::bigint AS last
            FROM matched m, counters c WHERE m.key IS NOT NULL AND c.seqs IS NOT NULL OFFSET 0) m
      ORDER BY m.key, m.tx, m.position
    )`;
}

/**
 * How many of `matched`'s keyed events name another tenant than their key's: the key row's, or
 * for a key made here its first event's. Nothing is read without a tenant (the CASE runs the
 * count only when some event has one).
 */
function tenantMismatches(subscriptionId: SQL): SQL {
  return sql`CASE WHEN (SELECT bool_or(tenant IS NOT NULL) FROM matched) THEN (
      SELECT count(*) FROM matched m
      JOIN (SELECT DISTINCT ON (key) key, tenant FROM matched WHERE key IS NOT NULL ORDER BY key, tx, position) f
        ON f.key = m.key
      -- each key row by its primary key (a join was planned as a read of every key row of the subscription)
      WHERE m.tenant IS DISTINCT FROM coalesce(
        (SELECT k.tenant FROM ${keys} k WHERE k.subscription_id = ${subscriptionId} AND k.key = m.key), f.tenant)
      ) ELSE 0 END`;
}

/** Records why the advance of a subscription failed (stats and the dashboard show it). */
export function recordAdvanceError(subscriptionId: number, error: string): SQL {
  return sql`UPDATE ${subscriptions} SET advance_error = ${error}, advance_error_at = now() WHERE id = ${subscriptionId}`;
}

/** Of `ids`, the subscriptions kicked since their last advance round read the counter. */
export function kicksPending(ids: number[]): SQL {
  return sql`
    SELECT s.id FROM ${subscriptions} s JOIN ${advanceKicks} k ON k.subscription_id = s.id
    WHERE s.id = ANY(${sql.param(ids)}::int[]) AND k.kicked > s.handled_kicks`;
}

/**
 * Waits until the advancer at work on a subscription ends its round (the advisory lock is
 * taken and released by this statement). Not inside the round's own statement: its snapshot,
 * taken before the wait, would still see that round's transaction open and hold the xmin
 * horizon below what it committed.
 */
export function waitForAdvancer(subscriptionId: number): SQL {
  return sql`SELECT pg_advisory_xact_lock(${ADVANCING}::int4, ${subscriptionId}::int4)::text AS waited`;
}
