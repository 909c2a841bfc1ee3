import { CorqError } from "./errors.js";
import {
  createExecutor,
  lendsConnections,
  type Connection,
  type Executor,
  type PoolLike,
  type Session,
} from "./db/executor.js";
import { migrate } from "./db/migrate.js";
import { applyAppMigrations, parseAppMigrations, type AppMigration } from "./db/appMigrations.js";
import {
  expectedVersion as expectedVersionSchema,
  parseEvents,
  parseOrThrow,
  parseSubscriptions,
  correlationKey,
  parsePushSubscription,
  streamName,
  subscriptionName,
} from "./config.js";
import { z } from "zod";
import { advance, advanceOnce, syncCodeSubscriptions } from "./advance.js";
import { consumeOne, drainKeys } from "./consume.js";
import { createPushTransport, registerPushTransport } from "./pushTransport.js";
import { appendEvents, streamHead, type AppendRow, type StreamHeadRow } from "./sql/appendEvents.js";
import { notifyWake } from "./sql/notify.js";
import { readStream } from "./sql/readStream.js";
import { eventExists, readLog } from "./sql/readLog.js";
import { toStoredEvent, type EventRow } from "./sql/eventColumns.js";
import { logHead, logPosition, subscriptionStats } from "./sql/subscriptionStats.js";
import { listBatchDurations, type BatchDurationRow } from "./sql/batchDurations.js";
import type { MetricsSnapshot } from "./metrics.js";
import { listKeys } from "./sql/listKeys.js";
import { listDeadLetters } from "./sql/listDeadLetters.js";
import { ackedPerBucket, logTail, pruneActivity, recentBatches } from "./sql/activity.js";
import { releaseDeadKeys } from "./sql/releaseDeadKeys.js";
import { rememberWebhookId } from "./sql/webhookIds.js";
import { setPaused } from "./sql/setPaused.js";
import { pauseKey, resumeKey } from "./sql/pauseKey.js";
import { kicksPending } from "./sql/advanceSubscription.js";
import { rewindSubscription } from "./rewind.js";
import { readyKeys } from "./sql/readyKeys.js";
import { claimConsumerSlots, releaseConsumerSlot, type ConsumerPlanRow } from "./sql/consumerSlots.js";
import { deleteSubscription, deleteSubscriptionRows, putSubscription, type PutRow } from "./sql/putSubscription.js";
import { deleteToken, insertToken, listTokens, verifyToken, type TokenRow } from "./sql/tokens.js";
import { looksLikeTokenSecret, newTokenSecret, tokenHash, tokenId, tokenInput, type TokenScope } from "./tokens.js";
import {
  toBatchRecord,
  toDeadLetter,
  toKeyState,
  toSubscriptionStats,
  toTokenInfo,
  type BatchRow,
  type DeadLetterRow,
  type KeyRow,
  type StatsRow,
} from "./rows.js";
import type {
  AppendResult,
  BatchRecord,
  ConsumeResult,
  DeadLetter,
  EventInput,
  KeyState,
  KeyStatus,
  StoredEvent,
  SubscriptionDefinition,
  SubscriptionStats,
  CreatedToken,
  TokenInfo,
} from "./types.js";

export interface CorqOptions {
  /** Postgres connection string; corq creates (and closes) a node-postgres pool. */
  databaseUrl?: string;
  /** Or an existing connection: a pg / Neon Pool or Client, or a drizzle database. */
  db?: Connection | { $client: Connection };
  subscriptions?: SubscriptionDefinition[];
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
}

