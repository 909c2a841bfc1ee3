import { CorqError, present } from "./errors.js";
import { createExecutor, lendsConnections, type Connection, type Executor, type PoolLike } from "./db/executor.js";
import { migrate } from "./db/migrate.js";
import { applyAppMigrations, parseAppMigrations } from "./db/appMigrations.js";
import {
  expectedVersion as expectedVersionSchema,
  INT4_MAX,
  parseEvents,
  parseOrThrow,
  parseSubscriptions,
  uniqueStreams,
  correlationKey,
  parsePushSubscription,
  streamName,
  subscriptionName,
} from "./config.js";
import { z } from "zod";
import { advanceOnce, syncCodeSubscriptions } from "./advance.js";
import { consumeOne, drainKeys } from "./consume.js";
import { createPushTransport, registerPushTransport } from "./pushTransport.js";
import { appendEvents, streamHead, type AppendRow, type StreamHeadRow } from "./sql/log/appendEvents.js";
import { notifyWake } from "./sql/log/notify.js";
import { readStream } from "./sql/log/readStream.js";
import { eventExists, readLog } from "./sql/log/readLog.js";
import { toStoredEvent, type EventRow } from "./sql/common/eventColumns.js";
import { logHead, logPosition, subscriptionStats } from "./sql/inspect/subscriptionStats.js";
import { listBatchDurations, type BatchDurationRow } from "./sql/inspect/batchDurations.js";
import { listKeys } from "./sql/inspect/listKeys.js";
import { listDeadLetters } from "./sql/inspect/listDeadLetters.js";
import {
  ackedPerBucket,
  batchCounts,
  logTail,
  pruneActivity,
  recentBatches,
  recordBatches,
  timelineBatches,
} from "./sql/activity/activity.js";
import { createBatchRecorder } from "./batchRecorder.js";
import { releaseDeadKeys } from "./sql/operate/releaseDeadKeys.js";
import { rememberWebhookId } from "./sql/consume/webhookIds.js";
import { setPaused } from "./sql/operate/setPaused.js";
import { pauseKey, resumeKey } from "./sql/operate/pauseKey.js";
import { kicksPending } from "./sql/advance/advanceSubscription.js";
import { rewindSubscription } from "./rewind.js";
import { readyKeys } from "./sql/consume/readyKeys.js";
import { eventsAboveHorizon, horizonPassed } from "./sql/advance/eventsAboveHorizon.js";
import { claimConsumerSlots, releaseConsumerSlot, type ConsumerPlanRow } from "./sql/consume/consumerSlots.js";
import {
  deleteSubscription,
  deleteSubscriptionRows,
  putSubscription,
  type PutRow,
} from "./sql/operate/putSubscription.js";
import { deleteToken, insertToken, listTokens, verifyToken, type TokenRow } from "./sql/operate/tokens.js";
import { looksLikeTokenSecret, newTokenSecret, tokenHash, tokenId, tokenInput } from "./tokens.js";
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
import type { BatchRecord, Corq, CorqOptions, SubscriptionStats } from "./types.js";
import type { CorqRuntime } from "./runtimeTypes.js";

