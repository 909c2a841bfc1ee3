// The library object (createCorq in src/corq.ts implements it). It lives in src/types/, with the
// shapes it takes and returns, so that modules needing only its type never import the implementation.
// What it is made with is in corqOptions.ts, the subscriptions it runs in subscriptionDefinition.ts
// and handler.ts: a handler's context holds the Corq, so those refer to this module, never the reverse.
import type { Connection } from "../db/executor.js";
import type { TokenScope } from "../tokenScopes.js";
import type { AnyEvents, AppendResult, EventInput, EventMap, EventName, StoredEvent } from "./events.js";
import type { ConsumeResult } from "./consumeResult.js";
import type {
  BatchRecord,
  DeadLetter,
  KeyState,
  KeyStatus,
  MetricsSnapshot,
  SubscriptionStats,
  TimelineData,
} from "./inspection.js";
import type { CreatedToken, TokenInfo } from "./tokens.js";
import type { Retention, RetentionPolicy, RetentionRun } from "./retention.js";
import type { DoctorOptions, DoctorReport } from "./doctor.js";
import type { AlertCheck, AlertInfo, AlertInput, AlertPut } from "./alerts.js";
import type { TraceHeaders } from "./traceHeaders.js";

/** corq on a database; with an event map E, appends are checked against it. */
export interface Corq<E extends EventMap = AnyEvents> {
  migrate(): Promise<{ applied: string[] }>;
  // generic in the names appended: so Corq<Events> and Corq fit where the other is expected (a
  // handler typed by a map, given an untyped Corq; a typed one, passed to untyped code)
  append<N extends EventName<E>>(
    stream: string,
    events: EventInput<E, N>[],
    options?: {
      expectedVersion?: number;
      tx?: Connection;
      /**
       * 1–200 visible ASCII characters. Within the window (`idempotencyTtlMs`) an append to the
       * same stream with the same key and the same events and expectedVersion answers what the
       * first one did (`replayed: true`) and writes nothing; other events → `idempotency_key_reused`
       * (422); while the first is still in flight (its transaction open) → `idempotency_in_flight` (409).
       */
      idempotencyKey?: string;
      /**
       * The W3C trace context this append continues (a received message's or request's
       * `traceparent` / `tracestate`): with a registered OpenTelemetry tracer, its `send` span's
       * parent instead of the active context; without one, kept with each event as given and
       * sent on with its push delivery (docs/operations.md, "Traces"). An invalid traceparent
       * is ignored (the append goes on untraced), an invalid or oversized tracestate too.
       */
      trace?: TraceHeaders;
    },
  ): Promise<AppendResult>;
  readStream(stream: string, options?: { from?: number; limit?: number }): Promise<StoredEvent[]>;
  readLog(options?: { after?: number; limit?: number }): Promise<{ events: StoredEvent[]; next: number | null }>;
  /**
   * Erases one stream: its events leave the log and every subscription's queue (versions up to
   * the stream's version when the call began; events appended meanwhile stay), in rounds that
   * each commit. The stream keeps its name and version (appends continue after it). A batch
   * already handed out may still finish and be acked. A call that failed is finished by calling
   * again. → the events this call erased (0 for a stream already erased).
   */
  eraseStream(stream: string): Promise<{ erased: number }>;
  /**
   * Moves the log into the subscriptions' queues. When it returns, every event committed before
   * it is enqueued (it waits for an advancer already at work) — but for a subscription being
   * rewound: its rewind enqueues them when it ends, after the replay. `{ coalesce: true }` is for
   * wake-ups (after an append, a cron): where another advancer is at work it returns at once,
   * and that one runs again for this call. `eventNames` (an append's kick) limits it to the
   * subscriptions whose filter takes one of those names.
   * `recheckIf` (with coalesce): asked after the first pass over the subscriptions; false leaves
   * the re-check for the kicks other advancers left meanwhile to the caller's NEXT advance, which
   * must then follow at once (its rounds take what those kicks were for). For a loop that runs
   * again when woken during a run (`npm run serve`): one statement less per run under load.
   */
  advance(options?: {
    coalesce?: boolean;
    eventNames?: string[];
    recheckIf?: () => boolean;
    /**
     * The caller delivers what this advance enqueues itself (a runner such as `npm run serve`'s):
     * a Corq with `notify` then does not NOTIFY "ready" for it, as it does after any other advance
     * that enqueued (so serve processes deliver at once what an app's advance enqueued for them).
     */
    consumesEnqueued?: boolean;
  }): Promise<Record<string, number>>;
  consume(subscription: string): Promise<ConsumeResult | null>;
  /**
   * Consumes batches until nothing is ready, the time budget is spent or `maxBatches` ran.
   * Each statement claims up to `keysPerClaim` keys (default 16), each with its own lease and
   * batch; their handlers run at once, and finished batches are acked (or failed) together in
   * the statement that claims the next keys. Returns the first batch's result and the totals.
   * For a graceful stop: once `stop` is aborted nothing more is claimed (the batches in hand
   * finish and are acked or failed as usual); once `abort` is aborted the running handlers'
   * `ctx.signal` aborts too, and a handler that then throws has its lease released at once
   * (outcome "released": the key is ready again now, no attempt counted) — never while the
   * handler still runs.
   * A replay's share: of the keysPerClaim keys in hand, at most `replayKeys` are replaying
   * (working through events a rewind queued; default a quarter of keysPerClaim, at least 1),
   * and a claim takes live keys first — so a large replay leaves the rest to live traffic.
   */
  drain(
    subscription: string,
    options?: {
      budgetMs?: number;
      maxBatches?: number;
      keysPerClaim?: number;
      replayKeys?: number;
      stop?: AbortSignal;
      abort?: AbortSignal;
    },
  ): Promise<{
    first: ConsumeResult | null;
    batches: number;
    events: number;
    /**
     * Keys this drain left waiting for a time: its failed batches' (a backoff), its postponed ones
     * (Retry-After, retryAfterMs), and those its claims found over their rate limit. (The Worker
     * arms a wake-up for them: src/http/wakeUps.ts.)
     */
    waiting: number;
  }>;
  /**
   * Every subscription's stats, and the log's last position and size: `events` is counted up to
   * 10,000 and estimated past that (`eventsEstimated`), as each subscription's `lag` is.
   */
  stats(): Promise<{
    subscriptions: SubscriptionStats[];
    log: { head: number | null; events: number; eventsEstimated: boolean };
  }>;
  subscription(name: string): Promise<SubscriptionStats>;
  keys(subscription: string, options?: { status?: KeyStatus; after?: string; limit?: number }): Promise<KeyState[]>;
  /**
   * The same page with its cursor: `next` is the key to pass as `after` for the page after
   * this one, null when there is none (one row more is read to know).
   */
  keyPage(
    subscription: string,
    options?: { status?: KeyStatus; after?: string; limit?: number },
  ): Promise<{ keys: KeyState[]; next: string | null }>;
  /** One key of a subscription (unknown_key when it has no row: no event of it was ever queued, nor was it paused). */
  key(subscription: string, key: string): Promise<KeyState>;
  /**
   * Stops claiming one key (its events stay queued, in order; a batch in flight finishes), or
   * lets it go on. Pausing a key that has no events yet makes its first events wait.
   */
  pauseKey(subscription: string, key: string): Promise<KeyState>;
  resumeKey(subscription: string, key: string): Promise<KeyState>;
  /**
   * Queues events again, in log order, from the event at position `to` (inclusive) or from the
   * beginning of the log — for the whole subscription, or one key (from that key's first event
   * at or after `to`). Events are matched with the subscription's current filter and key; they
   * get new, higher seqs and `replay: true`. Requeued in chunks that each commit (never one long
   * transaction); meanwhile the subscription's own advance waits. See docs/tour.md, "Rewind and replay".
   */
  rewind(subscription: string, options: { to: number | "beginning"; key?: string }): Promise<{ requeued: number }>;
  /** Dead keys, newest first; `withEvent` adds the event that failed (the dashboard shows it). */
  deadLetters(options?: { subscription?: string; limit?: number; withEvent?: boolean }): Promise<DeadLetter[]>;
  /** `webhookId`: refuse (conflict) a webhook id acted on in the last 10 minutes (replay protection). */
  releaseDeadLetters(options: {
    subscription: string;
    key?: string;
    mode?: "retry" | "skip";
    webhookId?: string;
  }): Promise<{ released: number }>;
  /**
   * Creates or updates a push subscription (docs/http-api.md, "Subscriptions"). The signing secret is
   * returned only when the subscription is created.
   */
  putSubscription(
    name: string,
    input: unknown,
  ): Promise<{ created: boolean; subscription: SubscriptionStats; secret?: string }>;
  /**
   * Deletes a push subscription with its queue and key rows; also a code subscription that
   * this instance does not define (orphaned: its code is gone). One it defines is refused.
   */
  deleteSubscription(name: string): Promise<void>;
  pause(subscription: string): Promise<void>;
  resume(subscription: string): Promise<void>;
  /** Batches that finished in the last `sinceMs` (default 5 min), newest first. */
  activity(options?: { subscription?: string; sinceMs?: number; limit?: number }): Promise<BatchRecord[]>;
  /**
   * Events acked per second by each subscription, in `bucketMs` buckets (multiples of 10 s)
   * over `windowMs`, oldest first; the newest is the last complete 10 seconds.
   */
  throughput(options?: { windowMs?: number; bucketMs?: number }): Promise<Record<string, number[]>>;
  /** Forgets batch records older than `olderThanMs` (default 15 min); the Worker's cron calls it. */
  pruneActivity(options?: { olderThanMs?: number }): Promise<{ pruned: number }>;
  /**
   * The newest events of the log, newest first (for display; readLog is the safe cursor read),
   * below position `before` when given; `next` is the `before` of the older page, null at the
   * log's beginning.
   */
  logTail(options?: { before?: number; limit?: number }): Promise<{ events: StoredEvent[]; next: number | null }>;
  /**
   * The batch timeline over the last `sinceMs` (default 5 min): the `maxKeys` (40) most
   * recently active keys, their batches merged into `sinceMs / 300` slots, the whole window.
   */
  timeline(options?: { subscription?: string; sinceMs?: number; maxKeys?: number }): Promise<TimelineData>;
  /** What GET /metrics shows (src/metrics.ts renders it as Prometheus text): 3 statements. */
  metrics(): Promise<MetricsSnapshot>;
  /**
   * What is wrong with corq's database, and what to do (GET /doctor, `corq doctor`): what holds
   * the xmin horizon longer than `heldOverMs` (a minute), the schema against this code's, each
   * subscription's advance, delivery, dead keys and code, vacuum on corq's tables, connection
   * headroom. `ok`: no finding is an error. 5 statements, catalog views and index probes.
   */
  doctor(options?: DoctorOptions): Promise<DoctorReport>;
  /**
   * Creates or replaces an alert (docs/operations.md, "Alerts"): a signed POST to `url` when a
   * key dies, a subscription has more than `lagOver` events not handled, an advance fails, or a
   * transaction holds the xmin horizon longer than `heldOverMs` — at most once per alert,
   * condition and key (or subscription, or transaction) per `minIntervalMs` (10 minutes). The
   * signing secret is returned when the alert is created (made when not given); a replace keeps
   * it unless a new one is given. Sent by checkAlerts.
   */
  putAlert(name: string, input: AlertInput): Promise<AlertPut>;
  /** Every alert by name, with its counts and last send; never a secret. */
  alerts(): Promise<AlertInfo[]>;
  /** Deletes an alert (what it had yet to send is not sent). Unknown name → unknown_alert. */
  deleteAlert(name: string): Promise<void>;
  /**
   * One alerts pass: evaluates what the alerts watch, records what is new and sends what is due
   * (retries too), at most `maxSends` (100) of them. The Worker's cron and `serve` run it by
   * themselves (every second on Node); a process of your own calls it as often as it wants alerts
   * to be prompt. Several callers at once send each alert once. Once `stop` is aborted it sends
   * nothing more.
   */
  checkAlerts(options?: { maxSends?: number; stop?: AbortSignal }): Promise<AlertCheck>;
  /**
   * Creates a scoped API token (docs/http-api.md, "Tokens"). The secret (`token`) is returned
   * here only: the database keeps its SHA-256. `streamPrefix` limits appends (needs `append`,
   * not with `admin`).
   */
  createToken(input: { name: string; scopes: TokenScope[]; streamPrefix?: string | null }): Promise<CreatedToken>;
  /** Every token, oldest first, without secrets. */
  listTokens(): Promise<TokenInfo[]>;
  /** Revokes a token: refused from the next request on, and its dashboard sessions end. Unknown id → unknown_token. */
  revokeToken(id: string): Promise<void>;
  /**
   * The token a secret belongs to, or null (unknown or revoked). One indexed read, no statement
   * at all for a string that is not shaped like a token; moves lastUsedAt at most once a minute.
   */
  verifyToken(secret: string): Promise<TokenInfo | null>;
  /** The retention policy in force and the horizon (applying this instance's `retention` option first if it changed). */
  retention(): Promise<Retention>;
  /** Sets the retention policy (in force until a deploy changes the `retention` option); maxAgeMs null turns retention off. */
  setRetention(policy: RetentionPolicy): Promise<Retention>;
  /**
   * One retention pass: removes what the policy allows, in chunks of `chunkSize` events (each its
   * own short transaction), until nothing more is due, `maxChunks` ran or `budgetMs` passed.
   * `done: false` — more remains; the next pass goes on where this one stopped. Once `stop` is
   * aborted no further chunk starts (a graceful shutdown).
   */
  runRetention(options?: {
    maxChunks?: number;
    budgetMs?: number;
    chunkSize?: number;
    stop?: AbortSignal;
  }): Promise<RetentionRun>;
  close(): Promise<void>;
}
