// Live traffic during a large replay (issue 15): a log of N events over K keys, a subscription
// that has advanced past it, then live single-event appends at a fixed rate on keys of their
// own while consumers drain. Append→handler latency of the live events is measured
//   baseline   with nothing to replay;
//   replay     from the call of a rewind of the whole subscription to the beginning (N events
//              requeued) until the replay has caught up — replaying keys are claimed after
//              live ones (a live key with events in the rewound range is replaying too: its
//              samples are left out);
//   no share   the same, with each consumer free to fill every key of its claims with replaying
//              keys (replayKeys = keysPerClaim: the lane alone, what the share is compared
//              against); the phases alternate share / no share, so a machine whose load
//              changes meanwhile shows in both;
//   no lane    the same rewind with every key's replay mark cleared right after it, so the
//              claim takes keys by waiting time alone (what the lane is compared against).
import { loadavg } from "node:os";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { benchClient } from "./database.js";
import { loadLogWithoutSubscriptions } from "./systems/corq.js";
import { advancerLoop, sleep, Wakeup } from "./workload.js";
import { percentile } from "./stats.js";
import { present } from "../test/helpers/present.js";

export interface ReplayOptions {
  /** Events in the log before the rewind, and their keys. */
  events: number;
  keys: number;
  consumers: number;
  /** Live appends per second, and how long the baseline is measured. */
  rate: number;
  baselineSeconds: number;
  /** The replay phases end when the replay is done or after this long. */
  maxSeconds: number;
  /** Keys each consumer claims per statement (the library's default: 16). */
  keysPerClaim?: number;
  /** The replay phases, in this order (default: share, noShare, noLane). */
  phases?: ReplayPhase[];
}

/** share: the drain's default replayKeys; noShare: replayKeys = keysPerClaim; noLane: no replay marks. */
export type ReplayPhase = "share" | "noShare" | "noLane";

export interface PhaseResult {
  liveP50Ms: number;
  liveP99Ms: number;
  liveSamples: number;
  /**
   * Of the live events appended after the rewind call returned, the p50: what the claims do
   * (the rewind call holds the subscription's advance: events appended during it wait for it).
   */
  afterRewindP50Ms: number;
  /** Of the live latency, the append itself (its commit waits for the WAL flush). */
  appendP50Ms: number;
  /** Replayed events handled per second while live traffic ran (0 for the baseline). */
  replayEps: number;
  /** How long the rewind call took (it holds the subscription's advance while it runs). */
  rewindMs: number;
  /** Whether the replay finished within maxSeconds. */
  complete: boolean;
  /** The machine's 1-minute load average at the phase's end (it is shared). */
  load: number;
}

