import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, subscriptions } from "../../db/schema.js";
import { present } from "../../errors.js";
import type { SubscriptionStats } from "../../types.js";
import { statusFilter } from "./listKeys.js";
import { unadvancedUpTo } from "../common/unadvanced.js";

/**
 * Settings and live figures of every subscription (or one). Key counts read only keys with
 * work or paused (the partial indexes), so they cost what is pending, not how many keys ever
 * existed; they count each key once, by its status (listKeys.ts).
 * lag = events in the log past the watermark (matching or not), counted up to EXACT_COUNT_CAP
 * (lagOf: beyond it, estimated); oldest pending age = age of the lowest queued position.
 */
export function subscriptionStats(name?: string): SQL {
  return sql`
    SELECT s.id, s.name, s.kind, s.events, s.streams, s.key, s."from", s.batch_size, s.max_attempts, s.lease_ms,
      s.backoff_initial_ms, s.backoff_max_ms, s.backoff_factor, s.max_leased_keys, s.tenant, s.tenant_weights, s.tenant_mismatched, s.max_leased_keys_per_tenant, s.rate_limit, s.max_delay_ms, s.deliver, s.paused, s.watermark_position, s.skipped,
      s.skipped_invalid, s.last_skip, s.skipped_dead, s.advance_error, s.advance_error_at, s.incarnation,
      s.start_horizon,
      ${unadvancedUpTo(EXACT_COUNT_CAP + 1)}::bigint AS lag,
      (SELECT max(e.position) FROM ${events} e) AS head,
      c.pending, c.ready, c.leased, c.backoff, c.waiting, c.waiting_until, c.delayed_over_hour, c.dead, c.paused_keys,
      (SELECT (extract(epoch FROM now() - e.created_at) * 1000)::bigint FROM ${events} e
        WHERE e.position = (
          -- the first queue row at or after (this subscription, 0) in (subscription, position)
          -- order, if it is this subscription's: one probe of queue_subscription_position_idx
          -- (position > 0, every row, states its predicate). Written as min(position) of the
          -- subscription's rows, the planner also had erasure's queue_position_idx: a walk in
          -- position order that, for a subscription with nothing queued, read every row queued
          -- for the others (chosen after ANALYZE: the statistics saw one subscription)
          SELECT CASE WHEN q.subscription_id = s.id THEN q.position END FROM ${queue} q
          WHERE (q.subscription_id, q.position) >= (s.id, 0) AND q.position > 0
          ORDER BY q.subscription_id, q.position LIMIT 1)) AS oldest_pending_age_ms
    FROM ${subscriptions} s
    CROSS JOIN LATERAL (
      SELECT coalesce(sum(k.pending), 0)::bigint AS pending,
        count(*) FILTER (WHERE ${statusFilter.ready})::int AS ready,
        count(*) FILTER (WHERE ${statusFilter.leased})::int AS leased,
        count(*) FILTER (WHERE ${statusFilter.backoff})::int AS backoff,
        -- of those, the ones with no failed attempt: a delayed event or a postponement
        count(*) FILTER (WHERE ${statusFilter.backoff} AND k.attempts = 0)::int AS waiting,
        min(k.available_at) FILTER (WHERE ${statusFilter.backoff} AND k.attempts = 0) AS waiting_until,
        count(*) FILTER (WHERE ${delayedOverHour})::int AS delayed_over_hour,
        count(*) FILTER (WHERE ${statusFilter.dead})::int AS dead,
        count(*) FILTER (WHERE ${statusFilter.paused})::int AS paused_keys
      FROM ${keys} k
      -- the three partial indexes (ready, dead, paused): idle keys are never read
      WHERE k.subscription_id = s.id
        AND ((k.available_at IS NOT NULL AND k.paused_at IS NULL) OR k.dead_at IS NOT NULL OR k.paused_at IS NOT NULL)
    ) c
    ${name === undefined ? sql`` : sql`WHERE s.name = ${name}`}
    ORDER BY s.name`;
}

/**
 * A key row `k` held by a delayed event more than an hour ahead (stats' delayedOverHour, the
 * doctor's delayed_keys): waiting with no failed attempt, not for a postponement (at most an
 * hour anyway: MAX_RETRY_AFTER_MS) nor a rate limit's room — a delayed event, the only other
 * wait of a key without a failed attempt.
 */
export const delayedOverHour = sql`${statusFilter.backoff} AND k.attempts = 0 AND k.postponed = 0 AND NOT k.rate_waits
  AND k.available_at > now() + interval '1 hour'`;

/**
 * Counts in stats are exact up to this many rows; past it they are estimated (lagOf, logCount).
 * A count reads every row it counts: the whole lag of a subscription replaying a 50M-event log,
 * or the whole log, on every stats call (1.6 s at 10M events; bench/scaleOps.ts), where an
 * estimate costs one probe. Under the cap — tests, a caught-up subscription — nothing changes.
 */
export const EXACT_COUNT_CAP = 10_000;

/**
 * A subscription's lag: the count when under the cap; past it, the positions between its
 * watermark and the head of the log (an event a rollback or an erasure left out still counts).
 */
export function lagOf(row: { lag: string; head: string | null; watermark_position: string }): {
  lag: number;
  lagEstimated: boolean;
} {
  const counted = Number(row.lag);
  if (counted <= EXACT_COUNT_CAP) return { lag: counted, lagEstimated: false };
  const span = Number(row.head ?? 0) - Number(row.watermark_position);
  return { lag: Math.max(counted, span), lagEstimated: true };
}

