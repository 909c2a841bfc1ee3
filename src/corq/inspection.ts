// Inspection: keys, dead letters, the activity record (the dashboard's timeline and throughput), metrics,
// and the doctor (src/doctor.ts).
import { z } from "zod";
import { correlationKey, parseOrThrow, subscriptionName } from "../config.js";
import { CorqError, present } from "../errors.js";
import { DEFAULT_HELD_OVER_MS, diagnose } from "../doctor.js";
import { migrations } from "../db/migrations.js";
import {
  ACTIVITY_KEPT_MS,
  ackedPerBucket,
  batchCounts,
  logTail,
  pruneActivity,
  recentBatches,
  timelineBatches,
  toBatchRecord,
  type BatchRow,
} from "../sql/activity/activity.js";
import { toStoredEvent, type EventRow } from "../sql/common/eventColumns.js";
import { listBatchDurations, type BatchDurationRow } from "../sql/inspect/batchDurations.js";
import {
  appliedMigrations,
  heldHorizons,
  serverState,
  subscriptionHealth,
  tableVacuum,
  type HeldHorizonRow,
  type ServerStateRow,
  type SubscriptionHealthRow,
  type TableVacuumRow,
} from "../sql/inspect/doctor.js";
import { listDeadLetters, toDeadLetter, type DeadLetterRow } from "../sql/inspect/listDeadLetters.js";
import { keysInFlight, listKeys, toKeyState, type KeyRow } from "../sql/inspect/listKeys.js";
import { subscriptionStats, type StatsRow } from "../sql/inspect/subscriptionStats.js";
import {
  listAlertCounters,
  listSubscriptionCounters,
  logCounters,
  type AlertCounterRow,
  type LogCountersRow,
  type SubscriptionCounterRow,
} from "../sql/inspect/counters.js";
import type { BatchRecord, Corq, KeyState } from "../types.js";
import { limit, type PartDeps } from "./options.js";
import { describeSubscription, type KnownSubscription } from "./subscriptions.js";

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
const pruneOptions = z.object({ olderThanMs: z.number().int().min(0).default(ACTIVITY_KEPT_MS) });
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
const doctorOptions = z.object({
  heldOverMs: z
    .number()
    .int()
    .min(0)
    .max(366 * 24 * HOUR_MS)
    .default(DEFAULT_HELD_OVER_MS),
});
/** Bars of the timeline: at most this many slots across the window, and this many bars in all. */
const TIMELINE_SLOTS = 300;
const TIMELINE_BARS = 10_000;

export function createInspection({
  executor,
  settings,
  subscription: knownSubscription,
}: PartDeps & {
  /** A subscription's stats, or unknown_subscription: what an empty page or a missing key is told apart by. */
  subscription: KnownSubscription;
}): Pick<
  Corq,
  | "keys"
  | "keyPage"
  | "key"
  | "deadLetters"
  | "activity"
  | "throughput"
  | "pruneActivity"
  | "logTail"
  | "timeline"
  | "metrics"
  | "doctor"
> {
  // the keys in flight are read (one more statement) only for a page with a ready key of a capped subscription
  const keyStates = async (name: string, rows: KeyRow[]): Promise<KeyState[]> => {
    const capped = rows.some((row) => row.max_leased_keys !== null && row.status === "ready");
    const [slots] = capped ? await (await executor()).run<{ in_flight: number }>(keysInFlight(name)) : [];
    return rows.map((row) => toKeyState(row, slots?.in_flight));
  };

  const keyPage: Corq["keyPage"] = async (name, keyOpts = {}) => {
    parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
    const parsed = parseOrThrow(keysOptions, keyOpts, "invalid_input", "options");
    // one row more than the page: whether a next page exists, without an empty last page
    const rows = await (await executor()).run<KeyRow>(listKeys(name, { ...parsed, limit: parsed.limit + 1 }));
    if (rows.length === 0) await knownSubscription(name); // empty page, or no such subscription?
    const keys = await keyStates(name, rows.slice(0, parsed.limit));
    return { keys, next: rows.length > parsed.limit ? (keys.at(-1)?.key ?? null) : null };
  };

  return {
    async keys(name, keyOpts = {}) {
      return (await keyPage(name, keyOpts)).keys;
    },

    keyPage,

    async key(name, key) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      parseOrThrow(correlationKey, key, "invalid_input", "key");
      const [row] = await (await executor()).run<KeyRow>(listKeys(name, { only: key, limit: 1 }));
      if (row) return present((await keyStates(name, [row]))[0], "the key's state");
      await knownSubscription(name);
      throw new CorqError("unknown_key", `subscription "${name}" has no key "${key}"`);
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
      const [stats, [logRow], durations, counters, alertCounts] = await Promise.all([
        db.run<StatsRow>(subscriptionStats()),
        db.run<LogCountersRow>(logCounters()),
        db.run<BatchDurationRow>(listBatchDurations()),
        db.run<SubscriptionCounterRow>(listSubscriptionCounters()),
        db.run<AlertCounterRow>(listAlertCounters()),
      ]);
      const { head, appended } = present(logRow, "the log counters row");
      return {
        subscriptions: stats.map((row) => describeSubscription(row, settings.code)),
        log: { head: head === null ? null : Number(head), appended: Number(appended) },
        counters: counters.map((r) => ({
          subscription: r.subscription,
          batchesExpired: Number(r.batches_expired),
          batchesPostponed: Number(r.batches_postponed),
          keysDeadLettered: Number(r.keys_dead_lettered),
        })),
        alerts: alertCounts.map((r) => ({ alert: r.alert, sent: Number(r.sent), failed: Number(r.failed) })),
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

    async doctor(doctorOpts = {}) {
      const { heldOverMs } = parseOrThrow(doctorOptions, doctorOpts, "invalid_input", "options");
      const db = await executor();
      const [horizons, applied, tables, [server]] = await Promise.all([
        db.run<HeldHorizonRow>(heldHorizons(heldOverMs)),
        db.run<{ tag: string }>(appliedMigrations()).then(
          (rows) => rows.map((row) => row.tag),
          (error: unknown) => {
            // never migrated: that is the finding
            if ((error as { code?: unknown }).code === "42P01") return null;
            throw error;
          },
        ),
        db.run<TableVacuumRow>(tableVacuum()),
        db.run<ServerStateRow>(serverState()),
      ]);
      const known = migrations.map((m) => m.tag);
      // the subscriptions' columns are there only when every migration of this corq is
      const current = applied !== null && known.every((tag) => applied.includes(tag));
      const subscriptions = current ? await db.run<SubscriptionHealthRow>(subscriptionHealth()) : null;
      return diagnose({
        horizons,
        applied,
        known,
        subscriptions,
        code: new Set(settings.code.keys()),
        tables,
        server: present(server, "the server state row"),
      });
    },
  };
}
