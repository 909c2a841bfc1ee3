// The library object and the subscriptions it runs: a handler's context holds the Corq, the Corq's
// options hold the subscriptions, so these shapes refer to each other and stay in one module.
import type { SQL } from "drizzle-orm";
import type { Connection, Session } from "../db/executor.js";
import type { AppMigration } from "../db/appMigrations.js";
import type { CorqTransaction } from "../db/drizzleTransaction.js";
import type { TokenScope } from "../tokenScopes.js";
import type {
  AnyEvents,
  AppendResult,
  DeliveredEvent,
  EventInput,
  EventMap,
  EventName,
  EventOf,
  EventSchemas,
  StoredEvent,
} from "./events.js";
import type { KeyPath } from "./keyPaths.js";
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

/**
 * Computes the correlation key of an event in JS; null/undefined = the event does not match.
 * (Declared through a method so that a key function of some events fits a subscription of more:
 * parameters of methods are compared both ways.)
 */
export type KeyFunction<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = {
  key(event: EventOf<E, N>): string | null | undefined;
}["key"];

export interface HandlerContext<E extends EventMap = AnyEvents> {
  subscription: string;
  /** Changes when the subscription is deleted and created again: seqs of two incarnations are unrelated. */
  incarnation: string;
  key: string;
  /** 1 on the first delivery of this batch's head event, then 2, 3 … */
  attempt: number;
  /** Aborted when the lease expires: stop work you can stop. */
  signal: AbortSignal;
  /** The corq instance that claimed the batch: policies and process managers append with it. */
  corq: Corq<E>;
  /**
   * Runs one statement (drizzle `sql` template) on corq's connection: projections write with it.
   * In a transactional subscription it runs in the batch's transaction, as `tx` does.
   */
  run<T = Record<string, unknown>>(query: SQL): Promise<T[]>;
  /**
   * Only in a `transactional: true` subscription (always there): the batch's transaction, a
   * drizzle transaction. What the handler writes with it commits in the same transaction as the
   * ack of the batch, fenced by the lease — or not at all: a handler that throws, or a lease lost
   * meanwhile, rolls it back (docs/library.md, "Transactional handlers").
   */
  tx?: CorqTransaction;
  /**
   * With a registered OpenTelemetry tracer: the W3C trace context of this batch's
   * `process <subscription>` span, to pass on where the active context does not reach (a
   * Worker has no context manager) — docs/operations.md, "Traces". Undefined without a tracer.
   */
  trace?: TraceHeaders;
}

/** A W3C trace context as HTTP carries it: `traceparent`, and `tracestate` when there is one. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

/** The context of a transactional handler: `tx` is always there (annotate `ctx` with it, or write `ctx.tx!`). */
export interface TransactionalHandlerContext<E extends EventMap = AnyEvents> extends HandlerContext<E> {
  tx: CorqTransaction;
}

/**
 * What a handler may answer: nothing (ack the batch), `{ ackedThrough: position }` (ack a
 * prefix; the rest is delivered again, in order), or `{ retryAfterMs }` ("come back later": a
 * downstream said 429 or is down for maintenance — nothing is acked, the key waits that long
 * (at most an hour), and no attempt is counted; bounded apart: docs/flow-control.md).
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a handler that returns nothing acks
export type HandlerResult = void | { ackedThrough: number } | { retryAfterMs: number; reason?: string };

/**
 * Receives the events of ONE key, ascending seq order (log order; replays after what was
 * queued before the rewind). Return nothing to ack the batch,
 * `{ ackedThrough: position }` to ack a prefix (the rest is delivered again, in order),
 * `{ retryAfterMs }` to come back later without an attempt counted,
 * or throw to fail it (retried with backoff, dead after maxAttempts).
 */
export type Handler<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = (
  events: DeliveredEvent<E, N>[],
  context: HandlerContext<E>,
) => Promise<HandlerResult> | HandlerResult;