export interface Corq {
  migrate(): Promise<{ applied: string[] }>;
  append(
    stream: string,
    events: EventInput[],
    options?: { expectedVersion?: number; tx?: Connection },
  ): Promise<AppendResult>;
  readStream(stream: string, options?: { from?: number; limit?: number }): Promise<StoredEvent[]>;
  readLog(options?: { after?: number; limit?: number }): Promise<{ events: StoredEvent[]; next: number | null }>;
  /**
   * Moves the log into the subscriptions' queues. When it returns, every event committed before
   * it is enqueued (it waits for an advancer already at work). `{ coalesce: true }` is for
   * wake-ups (after an append, a cron): where another advancer is at work it returns at once,
   * and that one runs again for this call. `eventNames` (an append's kick) limits it to the
   * subscriptions whose filter takes one of those names.
   */
  advance(options?: { coalesce?: boolean; eventNames?: string[] }): Promise<Record<string, number>>;
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
   */
  drain(
    subscription: string,
    options?: {
      budgetMs?: number;
      maxBatches?: number;
      keysPerClaim?: number;
      stop?: AbortSignal;
      abort?: AbortSignal;
    },
  ): Promise<{ first: ConsumeResult | null; batches: number; events: number }>;
  /**
   * For dispatchers, in one statement: the subscriptions with ready keys (push ones, and code
   * ones named in `codeSubscriptions`) and their count, up to `max`; and a consumer slot per
   * ready key, up to `want`, among the first `max` slots, each busy for `holdMs`. Concurrent
   * dispatchers get different slots, so at most `max` consumers run. Start one consumer per
   * slot returned; it calls releaseSlot(slot) when done.
   */
  claimSlots(options: {
    max: number;
    want: number;
    holdMs: number;
    codeSubscriptions: string[];
  }): Promise<{ ready: [string, number][]; slots: number[] }>;
  releaseSlot(slot: number): Promise<void>;
  /**
   * A dispatcher's wake-up (an append's kick, the cron): advance({ coalesce: true, eventNames })
   * and then claimSlots(slots). The advance's re-check for the kicks others left meanwhile runs
   * beside the slot claim (the caller's own events are enqueued before it), so an append's
   * events reach a consumer one statement sooner; when the re-check enqueued more and slots
   * are left, they are claimed too.
   */
  kick(options: {
    eventNames?: string[];
    slots: Parameters<Corq["claimSlots"]>[0];
  }): Promise<{ advanced: Record<string, number>; ready: [string, number][]; slots: number[] }>;
  /** Ready and leased keys per unpaused subscription, each counted up to `cap` (for dispatchers). */
  readyKeys(cap: number): Promise<Record<string, { kind: "code" | "push"; ready: number; leased: number }>>;
  stats(): Promise<{ subscriptions: SubscriptionStats[]; log: { head: number | null; events: number } }>;
  subscription(name: string): Promise<SubscriptionStats>;
  keys(subscription: string, options?: { status?: KeyStatus; after?: string; limit?: number }): Promise<KeyState[]>;
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
   * get new, higher seqs and `replay: true`. See README, "Rewind and replay".
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
  /** The newest events of the log, newest first (for display; readLog is the safe cursor read). */
  logTail(options?: { limit?: number }): Promise<StoredEvent[]>;
  /** What GET /metrics shows (src/metrics.ts renders it as Prometheus text): 3 statements. */
  metrics(): Promise<MetricsSnapshot>;
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
  close(): Promise<void>;
}

const limit = (max: number, fallback: number) => z.number().int().min(1).max(max).default(fallback);
const appendOptions = z.object({ expectedVersion: expectedVersionSchema.optional() });
const readStreamOptions = z.object({ from: z.number().int().min(0).default(0), limit: limit(10_000, 1000) });
const readLogOptions = z.object({ after: z.number().int().min(0).default(0), limit: limit(10_000, 1000) });
const keysOptions = z.object({
  status: z.enum(["ready", "leased", "backoff", "dead", "paused", "idle"]).optional(),
  after: z.string().optional(),
  limit: limit(1000, 100),
});
const deadLetterOptions = z.object({
  subscription: subscriptionName.optional(),
  limit: limit(1000, 100),
  withEvent: z.boolean().default(false),
});
const HOUR_MS = 3_600_000;
const activityOptions = z.object({
  subscription: subscriptionName.optional(),
  sinceMs: z
    .number()
    .int()
    .min(1)
    .max(24 * HOUR_MS)
    .default(300_000),
  limit: limit(10_000, 1000),
});
const throughputOptions = z
  .object({
    windowMs: z
      .number()
      .int()
      .min(1000)
      .max(24 * HOUR_MS)
      .default(300_000),
    bucketMs: z.number().int().min(10_000).max(HOUR_MS).multipleOf(10_000).default(10_000),
  })
  .refine((o) => o.windowMs / o.bucketMs <= 1000, "at most 1,000 buckets");
