// The advancer and the consumers of one Node process (`npm run serve`), woken by LISTEN/NOTIFY
// (wakeListener.ts) instead of polling. Claims, acks and leases are the library's (Corq.drain):
// several processes on one database share the work through SKIP LOCKED and leases, with no
// coordinator.
import { setMaxListeners } from "node:events";
import type { CorqRuntime } from "../runtimeTypes.js";
import type { Executor } from "../db/executor.js";
import { CorqError, isDatabaseUnavailable, present, toError } from "../errors.js";
import { eventsAboveHorizon } from "../sql/advance/eventsAboveHorizon.js";
import { nextDue } from "../sql/consume/nextDue.js";
import { notifyWake, type WakePayload } from "../sql/log/notify.js";
import { roundRobin } from "../roundRobin.js";

export interface RunnerOptions {
  corq: CorqRuntime;
  /** For the runner's own statements (next due time, horizon, wake-ups to other processes). */
  db: Executor;
  /** Code subscriptions this process defines: it consumes those and every push subscription. */
  codeSubscriptions: string[];
  /**
   * Those of them that are transactional: drained one key per claim, because each batch in flight
   * holds a pool connection for its handler's transaction (the pool is sized per consumer).
   */
  transactionalSubscriptions?: string[];
  /** Consumers (drains running at once) in this process: CORQ_CONCURRENCY. */
  concurrency: number;
  /** Keys a drain claims per statement (CORQ_KEYS_PER_CLAIM), and of them replaying at most (CORQ_REPLAY_KEYS). */
  keysPerClaim: number;
  replayKeys: number;
  /** How long one drain keeps its slot before the slot looks across subscriptions again. */
  budgetMs: number;
  /** The safety net: advance and look for ready keys this often however quiet it is. */
  safetyNetMs: number;
  /** Retention passes: one this often, bounded to `maxChunks`; one that left more goes on at the next safety-net tick. */
  retention?: { everyMs: number; maxChunks: number };
  /** Alerts passes (Corq.checkAlerts): one this often, one at a time, each sending at most `maxSends`. */
  alerts?: { everyMs: number; maxSends: number };
  log(line: string): void;
}

export interface Runner {
  /** A notification: "append" = advance, then consume; "ready" = consume; "alerts" = an alerts pass. */
  wake(payload: Exclude<WakePayload, "tokens">): void;
  /** Everything, as after a missed notification: advance and consume; an alerts pass. */
  recheck(): void;
  /** Consumers at work right now. */
  busy(): number;
  /**
   * Graceful stop: nothing new is advanced or claimed; in-flight batches get `boundMs` to
   * finish (and be acked or failed as usual); then their handlers are aborted and get `graceMs`
   * to give up, whereupon their leases are released (never while a handler still runs). Resolves
   * with the drains that had not ended by then (their leases expire by themselves).
   */
  stop(options: { boundMs: number; graceMs: number }): Promise<{ abandoned: number }>;
}

// Retrying an advance while committed events wait above the xmin horizon: 1 ms, doubling to 1 s
// (the transactions in the way are mostly single statements: a claim or an ack, a millisecond).
const HORIZON_FIRST_MS = 1;
const HORIZON_MAX_MS = 1000;
// Quiet this long with every slot free before reading the next due time (under load the slots
// free up and fill again within milliseconds: no statement per batch for it).
const IDLE_SETTLE_MS = 20;
// A key that came due this recently is looked for at once (nextDue): it may have come due
// between the drains' last claim and the next due time's read, IDLE_SETTLE_MS apart.
const RECENTLY_DUE_MS = 250;
const HOUSEKEEPING_EVERY_MS = 60_000;
// a retention pass starts no chunk after this long (the chunk under way finishes)
const RETENTION_PASS_MS = 10_000;
const LOG_EVERY_MS = 10_000;