/**
 * A code subscription. With an event map E (createCorq<E>, defineSubscription<E>()), `events`
 * must be names of E, `key` a path into their data, and the handler gets DeliveredEvent<E, N>:
 * a union over the subscribed names N.
 */
export interface SubscriptionDefinition<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> {
  name: string;
  /** The event names it takes; ["*"] (the default): every name. */
  events?: readonly (N | "*")[];
  /**
   * Only events of streams whose name starts with one of these prefixes (exact prefixes, 1–100);
   * left out: every stream. The subscription-side half of an append token's `streamPrefix`: a
   * producer limited to `orders-` still makes every subscription that takes `orders-` streams run.
   */
  streams?: string[];
  /** "stream" (default), a path into data or meta ("data.customer"), or a function of the event. */
  key?: KeyPath<E, N> | KeyFunction<E, N>;
  /**
   * Standard Schema validators by event name (zod, valibot, arktype …): each delivered event's
   * data is checked (and transformed) before the handler sees it; data that fails fails the
   * batch with the validator's messages, like a handler that throws. Over createCorq's `schemas`.
   */
  schemas?: EventSchemas<E, N>;
  from?: "beginning" | "now";
  batchSize?: number;
  maxAttempts?: number;
  leaseMs?: number;
  backoff?: { initialMs?: number; maxMs?: number; factor?: number };
  /**
   * At most this many keys of the subscription in flight (leased) at once, across every
   * consumer, process and isolate — a downstream that takes n parallel writers. Keys over the
   * cap wait, ready, without an attempt counted (docs/flow-control.md). Default: no cap.
   */
  maxLeasedKeys?: number | null;
  /**
   * Fairness between tenants: each key's tenant, named like `key` ("stream", a path such as
   * "data.tenant", or a function — then `key` must be a function too), fixed by the event that
   * made the key's row. Claims share the consumers round robin between the tenants with ready
   * keys, least recently served first, each tenant's oldest key first (docs/flow-control.md).
   * Default: none (the oldest ready key first, whoever it belongs to).
   */
  tenant?: KeyPath<E, N> | KeyFunction<E, N> | null;
  /** Keys per round for a tenant (default 1): `{ "big-customer": 3 }`. */
  tenantWeights?: Record<string, number> | null;
  /**
   * At most this many keys of each tenant in flight (leased) at once, across every consumer,
   * process and isolate (needs `tenant`). Default: no cap.
   */
  maxLeasedKeysPerTenant?: number | null;
  /**
   * At most `events` delivered per `perMs` for each key, each tenant, or the whole subscription
   * (`by`), across every consumer, process and isolate: over it, keys wait — no failure, no
   * attempt counted (docs/flow-control.md). Default: no limit.
   */
  rateLimit?: { events: number; perMs: number; by: "key" | "tenant" | "subscription" } | null;
  /**
   * The handler's writes through `ctx.tx` (and `ctx.run`) commit in the same transaction as the
   * ack of its batch: effects exactly once. Each such batch holds one connection (on Workers and
   * with driver "neon-http": a session opened for it) from the handler's start to its commit.
   * Default false: the handler runs outside any transaction and corq holds nothing open.
   */
  transactional?: boolean;
  // a method, not a property: a subscription of some events fits a list of subscriptions of more
  handle(events: DeliveredEvent<E, N>[], context: HandlerContext<E>): Promise<HandlerResult> | HandlerResult;
}