const limit = (max: number, fallback: number) => z.number().int().min(1).max(max).default(fallback);
const appendOptions = z.object({ expectedVersion: expectedVersionSchema.optional() });
const readyKeysCap = limit(10_000, 8);
// bounds as the columns hold them: a version is an int4, a position a bigint (read as a JSON number)
const readStreamOptions = z.object({
  from: z.number().int().min(0).max(INT4_MAX).default(0),
  limit: limit(10_000, 1000),
});
const readLogOptions = z.object({
  after: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  limit: limit(10_000, 1000),
});
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
const logTailOptions = z.object({
  before: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  limit: limit(1000, 50),
});
const timelineOptions = z.object({
  subscription: subscriptionName.optional(),
  sinceMs: z
    .number()
    .int()
    .min(1000)
    .max(24 * HOUR_MS)
    .default(300_000),
  maxKeys: z.number().int().min(1).max(200).default(40),
});
/** Bars of the timeline: at most this many slots across the window, and this many bars in all. */
const TIMELINE_SLOTS = 300;
const TIMELINE_BARS = 10_000;
/** Keys a drain claims per statement when not told (bench/RESULTS.md, "Keys per claim"). */
export const DEFAULT_KEYS_PER_CLAIM = 16;
export const MAX_KEYS_PER_CLAIM = 256;
const drainOptions = z.object({
  budgetMs: z.number().int().min(0).max(900_000).default(10_000),
  maxBatches: z.number().int().min(1).default(1_000_000),
  keysPerClaim: z.number().int().min(1).max(MAX_KEYS_PER_CLAIM).default(DEFAULT_KEYS_PER_CLAIM),
  // at least one: a consumer that never takes a replaying key would leave a replay to others
  replayKeys: z.number().int().min(1).max(MAX_KEYS_PER_CLAIM).optional(),
});
const slotNumber = z.number().int().min(1).max(1000);
/** a transaction id (xid8) as text */
const xid = z.string().regex(/^\d{1,20}$/);
const slotOptions = z.object({
  max: slotNumber,
  want: z.number().int().min(0).max(1000),
  holdMs: z.number().int().min(1).max(3_600_000),
  codeSubscriptions: z.array(subscriptionName).max(1000),
  covered: z.number().int().min(0).max(1000).optional(),
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

/** The library: corq on a database, as users call it (src/index.ts). */
export function createCorq(options: CorqOptions): Corq {
  return createCorqRuntime(options);
}

/** The same, with what the runtimes drive (consumer slots, kicks, the horizon probe): src/internal.ts. */
export function createCorqRuntime(options: CorqOptions): CorqRuntime {
  const code = parseSubscriptions(options.subscriptions ?? []);
  const appMigrations = parseAppMigrations(options.migrations ?? []);
  const advanceBatchSize = parseOrThrow(
    limit(100_000, 5000),
    options.advanceBatchSize,
    "invalid_config",
    "advanceBatchSize",
  );
  const statementOptions = { onStatement: options.onStatement };
  const activityFlushMs = parseOrThrow(
    z.number().int().min(0).max(60_000).default(0),
    options.activityFlushMs,
    "invalid_config",
    "activityFlushMs",
  );
  const notify = options.notify === true;
  const { executor, end } = connect(options);
  const recorder = createBatchRecorder(async (records) => (await executor()).run(recordBatches(records)), {
    holdMs: activityFlushMs,
  });
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
        // a hint: a lost one costs latency only (listeners re-check on their safety net). Once
        // more on failure: after a database restart the pool's idle connections are dead, and
        // the first statement on one fails (the pool then drops it; the second gets a new one)
        const send = async () => {
          await (await executor()).run(notifyWake("append"));
        };
        await send()
          .catch(send)
          .catch(() => undefined);
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

  const corq: CorqRuntime = {
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
      // Twice at most, for an append in a transaction of its own with an expectedVersion: the
      // statement's snapshot predates its wait for the stream, so an append that committed
      // meanwhile can leave it comparing with a stale version — refused, though the version it
      // waited for is the one expected. Run again, it sees the stream as it is now.
      for (let attempt = 1; ; attempt++) {
        const [appended] = await db.run<AppendRow>(
          appendEvents(stream, input, { expectedVersion, notify: notify && appendOpts.tx !== undefined }),
        );
        const row = present(appended, "the append's result row");
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
        // refused for order: only a caller's transaction can be older than the stream's last
        // append (appendEvents takes an append's own transaction id once the stream's turn came)
        if (appendOpts.tx || attempt === 2)
          throw new CorqError(
            "order_conflict",
            `stream "${stream}" has an event from a newer transaction than this one; append again in a new transaction ` +
              "(within a stream, events are delivered in version order)",
            { details: { stream }, extra: { currentVersion: current } },
          );
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
      return { events, next: events.at(-1)?.position ?? null };
    },

    async advance(advanceOpts = {}) {
      const first = await advanceOnce(await executor(), code, {
        batchSize: advanceBatchSize,
        coalesce: advanceOpts.coalesce === true,
        eventNames: advanceOpts.eventNames,
      });
      if (advanceOpts.coalesce !== true || (advanceOpts.recheckIf?.() ?? true)) await first.recheck();
      return first.advanced;
    },

    async consume(name) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      return consumeOne({ executor: await executor(), target: { name, code: code.get(name), holder }, corq });
    },

    async drain(name, drainOpts = {}) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const { stop, abort, ...limits } = drainOpts;
      const { budgetMs, maxBatches, keysPerClaim, replayKeys } = parseOrThrow(
        drainOptions,
        limits,
        "invalid_input",
        "options",
      );
      const consumer = { executor: await executor(), target: { name, code: code.get(name), holder }, corq };
      const results = await drainKeys(consumer, {
        recorder,
        deadline: Date.now() + budgetMs,
        maxBatches,
        keysPerClaim,
        replayKeys,
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
      // a failure after the claim gives its slots back (they would be held for holdMs)
      const giveBack = async (reason: unknown) => {
        for (const slot of plan.slots) await db.run(releaseConsumerSlot(slot)).catch(() => undefined);
        throw reason;
      };
      if (rechecked.status === "rejected") return giveBack(rechecked.reason);
      // the re-check enqueued others' events after the claim counted ready keys: slots for them
      const left = slotOpts.want - plan.slots.length;
      if (total() > enqueuedFirst && left > 0) {
        const more = await claimSlots(db, {
          ...slotOpts,
          want: left,
          covered: (slotOpts.covered ?? 0) + plan.slots.length,
        }).catch(giveBack);
        return {
          advanced: first.advanced,
          ready: more.ready,
          slots: [...plan.slots, ...more.slots],
          waiting: more.waiting,
        };
      }
      return { advanced: first.advanced, ...plan };
    },

    async horizonWaiting(tx) {
      const db = await executor();
      if (tx === undefined) {
        const [row] = await db.run<{ waiting: boolean }>(eventsAboveHorizon());
        return row?.waiting === true;
      }
      const [row] = await db.run<{ passed: boolean }>(horizonPassed(parseOrThrow(xid, tx, "invalid_input", "tx")));
      return row?.passed !== true;
    },

    async releaseSlot(slot) {
      await (await executor()).run(releaseConsumerSlot(parseOrThrow(slotNumber, slot, "invalid_input", "slot")));
    },

    async readyKeys(cap) {
      parseOrThrow(readyKeysCap, cap, "invalid_input", "cap");
      const rows = await (await executor()).run<{ name: string; kind: "code" | "push"; ready: number; leased: number }>(
        readyKeys(cap),
      );
      return Object.fromEntries(rows.map((r) => [r.name, { kind: r.kind, ready: r.ready, leased: r.leased }]));
    },

    async stats() {
      const db = await executor();
      const rows = await db.run<StatsRow>(subscriptionStats());
      const [headRow] = await db.run<{ head: string | null; events: string }>(logHead());
      const head = present(headRow, "the log head row");
      return {
        subscriptions: rows.map(described),
        log: { head: head.head === null ? null : Number(head.head), events: Number(head.events) },
      };
    },

    subscription: knownSubscription,

    async keys(name, keyOpts = {}) {
      return (await corq.keyPage(name, keyOpts)).keys;
    },

    async keyPage(name, keyOpts = {}) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const parsed = parseOrThrow(keysOptions, keyOpts, "invalid_input", "options");
      // one row more than the page: whether a next page exists, without an empty last page
      const rows = await (await executor()).run<KeyRow>(listKeys(name, { ...parsed, limit: parsed.limit + 1 }));
      if (rows.length === 0) await knownSubscription(name); // empty page, or no such subscription?
      const keys = rows.slice(0, parsed.limit).map(toKeyState);
      return { keys, next: rows.length > parsed.limit ? (keys.at(-1)?.key ?? null) : null };
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
      const streams = uniqueStreams(settings.streams);
      const [row] = await (await executor()).run<PutRow>(
        putSubscription({ ...settings, name, events, streams }, deliver, { given, generated }),
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
        const perSecond = series[r.subscription] ?? new Array(buckets).fill(0);
        series[r.subscription] = perSecond;
        if (r.bucket !== null && r.bucket < buckets)
          perSecond[buckets - 1 - r.bucket] = (Number(r.events) * 1000) / bucketMs;
      }
      return series;
    },

    async pruneActivity(pruneOpts = {}) {
      const { olderThanMs } = parseOrThrow(pruneOptions, pruneOpts, "invalid_input", "options");
      const [row] = await (await executor()).run<{ pruned: number }>(pruneActivity(olderThanMs));
      return present(row, "the prune count row");
    },

    async logTail(tailOpts = {}) {
      const { before, limit: max } = parseOrThrow(logTailOptions, tailOpts, "invalid_input", "options");
      const rows = await (await executor()).run<EventRow>(logTail(max + 1, before));
      const events = rows.slice(0, max).map(toStoredEvent);
      return { events, next: rows.length > max ? (events.at(-1)?.position ?? null) : null };
    },

    async timeline(timelineOpts = {}) {
      const { subscription, sinceMs, maxKeys } = parseOrThrow(
        timelineOptions,
        timelineOpts,
        "invalid_input",
        "options",
      );
      const db = await executor();
      const slotMs = Math.max(1, Math.floor(sinceMs / TIMELINE_SLOTS));
      const [bars, counted] = await Promise.all([
        db.run<BatchRow & { batches: number }>(
          timelineBatches({ subscription, sinceMs, maxKeys, slotMs, limit: TIMELINE_BARS }),
        ),
        db.run<{ outcome: BatchRecord["outcome"]; batches: number }>(batchCounts(subscription, sinceMs)),
      ]);
      const counts = { acked: 0, failed: 0, dead: 0, expired: 0 };
      for (const row of counted) counts[row.outcome] = row.batches;
      return { bars: bars.map((row) => ({ ...toBatchRecord(row), batches: row.batches })), counts };
    },

    async metrics() {
      const db = await executor();
      const [stats, [headRow], durations] = await Promise.all([
        db.run<StatsRow>(subscriptionStats()),
        db.run<{ head: string | null }>(logPosition()),
        db.run<BatchDurationRow>(listBatchDurations()),
      ]);
      const { head } = present(headRow, "the log position row");
      return {
        subscriptions: stats.map(described),
        log: { head: head === null ? null : Number(head) },
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
      return { ...toTokenInfo(present(row, "the inserted token row")), token: secret };
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
      await recorder.close();
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
    const transactional = (options.subscriptions ?? []).find((s) => s.transactional === true);
    if (transactional !== undefined && !lendsConnections(db.$client ?? db, options.session))
      throw new CorqError(
        "invalid_config",
        `subscription "${transactional.name}" is transactional: its batches need connections of their own — ` +
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
): Promise<{ ready: [string, number][]; slots: number[]; waiting: string | null }> {
  const rows = await db.run<ConsumerPlanRow>(claimConsumerSlots(options));
  return {
    ready: rows.flatMap((row) => (row.name === null ? [] : [[row.name, row.ready ?? 0] as [string, number]])),
    slots: rows.flatMap((row) => (row.slot === null ? [] : [row.slot])).sort((a, b) => a - b),
    waiting: rows.find((row) => row.waiting !== null)?.waiting ?? null,
  };
}