const pruneOptions = z.object({ olderThanMs: z.number().int().min(0).default(900_000) });
const logTailOptions = z.object({ limit: limit(1000, 50) });
/** Keys a drain claims per statement when not told (bench/RESULTS.md, "Keys per claim"). */
export const DEFAULT_KEYS_PER_CLAIM = 16;
export const MAX_KEYS_PER_CLAIM = 256;
const drainOptions = z.object({
  budgetMs: z.number().int().min(0).max(900_000).default(10_000),
  maxBatches: z.number().int().min(1).default(1_000_000),
  keysPerClaim: z.number().int().min(1).max(MAX_KEYS_PER_CLAIM).default(DEFAULT_KEYS_PER_CLAIM),
});
const slotNumber = z.number().int().min(1).max(1000);
const slotOptions = z.object({
  max: slotNumber,
  want: z.number().int().min(0).max(1000),
  holdMs: z.number().int().min(1).max(3_600_000),
  codeSubscriptions: z.array(subscriptionName).max(1000),
});
const rewindOptions = z.object({
  to: z.union([z.literal("beginning"), z.number().int().min(1).max(Number.MAX_SAFE_INTEGER)]),
  key: correlationKey.optional(),
});
const releaseOptions = z.object({
  subscription: subscriptionName,
  key: correlationKey.optional(),
  mode: z.enum(["retry", "skip"]).default("retry"),
  webhookId: z.string().min(1).max(200).optional(),
});