// The library object (createCorq in src/corq.ts implements it). It lives here, with the shapes it
// takes and returns, so that modules needing only its type never import the implementation.
export interface CorqOptions<E extends EventMap = AnyEvents> {
  /** Postgres connection string; corq creates (and closes) a node-postgres pool. */
  databaseUrl?: string;
  /** Or an existing connection: a pg / Neon Pool or Client, or a drizzle database. */
  db?: Connection | { $client: Connection };
  subscriptions?: SubscriptionDefinition<E>[];
  /**
   * Standard Schema validators by event name, for every subscription that takes the name (a
   * subscription's own `schemas` win): see SubscriptionDefinition.schemas.
   */
  schemas?: EventSchemas<E>;
  /** The app's own schema (its tables), applied by migrate() after corq's, each once (db/appMigrations.ts). */
  migrations?: AppMigration[];
  /** Events scanned per advance statement (default 5,000). */
  advanceBatchSize?: number;
  /** Max connections of the pool corq creates from databaseUrl (default 10). */
  poolSize?: number;
  /**
   * How corq reaches databaseUrl: "pg" (default: a node-postgres pool), or "neon-http" (Neon's
   * HTTP query path: one HTTPS request per statement, no connection to open or hold — for
   * serverless functions; interactive transactions such as migrate() then use a short-lived
   * node-postgres connection).
   */
  driver?: "pg" | "neon-http";
  /** With `db` set to a neon() HTTP query function: opens a pool for an interactive transaction. */
  session?: Session;
  /** Called with the text of every statement corq sends (round-trip accounting). */
  onStatement?: (text: string) => void;
  /**
   * Let push subscriptions deliver to loopback, private, link-local and other non-public
   * addresses (default: refused, against SSRF; in Node, `CORQ_PUSH_ALLOW_PRIVATE=true` sets it).
   */
  pushAllowPrivate?: boolean;
  /**
   * Who this instance's consumers are, recorded on every lease they take (the keys API and the
   * dashboard show it). Default: "process <pid> …" in Node, "invocation …" elsewhere, with a
   * random id per instance.
   */
  holder?: string;
  /**
   * NOTIFY after an append commits, so `npm run serve` processes on the same database wake at
   * once instead of at their safety-net timer. An append in its own transaction NOTIFYs in a
   * statement of its own right after its commit, coalesced (at most one in flight, one more
   * after it for the appends that committed meanwhile); an append in the caller's transaction
   * NOTIFYs inside it (delivered at that commit; Postgres folds repeats). Why not always inside:
   * a transaction that NOTIFYs holds a global lock through its commit's WAL flush, so such
   * commits run one at a time (measured in bench/RESULTS.md). Default false: on Workers nobody
   * listens.
   */
  notify?: boolean;
  /**
   * How long the batches this instance's drains acked may wait in memory before they are written
   * to the activity record (the dashboard's timeline, the /metrics batch histogram), in ms. 0
   * (default): by the time each drain returns — right for a function that ends with its drain.
   * A long-lived process sets more (`npm run serve`: 1,000) and writes one statement per interval
   * instead of one per drain; close() writes what waits, a crash loses at most that much.
   */
  activityFlushMs?: number;
  /**
   * How long a key may stay idle — nothing queued, no lease, not dead, not paused — before its
   * row is deleted by housekeeping (the Worker's cron, `serve`), in ms. Default 7 days. A key
   * that comes back gets a new row, and its seqs go on above every seq it had.
   */
  keyIdleMs?: number;
  /**
   * How long an append's `idempotencyKey` answers with that append (CORQ_IDEMPOTENCY_TTL_MS), in
   * ms: default 24 hours, at most 366 days. Housekeeping prunes the keys past it.
   */
  idempotencyTtlMs?: number;
  /**
   * The retention policy this app deploys with (docs/operations.md, "Retention"): off when left out. It is
   * applied when it differs from the option last applied (a deploy that changes it); a policy
   * set since with setRetention / PUT /retention stays in force until then.
   */
  retention?: RetentionPolicy;
}

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
       * `traceparent` / `tracestate`): its `send` span's parent instead of the active context.
       * Only with a registered OpenTelemetry tracer (docs/operations.md, "Traces"); an invalid
       * traceparent is ignored.
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
  ): Promise<{ first: ConsumeResult | null; batches: number; events: number }>;
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