export async function replayUnderLive(databaseUrl: string, o: ReplayOptions) {
  // the log first, with no subscription: the subscription rewound is created `from: "now"`
  await loadLogWithoutSubscriptions(databaseUrl, { events: o.events, keys: o.keys });

  const live: { key: string; ms: number; t0: number }[] = [];
  let rewindEnded = Number.POSITIVE_INFINITY; // epoch ms the phase's rewind call returned
  // live keys that had events before a rewind read the log are replayed too (they are in the
  // range): their latency is a replaying key's, not a live one's, and is left out
  const rewoundLive = new Set<string>();
  let replayed = 0;
  const sub: SubscriptionDefinition = {
    name: "bench",
    key: "data.key",
    from: "now",
    batchSize: 100,
    leaseMs: 60_000,
    handle: (events: DeliveredEvent[]) => {
      const now = Date.now();
      for (const e of events) {
        const data = e.data as { t0?: number; live?: boolean; key: string };
        if (e.replay) {
          replayed++;
          if (data.live) rewoundLive.add(data.key);
        } else if (data.live) live.push({ key: data.key, ms: now - (data.t0 ?? now), t0: data.t0 ?? now });
      }
    },
  };
  const corq = createCorq({ databaseUrl, subscriptions: [sub], poolSize: 8 });
  await corq.migrate();
  const consumers: Corq[] = Array.from({ length: o.consumers }, () =>
    createCorq({ databaseUrl, subscriptions: [sub], poolSize: 1 }),
  );
  const admin = await benchClient(databaseUrl);
  // What autovacuum does to a quiet queue, done now: its statistics say empty. The consumers'
  // prepared statements are then planned for an empty queue during the baseline, as on a system
  // that was quiet before the rewind (left to autovacuum's timing, some runs met those plans and
  // some did not: p50 70 ms or 2 s for the same code)
  await admin.query("VACUUM (ANALYZE) corq.queue, corq.keys");
  const keysPerClaim = o.keysPerClaim ?? 16;
  let replayKeys: number | undefined; // undefined: the library's default share
  const appended = new Wakeup();
  const enqueued = new Wakeup();
  let stop = false;
  const loops = Promise.all([
    advancerLoop(
      () => corq.advance(),
      { appended, enqueued },
      () => stop,
    ),
    ...consumers.map(async (c) => {
      while (!stop) {
        const drained = await c.drain("bench", { budgetMs: 1000, keysPerClaim, replayKeys });
        if (drained.batches === 0) await enqueued.wait(50);
      }
    }),
  ]);

  let phase = 0;
  /** Live appends at the rate until `until()` holds or `seconds` pass; returns the latencies. */
  const liveTraffic = async (seconds: number, until: () => boolean) => {
    phase++;
    live.length = 0;
    rewoundLive.clear();
    const started = Date.now();
    const appends: Promise<unknown>[] = [];
    const appendMs: number[] = [];
    for (let i = 0; Date.now() - started < seconds * 1000 && !until(); i++) {
      const wait = started + (i * 1000) / o.rate - Date.now();
      if (wait > 0) await sleep(wait);
      const t0 = Date.now();
      appends.push(
        corq
          .append(`live-${phase}-${i % 8}`, [
            { name: "Ping", data: { key: `live-${phase}-${i % 50}`, live: true, t0 } },
          ])
          .then(() => {
            appendMs.push(Date.now() - t0);
            appended.notify();
          }),
      );
    }
    await Promise.all(appends);
    const deadline = Date.now() + 30_000;
    while (live.length < appends.length && Date.now() < deadline) await sleep(10);
    const counted = live.filter((l) => !rewoundLive.has(l.key));
    const samples = counted.map((l) => l.ms);
    const afterRewind = counted.filter((l) => l.t0 >= rewindEnded).map((l) => l.ms);
    return { samples, afterRewind, appendMs, seconds: (Date.now() - started) / 1000 };
  };
  const summary = (
    run: { samples: number[]; afterRewind: number[]; appendMs: number[] },
    extra: Omit<PhaseResult, "liveP50Ms" | "liveP99Ms" | "liveSamples" | "appendP50Ms" | "load" | "afterRewindP50Ms">,
  ) => ({
    afterRewindP50Ms: run.afterRewind.length > 0 ? percentile(run.afterRewind, 50) : Number.NaN,
    load: present(loadavg()[0], "the 1-minute load average"),
    liveP50Ms: percentile(run.samples, 50),
    liveP99Ms: percentile(run.samples, 99),
    liveSamples: run.samples.length,
    appendP50Ms: percentile(run.appendMs, 50),
    ...extra,
  });

  const results: { baseline: PhaseResult; phases: { name: ReplayPhase; result: PhaseResult }[] } = {
    baseline: undefined as never,
    phases: [],
  };
  try {
    const base = await liveTraffic(o.baselineSeconds, () => false);
    results.baseline = summary(base, { replayEps: 0, rewindMs: 0, complete: true });
    for (const name of o.phases ?? (["share", "noShare", "noLane"] as const)) {
      replayKeys = name === "noShare" ? keysPerClaim : undefined;
      await sleep(1100); // every drain under way (budget 1 s) has ended: the next ones take it
      replayed = 0;
      rewindEnded = Number.POSITIVE_INFINITY;
      let requeued = Number.POSITIVE_INFINITY;
      let rewindMs = 0;
      let startedAt = 0;
      // live traffic from the rewind call on (it holds the subscription's advance while it
      // runs) until the replay is done
      const rewinding = sleep(0).then(async () => {
        const t0 = performance.now();
        requeued = (await corq.rewind("bench", { to: "beginning" })).requeued;
        rewindMs = performance.now() - t0;
        rewindEnded = Date.now();
        // the comparison: no key is marked replaying, so claims go by waiting time alone
        // (the rows locked in key order, as every writer of key rows does: consumers settle meanwhile)
        if (name === "noLane")
          await admin.query(`UPDATE corq.keys k SET replay_seq = 0 FROM (
            SELECT subscription_id, key FROM corq.keys ORDER BY subscription_id, key FOR UPDATE) l
            WHERE k.subscription_id = l.subscription_id AND k.key = l.key`);
        startedAt = performance.now();
        enqueued.notify();
      });
      const run = await liveTraffic(o.maxSeconds, () => replayed >= requeued);
      await rewinding;
      const complete = replayed >= requeued;
      // let a replay that did not finish drain before the next phase (bounded)
      const drainUntil = performance.now() + o.maxSeconds * 1000;
      while (replayed < requeued && performance.now() < drainUntil) await sleep(20);
      const seconds = (performance.now() - startedAt) / 1000;
      results.phases.push({ name, result: summary(run, { replayEps: replayed / seconds, rewindMs, complete }) });
    }
  } finally {
    stop = true;
    enqueued.notify();
    appended.notify();
    await loops;
    await admin.end();
    await Promise.all([corq, ...consumers].map((c) => c.close()));
  }
  return results;
}
