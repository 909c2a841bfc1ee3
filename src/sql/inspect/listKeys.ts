import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";
import type { KeyState, KeyStatus } from "../../types.js";
import { MAX_POSTPONEMENTS } from "../../config.js";
import { leasedKeysUpTo } from "../consume/leasedKeys.js";

/**
 * The derived status of key row `k` (see the keys table in db/schema.ts). One status per key:
 * dead first (it runs again only when released), then paused (a batch in flight finishes).
 */
export const keyStatus = sql`CASE
  WHEN k.dead_at IS NOT NULL THEN 'dead'
  WHEN k.paused_at IS NOT NULL THEN 'paused'
  WHEN k.lease_until > now() THEN 'leased'
  WHEN k.available_at <= now() THEN 'ready'
  WHEN k.available_at > now() THEN 'backoff'
  ELSE 'idle' END`;

/** Each status as a condition on key row `k`, agreeing with keyStatus (the statuses partition the keys). */
export const statusFilter: Record<KeyStatus, SQL> = {
  dead: sql`k.dead_at IS NOT NULL`,
  paused: sql`k.paused_at IS NOT NULL AND k.dead_at IS NULL`,
  leased: sql`k.lease_until > now() AND k.paused_at IS NULL`,
  ready: sql`k.available_at <= now() AND k.paused_at IS NULL`,
  backoff: sql`k.available_at > now() AND (k.lease_until IS NULL OR k.lease_until <= now()) AND k.paused_at IS NULL`,
  idle: sql`k.available_at IS NULL AND k.dead_at IS NULL AND k.paused_at IS NULL`,
};

/**
 * A status as the keys page filters by it. Ready and backoff keys are in the partial ready
 * index, in waiting order: a page of them in key order read from there reads every such key and
 * sorts it (what the planner chose with no statistics: 50,000 ready keys sorted for 51). The page
 * walks the primary key in key order instead and stops after `limit` of them, so their filter
 * compares one expression — available_at of an unpaused key, null never ready nor in backoff:
 * the same rows — that proves nothing about the index's `available_at IS NOT NULL AND paused_at
 * IS NULL`, with a selectivity the planner guesses (1/3) rather than reads (`paused_at IS NULL`
 * alone, with no statistics, is guessed at 0.5 %: the walk looked 200 times longer than it is).
 * The walk then stays the cheaper plan before and after ANALYZE. Leased keys have no index of their own to be sorted from; dead and paused keys stay
 * few, and their own small indexes serve them: those pages are ordered by an expression of the key
 * (pagedByIndex), which the primary key cannot give in order, so the planner reads them all from
 * their partial index and sorts them — never a walk of the primary key filtered by dead_at,
 * which statistics from a smaller table (10% of 1,000 keys dead, then a million more keys with
 * 100 dead) made it choose: 260 ms for a page of 50 (bench/scaleOps.ts, test/stats.int.test.ts).
 */
// null (no work, or dead) stands as a time on the side that never matches
const available = (never: "infinity" | "-infinity") =>
  sql`(CASE WHEN k.paused_at IS NULL THEN coalesce(k.available_at, ${sql.raw(`'${never}'`)}::timestamptz) END)`;
const pageFilter = (status: KeyStatus): SQL =>
  status === "ready"
    ? sql`${available("infinity")} <= now()`
    : status === "backoff"
      ? sql`(CASE WHEN k.lease_until IS NULL OR k.lease_until <= now() THEN ${available("-infinity")} END) > now()`
      : statusFilter[status];
const pagedByIndex = (status: KeyStatus | undefined) => status === "dead" || status === "paused";

/**
 * Keys of a subscription in key order, keyset-paged by `after` (stays fast with millions of
 * keys), or one key (`only`). The subscription id is a scalar subquery, not a join: the
 * planner then walks the primary key (subscription_id, key) in order and stops after `limit`
 * rows; a join made it sort all of a million keys (~1 s). What the reason text needs comes
 * along (the subscription's max attempts and pause, the lease's holder).
 */
export function listKeys(
  subscription: string,
  options: { status?: KeyStatus; after?: string; limit: number; only?: string },
): SQL {
  return sql`
    SELECT k.key, ${keyStatus} AS status, k.pending, k.attempts, k.available_at, k.last_error, k.last_position,
      k.failed_position, k.dead_at, k.paused_at, k.lease_until, k.lease_holder, k.leased_at, k.seq, k.postponed, k.tenant, k.rate_waits,
      (k.last_seq < k.replay_seq) AS replaying, now() AS now,
      (SELECT max_attempts FROM ${subscriptions} WHERE name = ${subscription}) AS max_attempts,
      (SELECT paused FROM ${subscriptions} WHERE name = ${subscription}) AS subscription_paused,
      (SELECT max_leased_keys FROM ${subscriptions} WHERE name = ${subscription}) AS max_leased_keys,
      (SELECT rate_limit FROM ${subscriptions} WHERE name = ${subscription}) AS rate_limit
    FROM ${keys} k
    WHERE k.subscription_id = (SELECT id FROM ${subscriptions} WHERE name = ${subscription})
      ${options.status ? sql`AND ${pageFilter(options.status)}` : sql``}
      ${options.after !== undefined ? sql`AND k.key > ${options.after}` : sql``}
      ${options.only !== undefined ? sql`AND k.key = ${options.only}` : sql``}
    -- (the same order: appending an empty string only hides it from the primary key)
    ORDER BY ${pagedByIndex(options.status) ? sql`k.key || ''` : sql`k.key`}
    LIMIT ${options.limit}`;
}

