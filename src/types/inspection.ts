// What inspection returns: key states, subscription stats, dead letters, the activity record, metrics.

export type KeyStatus = "ready" | "leased" | "backoff" | "dead" | "paused" | "idle";

export interface KeyState {
  key: string;
  status: KeyStatus;
  pending: number;
  attempts: number;
  availableAt: string | null;
  lastError: string | null;
  lastPosition: number | null;
  /** The last seq given to an event of this key (the next one queued gets seq + 1). */
  seq: number;
  /** The key's tenant (only in a subscription with `tenant`; "" when its event named none). */
  tenant?: string;
  /** When the key was paused (only while it is). */
  pausedSince?: string;
  /** Only while a lease is live: who holds it (a process, a Worker invocation), since and until when. */
  holder?: string | null;
  leasedSince?: string | null;
  leasedUntil?: string | null;
  /** Why the key is not running (or what it is doing), in words. */
  reason: string;
}

export interface SubscriptionStats {
  name: string;
  kind: "code" | "push";
  events: string[];
  /** The stream filter: stream-name prefixes, or null for every stream. */
  streams: string[] | null;
  key: string;
  from: "beginning" | "now";
  batchSize: number;
  maxAttempts: number;
  leaseMs: number;
  backoff: { initialMs: number; maxMs: number; factor: number };
  /** At most this many keys leased at once, across every consumer (null: no cap). */
  maxLeasedKeys: number | null;
  /** Each key's tenant ("stream", a path, "function"); null: no fairness between tenants. */
  tenant: string | null;
  /** Keys per round by tenant (others 1); null: every tenant 1. */
  tenantWeights: Record<string, number> | null;
  /** At most this many keys of each tenant leased at once (null: no cap). */
  maxLeasedKeysPerTenant: number | null;
  /**
   * No window of `perMs` sees more than `events` deliveries start (`burst` of them at once,
   * default 1: one every perMs / events) for each key, tenant or the whole subscription; null: no
   * limit.
   */
  rateLimit: { events: number; perMs: number; by: "key" | "tenant" | "subscription"; burst: number } | null;
  /** An event's delay above this is capped at it for this subscription, in ms (default a day). */
  maxDelayMs: number;
  /** Events whose tenant differed from their key's (a key keeps the tenant its first event gave it). */
  tenantMismatched: number;
  /** Push subscriptions: where batches are POSTed (the secret is never shown again). */
  deliver?: { url: string; timeoutMs: number };
  paused: boolean;
  watermark: number;
  /** Events in the log past the watermark: counted up to 10,000, estimated past that (`lagEstimated`). */
  lag: number;
  lagEstimated: boolean;
  pending: number;
  /** Matching events without a valid key (none, or one that breaks the key rule): never queued. */
  skipped: number;
  /** Of those, the events whose key broke the key rule (empty, "." / "..", over 512 bytes, malformed, or a key function that threw). */
  skippedInvalidKeys: number;
  /** The last event skipped for an invalid key, and why. */
  lastSkip: { position: number; reason: string } | null;
  /** Failed events an operator skipped (dead letters released with mode "skip"). */
  skippedDeadLetters: number;
  /** Why the last advance of this subscription failed; null once an advance works again. */
  advanceError: { message: string; at: string } | null;
  /** A code subscription that the instance answering does not define (its code is gone): it can be deleted. */
  orphaned: boolean;
  keys: {
    ready: number;
    leased: number;
    /** Not due yet: after a failed attempt, or (`waiting`) a delayed event or a postponement. */
    backoff: number;
    /** Of `backoff`, the keys with no failed attempt: waiting for a delayed event or a postponement. */
    waiting: number;
    /** When the first of those may run (null: none waits). */
    waitingUntil: string | null;
    /**
     * Of `waiting`, the keys held by a delayed event more than an hour ahead: a long delay holds
     * every later event of its key (a producer of any stream prefix the key is reachable by can
     * set one, up to maxDelayMs).
     */
    delayedOverHour: number;
    dead: number;
    paused: number;
  };
  /** Changes when the subscription is deleted and created again (deliveries carry it with each batch). */
  incarnation: string;
  /**
   * Created `from: "beginning"` after retention had removed events: the retention horizon then,
   * where its beginning was (events of retained streams below it were gone). Null: it saw the
   * whole log, or started from now.
   */
  startsAt: number | null;
  oldestPendingAgeMs: number | null;
}

export interface DeadLetter {
  subscription: string;
  key: string;
  position: number | null;
  attempts: number;
  lastError: string | null;
  deadAt: string;
  /** Only with `withEvent`: the event that failed (null if it no longer exists). */
  event?: { stream: string; name: string; data: unknown } | null;
}

/** One batch in the activity record (Corq.activity): what the dashboard's timeline draws. */
export interface BatchRecord {
  subscription: string;
  key: string;
  startedAt: string;
  finishedAt: string;
  /** Events in the batch (0 for "expired": a lease that ran out; its size is not known). */
  events: number;
  outcome: "acked" | "failed" | "dead" | "expired";
}

/**
 * The dashboard's batch timeline (Corq.timeline): bars of the most recently active keys, each
 * the batches of one key with one outcome that started in one time slot; the totals count
 * every batch of the window.
 */
export interface TimelineData {
  bars: (BatchRecord & { batches: number })[];
  counts: Record<BatchRecord["outcome"], number>;
}

/** One (subscription, outcome, bucket) counter; `le` = Infinity for the last bucket. */
export interface BatchDurationCount {
  subscription: string;
  outcome: string;
  le: number;
  batches: number;
  events: number;
  seconds: number;
}

/** A subscription's counters that the key rows keep (GET /metrics; never decrease). */
export interface SubscriptionCounters {
  subscription: string;
  /** Batches whose lease ran out before their outcome (counted when a claim took the key over). */
  batchesExpired: number;
  /** "Come back later" answers within their bounds (no attempt counted). */
  batchesPostponed: number;
  /** Keys dead-lettered: a failure, or an expired lease, on the last attempt. */
  keysDeadLettered: number;
}

/** An alert's sends (GET /metrics). */
export interface AlertCounters {
  alert: string;
  /** Delivered (the receiver answered 2xx). */
  sent: number;
  /** Given up after their retries. */
  failed: number;
}

export interface MetricsSnapshot {
  subscriptions: SubscriptionStats[];
  /** head: the newest event's position; appended: events ever appended (absent from a snapshot of a release before it). */
  log: { head: number | null; appended?: number };
  batchDurations: BatchDurationCount[];
  /** Absent from a snapshot of a release before them: rendered as none. */
  counters?: SubscriptionCounters[];
  alerts?: AlertCounters[];
}