export function createCorq(options: CorqOptions): Corq {
  const code = parseSubscriptions(options.subscriptions ?? []);
  const appMigrations = parseAppMigrations(options.migrations ?? []);
  const advanceBatchSize = parseOrThrow(
    limit(100_000, 5000),
    options.advanceBatchSize,
    "invalid_config",
    "advanceBatchSize",
  );
  const statementOptions = { onStatement: options.onStatement };
  const notify = options.notify === true;
  const { executor, end } = connect(options);
  // NOTIFY after an append's commit, coalesced: one in flight, one more after it (CorqOptions.notify)
  let waking: Promise<void> | undefined;
  let wakeAgain = false;
  const wakeAfterCommit = () => {
    if (waking) {
      wakeAgain = true;
      return;
    }
    waking = (async () => {
      do {
        wakeAgain = false;
        // a hint: a lost one costs latency only (listeners re-check on their safety net)
        await (await executor()).run(notifyWake("append")).catch(() => undefined);
      } while (wakeAgain);
    })().finally(() => {
      waking = undefined;
    });
  };
  const pushAllowPrivate = options.pushAllowPrivate ?? globalThis.process?.env?.CORQ_PUSH_ALLOW_PRIVATE === "true";
  const pushTransport = createPushTransport({ allowPrivate: pushAllowPrivate });
  const holder =
    parseOrThrow(z.string().min(1).max(200).optional(), options.holder, "invalid_config", "holder") ?? defaultHolder();

  // a code subscription this instance does not define is orphaned: its code is gone (or
  // lives in another deployment); operators may delete it
  const described = (row: StatsRow): SubscriptionStats => ({
    ...toSubscriptionStats(row),
    orphaned: row.kind === "code" && !code.has(row.name),
  });

  const knownSubscription = async (name: string, db?: Executor): Promise<SubscriptionStats> => {
    parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
    const [row] = await (db ?? (await executor())).run<StatsRow>(subscriptionStats(name));
    if (!row) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
    return described(row);
  };

  const pausedTo = async (name: string, paused: boolean) => {
    parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
    const rows = await (await executor()).run(setPaused(name, paused));
    if (rows.length === 0) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
  };

  const corq: Corq = {
    async migrate() {
      const db = await executor();
      const applied = await migrate(db);
      applied.push(...(await applyAppMigrations(db, appMigrations)));
      await syncCodeSubscriptions(db, code);
      return { applied };
    },

    async append(stream, events, appendOpts = {}) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const input = parseEvents(events);
      const { expectedVersion } = parseOrThrow(
        appendOptions,
        { expectedVersion: appendOpts.expectedVersion },
        "invalid_input",
        "options",
      );
      const db = appendOpts.tx ? createExecutor(appendOpts.tx, statementOptions) : await executor();
      // an append in a transaction of our own that was refused for order (see appendEvents)
      // is simply run again: a new transaction is newer than the append it waited for
      for (let attempt = 1; ; attempt++) {
        const [row] = await db.run<AppendRow>(
          appendEvents(stream, input, expectedVersion, { notify: notify && appendOpts.tx !== undefined }),
        );
        if (row.version !== null) {
          if (notify && !appendOpts.tx) wakeAfterCommit();
          return { stream, version: row.version, positions: row.positions.map(Number) };
        }
        const [head] = await db.run<StreamHeadRow>(streamHead(stream));
        const current = head?.version ?? null;
        const versionHeld = expectedVersion === undefined || (current ?? -1) === expectedVersion;
        if (!versionHeld) {
          const actual = current === null ? "does not exist" : `is at version ${current}`;
          throw new CorqError("version_conflict", `stream "${stream}" ${actual}, expected ${expectedVersion}`, {
            details: { stream, expectedVersion, actualVersion: current ?? -1 },
            extra: { currentVersion: current },
          });
        }
        if (appendOpts.tx || attempt === 3) {
          throw new CorqError(
            "order_conflict",
            `stream "${stream}" has an event from a newer transaction than this one; append again in a new transaction ` +
              "(within a stream, events are delivered in version order)",
            { details: { stream }, extra: { currentVersion: current } },
          );
        }
      }
    },

    async readStream(stream, readOpts = {}) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const { from, limit: max } = parseOrThrow(readStreamOptions, readOpts, "invalid_input", "options");
      const rows = await (await executor()).run<EventRow>(readStream(stream, from, max));
      return rows.map(toStoredEvent);
    },

    async readLog(readOpts = {}) {
      const { after, limit: max } = parseOrThrow(readLogOptions, readOpts, "invalid_input", "options");
      const db = await executor();
      const rows = await db.run<EventRow>(readLog(after, max));
      if (rows.length === 0 && after > 0 && (await db.run(eventExists(after))).length === 0) {
        throw new CorqError("invalid_input", `after: no event at position ${after}`);
      }
      const events = rows.map(toStoredEvent);
      return { events, next: events.length > 0 ? events[events.length - 1].position : null };
    },

    async advance(advanceOpts = {}) {
      return advance(await executor(), code, {
        batchSize: advanceBatchSize,
        coalesce: advanceOpts.coalesce === true,
        eventNames: advanceOpts.eventNames,
      });
    },

    async consume(name) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      return consumeOne(await executor(), { name, code: code.get(name), holder }, corq);
    },

    async drain(name, drainOpts = {}) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const { stop, abort, ...limits } = drainOpts;
      const { budgetMs, maxBatches, keysPerClaim } = parseOrThrow(drainOptions, limits, "invalid_input", "options");
      const results = await drainKeys(await executor(), { name, code: code.get(name), holder }, corq, {
        deadline: Date.now() + budgetMs,
        maxBatches,
        keysPerClaim,
        stop,
        abort,
      });
      return {
        first: results[0] ?? null,
        batches: results.length,
        events: results.reduce((sum, r) => sum + r.events, 0),
      };
    },

    async claimSlots(slotOpts) {
      return claimSlots(await executor(), parseOrThrow(slotOptions, slotOpts, "invalid_input", "options"));
    },

    async kick(kickOpts) {
      const slotOpts = parseOrThrow(slotOptions, kickOpts.slots, "invalid_input", "slots");
      const db = await executor();
      const first = await advanceOnce(db, code, {
        batchSize: advanceBatchSize,
        coalesce: true,
        eventNames: kickOpts.eventNames,
      });
      const total = () => Object.values(first.advanced).reduce((sum, n) => sum + n, 0);
      const enqueuedFirst = total();
      const [claimed, rechecked] = await Promise.allSettled([claimSlots(db, slotOpts), first.recheck()]);
      if (claimed.status === "rejected") throw claimed.reason;
      const plan = claimed.value;
      if (rechecked.status === "rejected") {
        for (const slot of plan.slots) await db.run(releaseConsumerSlot(slot)).catch(() => undefined);
        throw rechecked.reason;
      }
      // the re-check enqueued others' events after the claim counted ready keys: slots for them
      const left = slotOpts.want - plan.slots.length;
      if (total() > enqueuedFirst && left > 0) {
        const more = await claimSlots(db, { ...slotOpts, want: left, covered: plan.slots.length });
        return { advanced: first.advanced, ready: more.ready, slots: [...plan.slots, ...more.slots] };
      }
      return { advanced: first.advanced, ...plan };
    },

    async releaseSlot(slot) {
      await (await executor()).run(releaseConsumerSlot(parseOrThrow(slotNumber, slot, "invalid_input", "slot")));
    },

    async readyKeys(cap) {
      parseOrThrow(limit(10_000, 8), cap, "invalid_input", "cap");
      const rows = await (await executor()).run<{ name: string; kind: "code" | "push"; ready: number; leased: number }>(
        readyKeys(cap),
      );
      return Object.fromEntries(rows.map((r) => [r.name, { kind: r.kind, ready: r.ready, leased: r.leased }]));
    },

    async stats() {
      const db = await executor();
      const rows = await db.run<StatsRow>(subscriptionStats());
      const [head] = await db.run<{ head: string | null; events: string }>(logHead());
      return {
        subscriptions: rows.map(described),
        log: { head: head.head === null ? null : Number(head.head), events: Number(head.events) },
      };
    },

    subscription: knownSubscription,

    async keys(name, keyOpts = {}) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const parsed = parseOrThrow(keysOptions, keyOpts, "invalid_input", "options");
      const rows = await (await executor()).run<KeyRow>(listKeys(name, parsed));
      if (rows.length === 0) await knownSubscription(name); // empty page, or no such subscription?
      return rows.map(toKeyState);
    },

    async key(name, key) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      parseOrThrow(correlationKey, key, "invalid_input", "key");
      const [row] = await (await executor()).run<KeyRow>(listKeys(name, { only: key, limit: 1 }));
      if (row) return toKeyState(row);
      await knownSubscription(name);
      throw new CorqError("unknown_key", `subscription "${name}" has no key "${key}"`);
    },

    async pauseKey(name, key) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      parseOrThrow(correlationKey, key, "invalid_input", "key");
      const rows = await (await executor()).run(pauseKey(name, key));
      if (rows.length === 0) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
      return corq.key(name, key);
    },

    async resumeKey(name, key) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      parseOrThrow(correlationKey, key, "invalid_input", "key");
      await (await executor()).run(resumeKey(name, key));
      return corq.key(name, key); // when nothing was resumed: says which is unknown, the subscription or the key
    },

    async rewind(name, rewindOpts) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const { to, key } = parseOrThrow(rewindOptions, rewindOpts, "invalid_input", "options");
      const db = await executor();
      const done = await rewindSubscription(db, { subscription: name, to, key }, { code: code.get(name) });
      // advances that came while the rewind held the advancer's lock left a kick and returned
      if ((await db.run(kicksPending([done.subscriptionId]))).length > 0) await corq.advance({ coalesce: true });
      return { requeued: done.requeued };
    },

    async deadLetters(deadOpts = {}) {
      const {
        subscription,
        limit: max,
        withEvent,
      } = parseOrThrow(deadLetterOptions, deadOpts, "invalid_input", "options");
      const rows = await (await executor()).run<DeadLetterRow>(listDeadLetters(subscription, max, withEvent));
      return rows.map((r) => toDeadLetter(r, withEvent));
    },

    async releaseDeadLetters(releaseOpts) {
      const { subscription, key, mode, webhookId } = parseOrThrow(
        releaseOptions,
        releaseOpts,
        "invalid_input",
        "options",
      );
      const release = async (db: Executor) => {
        const rows = await db.run(releaseDeadKeys(subscription, key, mode));
        if (rows.length === 0) await knownSubscription(subscription, db); // nothing dead, or no such subscription?
        return { released: rows.length };
      };
      const db = await executor();
      if (!webhookId) return release(db);
      // with a webhook id: the id is recorded in the same transaction, so a replay finds it and
      // a release that fails (even as unknown_subscription) leaves it unrecorded: the sender's
      // retry with the same id is not taken for a replay
      return db.transaction(async (tx) => {
        if ((await tx.run(rememberWebhookId(webhookId))).length === 0) {
          throw new CorqError("conflict", `webhook ${webhookId} was already processed`);
        }
        return release(tx);
      });
    },

    async putSubscription(name, input) {
      parseOrThrow(subscriptionName, name, "invalid_input", "name");
      const settings = parsePushSubscription(input, { allowPrivate: pushAllowPrivate });
      if (code.has(name)) throw new CorqError("conflict", `subscription "${name}" is defined in code`);
      const generated = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(24))))}`;
      const { secret: given, ...deliver } = settings.deliver;
      const events = settings.events.includes("*") ? ["*"] : [...new Set(settings.events)];
      const [row] = await (await executor()).run<PutRow>(
        putSubscription({ ...settings, name, events }, deliver, { given, generated }),
      );
      if (!row) throw new CorqError("conflict", `subscription "${name}" is defined in code`);
      const subscription = await knownSubscription(name);
      return row.created
        ? { created: true, subscription, secret: given ?? generated }
        : { created: false, subscription };
    },

    async deleteSubscription(name) {
      parseOrThrow(subscriptionName, name, "invalid_input", "name");
      const row = await (await executor()).transaction(async (tx) => {
        const [found] = await tx.run<{ kind: string; removed: number | null }>(
          deleteSubscription(name, code.has(name) ? "keep" : "delete"),
        );
        if (found?.removed != null) await tx.run(deleteSubscriptionRows(found.removed));
        return found;
      });
      if (!row) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
      if (row.removed === null)
        throw new CorqError("conflict", `subscription "${name}" is defined in code; remove it there`);
    },

    pause: (name) => pausedTo(name, true),
    resume: (name) => pausedTo(name, false),

    async activity(activityOpts = {}) {
      const {
        subscription,
        sinceMs,
        limit: max,
      } = parseOrThrow(activityOptions, activityOpts, "invalid_input", "options");
      const rows = await (await executor()).run<BatchRow>(recentBatches(subscription, sinceMs, max));
      return rows.map(toBatchRecord);
    },

    async throughput(throughputOpts = {}) {
      const { windowMs, bucketMs } = parseOrThrow(throughputOptions, throughputOpts, "invalid_input", "options");
      const buckets = Math.ceil(windowMs / bucketMs);
      const rows = await (await executor()).run<{ subscription: string; bucket: number | null; events: string | null }>(
        ackedPerBucket(windowMs, bucketMs),
      );
      const series: Record<string, number[]> = {};
      for (const r of rows) {
        series[r.subscription] ??= new Array(buckets).fill(0);
        if (r.bucket !== null && r.bucket < buckets)
          series[r.subscription][buckets - 1 - r.bucket] = (Number(r.events) * 1000) / bucketMs;
      }
      return series;
    },

    async pruneActivity(pruneOpts = {}) {
      const { olderThanMs } = parseOrThrow(pruneOptions, pruneOpts, "invalid_input", "options");
      const [row] = await (await executor()).run<{ pruned: number }>(pruneActivity(olderThanMs));
      return row;
    },

    async logTail(tailOpts = {}) {
      const { limit: max } = parseOrThrow(logTailOptions, tailOpts, "invalid_input", "options");
      return (await (await executor()).run<EventRow>(logTail(max))).map(toStoredEvent);
    },

    async metrics() {
      const db = await executor();
      const [stats, [head], durations] = await Promise.all([
        db.run<StatsRow>(subscriptionStats()),
        db.run<{ head: string | null }>(logPosition()),
        db.run<BatchDurationRow>(listBatchDurations()),
      ]);
      return {
        subscriptions: stats.map(described),
        log: { head: head.head === null ? null : Number(head.head) },
        batchDurations: durations.map((r) => ({
          subscription: r.subscription,
          outcome: r.outcome,
          le: Number(r.le),
          batches: Number(r.batches),
          events: Number(r.events),
          seconds: Number(r.seconds),
        })),
      };
    },

    async createToken(input) {
      const { name, scopes, streamPrefix } = parseOrThrow(tokenInput, input, "invalid_input", "token");
      const secret = newTokenSecret();
      const [row] = await (await executor()).run<TokenRow>(
        insertToken({ name, scopes, streamPrefix, hash: await tokenHash(secret) }),
      );
      return { ...toTokenInfo(row), token: secret };
    },

    async listTokens() {
      return (await (await executor()).run<TokenRow>(listTokens())).map(toTokenInfo);
    },

    async revokeToken(id) {
      parseOrThrow(tokenId, id, "invalid_input", "id");
      const rows = await (await executor()).run(deleteToken(id));
      if (rows.length === 0) throw new CorqError("unknown_token", `no token with id ${id}`);
    },

    async verifyToken(secret) {
      if (typeof secret !== "string" || !looksLikeTokenSecret(secret)) return null;
      const [row] = await (await executor()).run<TokenRow>(verifyToken(await tokenHash(secret)));
      return row ? toTokenInfo(row) : null;
    },

    async close() {
      await waking;
      await end();
      await pushTransport.close();
    },
  };
  registerPushTransport(corq, pushTransport);
  return corq;
}

/** Who this instance's consumers are when the caller does not say: the process, or else a random invocation id. */
function defaultHolder(): string {
  const id = crypto.randomUUID().slice(0, 8);
  const pid = globalThis.process?.pid;
  const host = globalThis.process?.env?.HOSTNAME;
  return typeof pid === "number" && pid > 1 ? `process ${pid}${host ? ` on ${host}` : ""} (${id})` : `invocation ${id}`;
}

// A variable specifier keeps bundlers (wrangler's esbuild) from pulling node-postgres into the
// Worker, which always passes its own Neon pool as `db`.
const NODE_POSTGRES = "pg";

/** Lazily opens the connection (pg is imported on first use, so Workers never load it). */
function connect(options: CorqOptions): { executor: () => Promise<Executor>; end: () => Promise<void> } {
  const statementOptions = { onStatement: options.onStatement };
  if (options.db) {
    const db = options.db as Connection & { $client?: Connection };
    const transactional = (options.subscriptions ?? []).filter((s) => s.transactional === true);
    if (transactional.length > 0 && !lendsConnections(db.$client ?? db, options.session))
      throw new CorqError(
        "invalid_config",
        `subscription "${transactional[0].name}" is transactional: its batches need connections of their own — ` +
          "pass a pool (databaseUrl, a pg or Neon Pool, a drizzle database over one) or a neon() function with a session",
      );
    const executor = createExecutor(db.$client ?? db, { ...statementOptions, session: options.session });
    return { executor: async () => executor, end: async () => undefined };
  }
  if (!options.databaseUrl) throw new CorqError("invalid_config", "createCorq needs databaseUrl or db");
  const databaseUrl = options.databaseUrl;
  let pool: PoolLike | undefined;
  let opened: Promise<Executor> | undefined;
  const nodePostgres = (max: number) =>
    import(/* @vite-ignore */ NODE_POSTGRES).then(({ default: pg }: typeof import("pg")) => {
      const created = new pg.Pool({ connectionString: databaseUrl, max });
      // An idle client that loses its connection emits 'error'; the pool replaces it.
      created.on("error", () => undefined);
      return created as unknown as PoolLike;
    });
  return {
    executor: () =>
      (opened ??=
        options.driver === "neon-http"
          ? Promise.all([import("@neondatabase/serverless"), nodePostgres(options.poolSize ?? 10)]).then(
              ([{ neon }, session]) => {
                // connections opened only when needed (pg opens them lazily and closes them after
                // 10 s idle): for the rare interactive transaction, and one per batch of a
                // transactional handler running at that moment
                pool = session;
                return createExecutor(neon(databaseUrl), { ...statementOptions, session: (use) => use(session) });
              },
            )
          : nodePostgres(options.poolSize ?? 10).then((created) => {
              pool = created;
              return createExecutor(created, { ...statementOptions, prepare: true });
            })),
    end: async () => {
      await pool?.end?.();
      pool = undefined;
      opened = undefined;
    },
  };
}

/** The dispatcher's plan (claimConsumerSlots), decoded: subscriptions with ready keys and the slots claimed. */
async function claimSlots(
  db: Executor,
  options: { max: number; want: number; holdMs: number; codeSubscriptions: string[]; covered?: number },
): Promise<{ ready: [string, number][]; slots: number[] }> {
  const rows = await db.run<ConsumerPlanRow>(claimConsumerSlots(options));
  return {
    ready: rows.flatMap((row) => (row.name === null ? [] : [[row.name, row.ready ?? 0] as [string, number]])),
    slots: rows.flatMap((row) => (row.slot === null ? [] : [row.slot])).sort((a, b) => a - b),
  };
}