// node-postgres returns bigint as string: positions and counters become numbers here (safe up to 2^53, docs/http-api.md)
export interface KeyRow {
  key: string;
  status: KeyStatus;
  pending: number;
  attempts: number;
  available_at: Date | null;
  last_error: string | null;
  last_position: string | null;
  failed_position: string | null;
  dead_at: Date | null;
  paused_at: Date | null;
  lease_until: Date | null;
  lease_holder: string | null;
  leased_at: Date | null;
  seq: string;
  postponed: number;
  tenant: string | null;
  rate_waits: boolean;
  rate_limit: { events: number; perMs: number; by: string; burst?: number } | null;
  replaying: boolean;
  max_attempts: number;
  subscription_paused: boolean;
  max_leased_keys: number | null;
  now: Date;
}

const iso = (at: Date | string | null) => (at === null ? null : new Date(at).toISOString());

/**
 * A capped subscription's keys in flight, up to its maxLeasedKeys (no row without a cap): read
 * apart from the page, and only when the page has a ready key to explain (keysInFlight).
 */
export function keysInFlight(subscription: string): SQL {
  return sql`
    SELECT ${leasedKeysUpTo(sql`s.id`, sql`s.max_leased_keys`)} AS in_flight
    FROM ${subscriptions} s WHERE s.name = ${subscription} AND s.max_leased_keys IS NOT NULL`;
}

/** `inFlight`: keysInFlight's count, when read (a ready key of a capped subscription may wait for a slot). */
export function toKeyState(row: KeyRow, inFlight?: number): KeyState {
  const leased =
    row.status === "leased" ||
    (row.status === "paused" && row.lease_until !== null && new Date(row.lease_until) > new Date(row.now));
  return {
    key: row.key,
    status: row.status,
    pending: row.pending,
    attempts: row.attempts,
    availableAt: iso(row.available_at),
    lastError: row.last_error,
    lastPosition: row.last_position === null ? null : Number(row.last_position),
    seq: Number(row.seq),
    ...(row.tenant !== null ? { tenant: row.tenant } : {}),
    ...(row.paused_at !== null ? { pausedSince: new Date(row.paused_at).toISOString() } : {}),
    ...(leased ? { holder: row.lease_holder, leasedSince: iso(row.leased_at), leasedUntil: iso(row.lease_until) } : {}),
    reason: reasonOf(row, leased, inFlight),
  };
}

/** Why a key is not running (or what it is doing), in words: the keys API and the dashboard show it. */
function reasonOf(row: KeyRow, leased: boolean, inFlight: number | undefined): string {
  const error = row.last_error === null ? "" : `: ${row.last_error}`;
  const lease = `leased by ${row.lease_holder ?? "an unknown holder"} since ${iso(row.leased_at) ?? "?"} (until ${iso(row.lease_until)})`;
  switch (row.status) {
    case "dead":
      return `dead at position ${row.failed_position ?? "?"} since ${iso(row.dead_at)} after ${row.attempts} attempts${error}; retry or skip it (dead letters)${row.paused_at !== null ? ", and resume it (paused)" : ""}`;
    case "paused":
      return `paused since ${iso(row.paused_at)}${leased ? `; the batch in flight finishes first (${lease})` : ""}${row.pending > 0 ? `; ${row.pending} events wait` : ""}`;
    case "leased":
      return `${lease}${row.replaying ? ", replaying" : ""}`;
    case "backoff":
      // no failed attempt: the key waits for a "come back later" answer or a delayed event
      if (row.postponed > 0)
        return `postponed until ${iso(row.available_at)}: the handler asked to come back later (${row.postponed} of ${MAX_POSTPONEMENTS} postponements${error})`;
      if (row.rate_waits && row.rate_limit !== null)
        return `waiting until ${iso(row.available_at)} for its rate limit: ${row.rate_limit.events} events per ${row.rate_limit.perMs} ms by ${row.rate_limit.by}${(row.rate_limit.burst ?? 1) > 1 ? `, burst ${row.rate_limit.burst}` : ""}`;
      if (row.attempts === 0) return `waiting until ${iso(row.available_at)} for a delayed event (deliverAt)`;
      return `in backoff until ${iso(row.available_at)} (attempt ${row.attempts} of ${row.max_attempts} failed${error})`;
    case "ready":
      if (row.subscription_paused) return "the subscription is paused";
      if (row.max_leased_keys !== null && inFlight !== undefined && inFlight >= row.max_leased_keys)
        return `ready since ${iso(row.available_at)}, waiting for a slot: ${inFlight} keys in flight, the subscription's maxLeasedKeys`;
      return `ready since ${iso(row.available_at)}, waiting for a consumer${row.tenant !== null ? ` (tenant ${JSON.stringify(row.tenant)}: its turn among the tenants with ready keys)` : ""}${row.replaying ? " (replaying: after the live keys)" : ""}${row.attempts > 0 ? `; attempt ${row.attempts + 1} of ${row.max_attempts} next${error}` : ""}`;
    default:
      return "idle: nothing queued";
  }
}