// node-postgres returns bigint as string: positions and counters become numbers here (safe up to 2^53, docs/http-api.md)
export interface StatsRow {
  name: string;
  kind: "code" | "push";
  events: string[];
  streams: string[] | null;
  key: string;
  from: "beginning" | "now";
  batch_size: number;
  max_attempts: number;
  lease_ms: number;
  backoff_initial_ms: number;
  backoff_max_ms: number;
  backoff_factor: number;
  max_leased_keys: number | null;
  tenant: string | null;
  tenant_weights: Record<string, number> | null;
  tenant_mismatched: string;
  max_leased_keys_per_tenant: number | null;
  // a limit the previous release stored after migration 0030 has no burst: its 1
  rate_limit: (Omit<NonNullable<SubscriptionStats["rateLimit"]>, "burst"> & { burst?: number }) | null;
  max_delay_ms: string;
  deliver: { url: string; timeoutMs: number } | null;
  paused: boolean;
  watermark_position: string;
  skipped: string;
  skipped_invalid: string;
  last_skip: { position: number; reason: string } | null;
  skipped_dead: string;
  advance_error: string | null;
  advance_error_at: Date | null;
  /** Counted up to EXACT_COUNT_CAP + 1. */
  lag: string;
  /** The last position in the log (lagOf's estimate past the cap). */
  head: string | null;
  pending: string;
  ready: number;
  leased: number;
  backoff: number;
  waiting: number;
  waiting_until: Date | string | null;
  delayed_over_hour: number;
  dead: number;
  paused_keys: number;
  incarnation: string;
  start_horizon: string | null;
  oldest_pending_age_ms: string | null;
}

export function toSubscriptionStats(row: StatsRow): Omit<SubscriptionStats, "orphaned"> {
  return {
    name: row.name,
    kind: row.kind,
    events: row.events,
    streams: row.streams,
    key: row.key,
    from: row.from,
    batchSize: row.batch_size,
    maxAttempts: row.max_attempts,
    leaseMs: row.lease_ms,
    backoff: { initialMs: row.backoff_initial_ms, maxMs: row.backoff_max_ms, factor: Number(row.backoff_factor) },
    maxLeasedKeys: row.max_leased_keys,
    tenant: row.tenant,
    tenantWeights: row.tenant_weights,
    tenantMismatched: Number(row.tenant_mismatched),
    maxLeasedKeysPerTenant: row.max_leased_keys_per_tenant,
    rateLimit: row.rate_limit && { ...row.rate_limit, burst: row.rate_limit.burst ?? 1 },
    maxDelayMs: Number(row.max_delay_ms),
    // never the signing secret
    ...(row.deliver ? { deliver: { url: row.deliver.url, timeoutMs: row.deliver.timeoutMs } } : {}),
    paused: row.paused,
    watermark: Number(row.watermark_position),
    ...lagOf(row),
    pending: Number(row.pending),
    skipped: Number(row.skipped),
    skippedInvalidKeys: Number(row.skipped_invalid),
    lastSkip: row.last_skip,
    skippedDeadLetters: Number(row.skipped_dead),
    advanceError:
      row.advance_error === null
        ? null
        : { message: row.advance_error, at: new Date(present(row.advance_error_at, "advance_error_at")).toISOString() },
    keys: {
      ready: row.ready,
      leased: row.leased,
      backoff: row.backoff,
      waiting: row.waiting,
      waitingUntil: row.waiting_until === null ? null : new Date(row.waiting_until).toISOString(),
      delayedOverHour: row.delayed_over_hour,
      dead: row.dead,
      paused: row.paused_keys,
    },
    incarnation: row.incarnation,
    startsAt: row.start_horizon === null ? null : Number(row.start_horizon),
    oldestPendingAgeMs: row.oldest_pending_age_ms === null ? null : Math.max(0, Number(row.oldest_pending_age_ms)),
  };
}

/**
 * The head of the log: its last position, and its events counted up to EXACT_COUNT_CAP + 1 with,
 * for a larger log, the planner's estimate of them (pg_class's rows per page times the table's
 * pages now, as the planner scales it) and the first position (logCount).
 */
export function logHead(): SQL {
  return sql`SELECT (SELECT max(position) FROM ${events}) AS head,
    (SELECT count(*) FROM (SELECT FROM ${events} ORDER BY position LIMIT ${EXACT_COUNT_CAP + 1}) e) AS events,
    (SELECT min(position) FROM ${events}) AS first,
    (SELECT (c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::bigint))::bigint
       FROM pg_class c WHERE c.oid = to_regclass('corq.events') AND c.relpages > 0 AND c.reltuples >= 0) AS estimated`;
}

export interface LogHeadRow {
  head: string | null;
  events: string;
  first: string | null;
  estimated: string | null;
}

/**
 * The log's size: the count under the cap. Past it, the positions from the first to the head —
 * exact for a log that is only appended to and trimmed from its start (retention by age) — unless
 * Postgres' estimate (kept by autovacuum and ANALYZE) is under nine tenths of them: removals
 * inside the log (an erasure, retention of some streams) left holes the positions still count.
 */
export function logCount(row: LogHeadRow): { events: number; eventsEstimated: boolean } {
  const counted = Number(row.events);
  if (counted <= EXACT_COUNT_CAP) return { events: counted, eventsEstimated: false };
  const span = Number(row.head ?? 0) - Number(row.first ?? 0) + 1;
  const estimate = row.estimated === null ? span : Number(row.estimated);
  return { events: Math.max(counted, estimate < span * 0.9 ? estimate : span), eventsEstimated: true };
}