/**
 * The runner's loop (woken, never polling):
 *   advancer   one at a time. Woken by "append" (an append's NOTIFY), the safety net, a
 *              reconnect; runs again when woken during a run. A run that enqueued for this
 *              process starts drains on those subscriptions at once (one per keysPerClaim events, on the
 *              free slots); what does not fit is `missed` and NOTIFYs "ready" so other
 *              processes' free consumers help. Before it goes idle it checks the horizon:
 *              committed events still above it → runs again after 1, 2, 4 … ms (nobody
 *              NOTIFYs when the old transaction in the way ends).
 *   check      one at a time ("ready", timers, a slot freed after `missed`): reads ready keys
 *              per subscription and starts one drain per keysPerClaim ready keys on the free slots,
 *              subscriptions taking turns; more than fit leaves `missed`. A check never
 *              NOTIFYs (processes would wake each other forever), and with every slot busy it
 *              is not even run: `missed` is set.
 *   drain      Corq.drain: claims key after key until nothing is ready or its budget ends (then
 *              its slot checks again).
 *   idle       every slot free: one timer until the next due time (a backoff or a lease that
 *              ends), read from the database; the safety net (safetyNetMs) re-checks
 *              everything and runs housekeeping every minute (idle keys, the activity record …).
 *   alerts     a pass every alerts.everyMs (a second: a key that dies is an alert within about
 *              that) while there are alerts, one at a time, beside everything else: a receiver
 *              that is slow to answer holds up the next pass, never an advance or a drain. No
 *              alert: no pass until one is put (NOTIFY "alerts"), or the safety net.
 *   stopping   no advance, check, claim or alerts pass starts; see Runner.stop.
 * Every error is caught and logged (rate-limited): the next wake-up tries again.
 */
