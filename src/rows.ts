// Database rows → the public shapes. node-postgres returns bigint as string; positions and
// counters are converted to numbers here (safe up to 2^53, docs/http-api.md).
import type {
  BatchRecord,
  DeadLetter,
  KeyState,
  KeyStatus,
  SubscriptionStats,
  TokenInfo,
  TokenScope,
} from "./types.js";
import type { TokenRow } from "./sql/tokens.js";

export interface StatsRow {
  name: string;
  kind: "code" | "push";
  events: string[];
  key: string;
  from: "beginning" | "now";
  batch_size: number;
  max_attempts: number;
  lease_ms: number;
  backoff_initial_ms: number;
  backoff_max_ms: number;
  backoff_factor: number;
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
  dead: number;
  oldest_pending_age_ms: string | null;
}

export function toSubscriptionStats(row: StatsRow): Omit<SubscriptionStats, "orphaned"> {
  return {
    name: row.name,
    kind: row.kind,
    events: row.events,
    key: row.key,
    from: row.from,
    batchSize: row.batch_size,
    maxAttempts: row.max_attempts,
    leaseMs: row.lease_ms,
    backoff: { initialMs: row.backoff_initial_ms, maxMs: row.backoff_max_ms, factor: Number(row.backoff_factor) },
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
        : { message: row.advance_error, at: new Date(row.advance_error_at!).toISOString() },
    keys: { ready: row.ready, leased: row.leased, backoff: row.backoff, dead: row.dead },
    oldestPendingAgeMs: row.oldest_pending_age_ms === null ? null : Math.max(0, Number(row.oldest_pending_age_ms)),
  };
}

export interface KeyRow {
  key: string;
  status: KeyStatus;
  pending: number;
  attempts: number;
  available_at: Date | null;
  last_error: string | null;
  last_position: string | null;
}

export function toKeyState(row: KeyRow): KeyState {
  return {
    key: row.key,
    status: row.status,
    pending: row.pending,
    attempts: row.attempts,
    availableAt: row.available_at === null ? null : new Date(row.available_at).toISOString(),
    lastError: row.last_error,
    lastPosition: row.last_position === null ? null : Number(row.last_position),
  };
}

export interface DeadLetterRow {
  subscription: string;
  key: string;
  failed_position: string | null;
  attempts: number;
  last_error: string | null;
  dead_at: Date;
  // with the event (listDeadLetters withEvent)
  stream?: string | null;
  name?: string | null;
  data?: unknown;
}

export function toDeadLetter(row: DeadLetterRow, withEvent: boolean): DeadLetter {
  return {
    subscription: row.subscription,
    key: row.key,
    position: row.failed_position === null ? null : Number(row.failed_position),
    attempts: row.attempts,
    lastError: row.last_error,
    deadAt: new Date(row.dead_at).toISOString(),
    ...(withEvent ? { event: row.name == null ? null : { stream: row.stream!, name: row.name, data: row.data } } : {}),
  };
}

export interface BatchRow {
  subscription: string;
  key: string;
  started_at: Date;
  finished_at: Date;
  events: number;
  outcome: BatchRecord["outcome"];
}

export function toBatchRecord(row: BatchRow): BatchRecord {
  return {
    subscription: row.subscription,
    key: row.key,
    startedAt: new Date(row.started_at).toISOString(),
    finishedAt: new Date(row.finished_at).toISOString(),
    events: row.events,
    outcome: row.outcome,
  };
}

export function toTokenInfo(row: TokenRow): TokenInfo {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes as TokenScope[],
    streamPrefix: row.stream_prefix,
    createdAt: new Date(row.created_at).toISOString(),
    lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at).toISOString(),
  };
}
