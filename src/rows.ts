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
import type { TokenRow } from "./sql/operate/tokens.js";
import { present } from "./errors.js";

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
  paused_keys: number;
  incarnation: string;
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
    keys: { ready: row.ready, leased: row.leased, backoff: row.backoff, dead: row.dead, paused: row.paused_keys },
    incarnation: row.incarnation,
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
  failed_position: string | null;
  dead_at: Date | null;
  paused_at: Date | null;
  lease_until: Date | null;
  lease_holder: string | null;
  leased_at: Date | null;
  seq: string;
  replaying: boolean;
  max_attempts: number;
  subscription_paused: boolean;
  now: Date;
}

const iso = (at: Date | string | null) => (at === null ? null : new Date(at).toISOString());

export function toKeyState(row: KeyRow): KeyState {
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
    ...(row.paused_at !== null ? { pausedSince: new Date(row.paused_at).toISOString() } : {}),
    ...(leased ? { holder: row.lease_holder, leasedSince: iso(row.leased_at), leasedUntil: iso(row.lease_until) } : {}),
    reason: reasonOf(row, leased),
  };
}

/** Why a key is not running (or what it is doing), in words: the keys API and the dashboard show it. */
function reasonOf(row: KeyRow, leased: boolean): string {
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
      return `in backoff until ${iso(row.available_at)} (attempt ${row.attempts} of ${row.max_attempts} failed${error})`;
    case "ready":
      if (row.subscription_paused) return "the subscription is paused";
      return `ready since ${iso(row.available_at)}, waiting for a consumer${row.replaying ? " (replaying: after the live keys)" : ""}${row.attempts > 0 ? `; attempt ${row.attempts + 1} of ${row.max_attempts} next${error}` : ""}`;
    default:
      return "idle: nothing queued";
  }
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
    ...(withEvent
      ? { event: row.name == null ? null : { stream: present(row.stream, "stream"), name: row.name, data: row.data } }
      : {}),
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
