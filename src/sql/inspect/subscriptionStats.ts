import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, subscriptions } from "../../db/schema.js";
import { present } from "../../errors.js";
import type { SubscriptionStats } from "../../types.js";
import { statusFilter } from "./listKeys.js";

/**
 * Settings and live figures of every subscription (or one). Key counts read only keys with
 * work or paused (the partial indexes), so they cost what is pending, not how many keys ever
 * existed; they count each key once, by its status (listKeys.ts).
 * lag = events in the log past the watermark (matching or not); oldest pending age = age of
 * the lowest queued position.
 */
export function subscriptionStats(name?: string): SQL {
  return sql`
    SELECT s.id, s.name, s.kind, s.events, s.streams, s.key, s."from", s.batch_size, s.max_attempts, s.lease_ms,
      s.backoff_initial_ms, s.backoff_max_ms, s.backoff_factor, s.max_leased_keys, s.tenant, s.tenant_weights, s.tenant_mismatched, s.max_leased_keys_per_tenant, s.rate_limit, s.deliver, s.paused, s.watermark_position, s.skipped,
      s.skipped_invalid, s.last_skip, s.skipped_dead, s.advance_error, s.advance_error_at, s.incarnation,
      s.start_horizon,
      (SELECT count(*) FROM ${events} e WHERE (e.tx, e.position) > (s.watermark_tx, s.watermark_position))::bigint AS lag,
      c.pending, c.ready, c.leased, c.backoff, c.waiting, c.waiting_until, c.dead, c.paused_keys,
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
  rate_limit: SubscriptionStats["rateLimit"];
  deliver: { url: string; timeoutMs: number } | null;
  paused: boolean;
  watermark_position: string;
  skipped: string;
  skipped_invalid: string;
  last_skip: { position: number; reason: string } | null;
  skipped_dead: string;
  advance_error: string | null;
  advance_error_at: Date | null;
  lag: string;
  pending: string;
  ready: number;
  leased: number;
  backoff: number;
  waiting: number;
  waiting_until: Date | string | null;
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
    rateLimit: row.rate_limit,
    // never the signing secret
    ...(row.deliver ? { deliver: { url: row.deliver.url, timeoutMs: row.deliver.timeoutMs } } : {}),
    paused: row.paused,
    watermark: Number(row.watermark_position),
    lag: Number(row.lag),
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
      dead: row.dead,
      paused: row.paused_keys,
    },
    incarnation: row.incarnation,
    startsAt: row.start_horizon === null ? null : Number(row.start_horizon),
    oldestPendingAgeMs: row.oldest_pending_age_ms === null ? null : Math.max(0, Number(row.oldest_pending_age_ms)),
  };
}

/** The head of the log: last position and number of events. */
export function logHead(): SQL {
  return sql`SELECT (SELECT max(position) FROM ${events}) AS head, (SELECT count(*) FROM ${events}) AS events`;
}