export function createRunner(options: RunnerOptions): Runner {
  const { corq, db, concurrency, budgetMs } = options;
  const codeNames = new Set(options.codeSubscriptions);
  const transactional = new Set(options.transactionalSubscriptions ?? []);
  // what advance() returns is already this process's: its code subscriptions and push subscriptions
  const consumable = (name: string, kind?: "code" | "push") =>
    kind === undefined || kind === "push" || codeNames.has(name);
  const stopClaiming = new AbortController();
  const abortHandlers = new AbortController();
  // every running handler listens to it (src/consume/handle.ts) and lets go when it ends: with
  // CORQ_CONCURRENCY drains of keysPerClaim handlers that is more than Node's default of 10
  // listeners, which it would report as a leak
  setMaxListeners(0, abortHandlers.signal, stopClaiming.signal);
  let stopping = false;

  const lastLogged = new Map<string, number>();
  const report = (what: string, thrown: unknown) => {
    const error = toError(thrown);
    const kind = isDatabaseUnavailable(error) ? "database_unavailable" : what;
    const now = Date.now();
    if (now - (lastLogged.get(kind) ?? 0) < LOG_EVERY_MS) return;
    lastLogged.set(kind, now);
    options.log(`${what} failed: ${error.message}`);
  };

  // --- advancer ---
  let advanceWanted = false;
  let advancing: Promise<void> | undefined;
  let horizonDelayMs = HORIZON_FIRST_MS;
  let horizonTimer: NodeJS.Timeout | undefined;

  const requestAdvance = () => {
    if (stopping) return;
    advanceWanted = true;
    advancing ??= advanceLoop().finally(() => {
      advancing = undefined;
      // wanted again between the loop's last look and here: go on
      if (advanceWanted) requestAdvance();
    });
  };

  const advanceLoop = async () => {
    while (advanceWanted && !stopping) {
      advanceWanted = false;
      try {
        // woken during this run: the next run follows at once and takes what others' kicks were
        // for, so this one skips the re-check for them (a statement less per run under load)
        const advanced = await corq.advance({
          coalesce: true,
          recheckIf: () => !advanceWanted || stopping,
          consumesEnqueued: true,
        });
        const enqueued = Object.entries(advanced).filter(([name, n]) => n > 0 && consumable(name));
        if (enqueued.length > 0) consumeEnqueued(enqueued);
        // under load the next run is already wanted and takes what waited at the horizon along
        if (advanceWanted) continue;
        const [row] = await db.run<{ waiting: boolean }>(eventsAboveHorizon());
        const { waiting } = present(row, "the horizon check");
        if (waiting) {
          if (!horizonTimer) {
            horizonTimer = setTimeout(() => {
              horizonTimer = undefined;
              requestAdvance();
            }, horizonDelayMs);
            horizonDelayMs = Math.min(HORIZON_MAX_MS, horizonDelayMs * 2);
          }
        } else horizonDelayMs = HORIZON_FIRST_MS;
      } catch (error) {
        report("advance", error);
      }
    }
  };

  // --- consumers ---
  // drains worth starting for this many ready keys: one claims keysPerClaim of them in one statement
  const drainsFor = (name: string, keys: number) =>
    Math.ceil(keys / (transactional.has(name) ? 1 : options.keysPerClaim));
  const drains = new Set<Promise<void>>();
  let checkWanted = false;
  let checking: Promise<void> | undefined;
  let missed = false;

  const requestCheck = () => {
    if (stopping) return;
    // every slot busy: nothing to start now; the next slot that frees up checks
    if (drains.size >= concurrency) {
      missed = true;
      return;
    }
    checkWanted = true;
    clearIdleTimers();
    checking ??= checkLoop().finally(() => {
      checking = undefined;
      // wanted again between the loop's last look and here (a drain that just ended): go on
      if (checkWanted) requestCheck();
      else settleIfIdle();
    });
  };

  const checkLoop = async () => {
    while (checkWanted && !stopping) {
      checkWanted = false;
      missed = false;
      try {
        // enough to fill every slot's claims (a count capped at `concurrency` would start one
        // drain where a backlog wants concurrency of them)
        const ready = await corq.readyKeys(Math.min(10_000, concurrency * options.keysPerClaim));
        const wanted = Object.entries(ready)
          .filter(([name, r]) => consumable(name, r.kind) && r.ready > 0)
          .map(([name, r]) => [name, drainsFor(name, r.ready)] as [string, number]);
        const total = wanted.reduce((sum, [, n]) => sum + n, 0);
        const plan = roundRobin(wanted, concurrency - drains.size);
        for (const name of plan) startDrain(name);
        if (total > plan.length) missed = true;
      } catch (error) {
        report("looking for ready keys", error);
      }
    }
  };

  /**
   * After an advance: drains on the subscriptions it enqueued for, one per keysPerClaim events (a
   * drain claims that many keys in one statement: more drains would only claim nothing) as far
   * as free slots go, without reading the ready keys first (a statement less per wake-up; a
   * drain that finds its keys taken ends after one claim). What does not fit is `missed`, and
   * the other processes are woken for it.
   */
  const consumeEnqueued = (enqueued: [string, number][]) => {
    if (stopping) return;
    const wanted = enqueued.map(([name, n]) => [name, drainsFor(name, n)] as [string, number]);
    const plan = roundRobin(wanted, concurrency - drains.size);
    for (const name of plan) startDrain(name);
    if (wanted.reduce((sum, [, n]) => sum + n, 0) > plan.length) {
      missed = true;
      db.run(notifyWake("ready")).catch((error) => report("waking other processes", error));
    }
  };

  const startDrain = (name: string) => {
    const started = Date.now();
    const drain: Promise<void> = corq
      .drain(name, {
        budgetMs,
        stop: stopClaiming.signal,
        abort: abortHandlers.signal,
        ...(transactional.has(name)
          ? { keysPerClaim: 1, replayKeys: 1 }
          : { keysPerClaim: options.keysPerClaim, replayKeys: options.replayKeys }),
      })
      .then(
        () => undefined,
        (error: unknown) => {
          // a subscription deleted since it was listed has nothing to do
          if (!(error instanceof CorqError && error.code === "unknown_subscription")) report(`draining ${name}`, error);
        },
      )
      .finally(() => {
        drains.delete(drain);
        if (stopping) return;
        if (missed || Date.now() - started >= budgetMs) requestCheck();
        else settleIfIdle();
      });
    drains.add(drain);
  };

  // --- idle: the next due time, and the safety net ---
  let settleTimer: NodeJS.Timeout | undefined;
  let dueTimer: NodeJS.Timeout | undefined;
  const clearIdleTimers = () => {
    clearTimeout(settleTimer);
    clearTimeout(dueTimer);
    settleTimer = dueTimer = undefined;
  };
  const settleIfIdle = () => {
    if (stopping || drains.size > 0 || checking || settleTimer) return;
    settleTimer = setTimeout(async () => {
      settleTimer = undefined;
      if (stopping || drains.size > 0 || checking) return;
      try {
        const [row] = await db.run<{ due_in_ms: number | null }>(
          nextDue([...codeNames], { recentMs: RECENTLY_DUE_MS }),
        );
        if (row?.due_in_ms == null || stopping || drains.size > 0 || checking) return;
        clearTimeout(dueTimer);
        // a little after: the key is ready once the database's clock has passed available_at
        dueTimer = setTimeout(() => requestCheck(), Math.min(row.due_in_ms + 2, options.safetyNetMs));
        dueTimer.unref();
      } catch (error) {
        report("reading the next due time", error);
      }
    }, IDLE_SETTLE_MS);
    settleTimer.unref();
  };

  let lastHousekeeping = 0;
  // retention: one pass at a time; 0 = due at the next tick (the last pass left more)
  let lastRetention = 0;
  let retaining: Promise<void> | undefined;
  const retain = (every: { everyMs: number; maxChunks: number }) => {
    if (retaining || Date.now() - lastRetention < every.everyMs) return;
    lastRetention = Date.now();
    retaining = corq
      .runRetention({ maxChunks: every.maxChunks, budgetMs: RETENTION_PASS_MS, stop: stopClaiming.signal })
      .then(
        ({ done }) => {
          if (!done) lastRetention = 0; // more to remove: the next tick goes on
        },
        (error: unknown) => report("retention", error),
      )
      .finally(() => (retaining = undefined));
  };
  // alerts: a pass, then the next alerts.everyMs after it — while there are alerts. A pass that
  // finds none ends the chain (an idle process sends nothing); an alert put (NOTIFY "alerts"),
  // the safety net and a reconnect start it again.
  let alerting: Promise<void> | undefined;
  let alertTimer: NodeJS.Timeout | undefined;
  const requestAlerts = () => {
    const every = options.alerts;
    if (!every || stopping || alerting || alertTimer) return;
    alerting = corq
      .checkAlerts({ maxSends: every.maxSends, stop: stopClaiming.signal })
      .then(
        (pass) => pass.alerts > 0,
        (error: unknown) => {
          report("alerts", error);
          return true;
        },
      )
      .then((again) => {
        alerting = undefined;
        if (!again || stopping) return;
        alertTimer = setTimeout(() => {
          alertTimer = undefined;
          requestAlerts();
        }, every.everyMs);
        alertTimer.unref();
      });
  };
  requestAlerts();

  const safetyNet = setInterval(() => {
    if (stopping) return;
    requestAdvance();
    requestCheck();
    requestAlerts();
    if (Date.now() - lastHousekeeping >= HOUSEKEEPING_EVERY_MS) {
      lastHousekeeping = Date.now();
      corq.housekeeping().catch((error) => report("housekeeping", error));
    }
    if (options.retention) retain(options.retention);
  }, options.safetyNetMs);
  safetyNet.unref();

  const waitFor = async (work: () => Promise<unknown>, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([work(), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  };

  return {
    wake(payload) {
      if (payload === "append") requestAdvance();
      else if (payload === "alerts") requestAlerts();
      else requestCheck();
    },
    recheck() {
      requestAdvance();
      requestCheck();
      requestAlerts();
    },
    busy: () => drains.size,
    async stop({ boundMs, graceMs }) {
      stopping = true;
      stopClaiming.abort();
      clearInterval(safetyNet);
      clearTimeout(alertTimer);
      clearTimeout(horizonTimer);
      clearIdleTimers();
      const settled = () => Promise.all([...drains, advancing, checking, retaining, alerting]);
      await waitFor(settled, boundMs);
      if (drains.size > 0) {
        abortHandlers.abort();
        await waitFor(settled, graceMs);
      }
      return { abandoned: drains.size };
    },
  };
}
