// Fairness between tenants (issue 32's target): tenant A's backlog of `events` over `keys`,
// appended and advanced before anyone consumes; then the consumers drain it while tenant B
// appends `quietEvents` single events over `quietKeys` keys at `quietRate` per second. B's
// append→handler latency with `tenant: "data.tenant"` against the same without it (the oldest
// keys first: B behind A's whole backlog) and against B alone (no A); and A's drain rate alone
// (B idle) with and without the tenant. One run = one fresh database (the caller's).
import { loadavg } from "node:os";
import type pg from "pg";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { benchClient } from "./database.js";
import { percentile } from "./stats.js";
import { chunks, OrderCheck, sleep, Wakeup, type Item } from "./workload.js";
import { present } from "../test/helpers/present.js";

export interface FairnessOptions {
  /** Tenant A's backlog (0: A absent) and its keys. */
  events: number;
  keys: number;
  /** Tenant B's events (0: B idle), its keys, and its single-event appends per second. */
  quietEvents: number;
  quietKeys: number;
  quietRate: number;
  consumers: number;
  keysPerClaim: number;
  /** The subscription's tenant: fairness on ("data.tenant") or off (today's claims). */
  tenant: boolean;
  /**
   * Called on a connection of its own when A's backlog is appended (before the advance), when it
   * is queued (before the consumers start) and when every event was handled: a probe's hook
   * (bench/fairnessProbe.ts reads pg_stat_statements there).
   */
  at?: (stage: "appended" | "queued" | "handled", admin: pg.Client) => Promise<void>;
}

export interface FairnessRun {
  /** B's append→handler latencies (ms) and how many of its events were handled. */
  quietP50Ms: number;
  quietP99Ms: number;
  quietMaxMs: number;
  quietHandled: number;
  /**
   * Where B's latency goes (p50 of each part): the append call; from its return to the handler
   * (the advance that queues it, then the claims: one in flight began before the event was
   * queued, the next one takes it).
   */
  quietAppendP50Ms: number;
  quietAfterAppendP50Ms: number;
  /** The advancer's calls that queued B's events: begun → returned (a call is 3 statements). */
  advanceCallP50Ms: number;
  /** The bench process's own event loop while B's events came (8 consumers, producer, advancer in it). */
  eventLoopDelayP99Ms: number;
  /** The consumers' statements while B's events came: the time from one to the next on one consumer. */
  statementP50Ms: number;
  statementP99Ms: number;
  /** A's events still unhandled when B's last event was handled (NaN without B or A). */
  backlogLeftAtQuietDone: number;
  /** A's drain: events/s from the consumers' start until its last event was handled. */
  drainEps: number;
  /** A's advance (the backlog enqueued before the consumers start): events/s. */
  advanceEps: number;
  violations: number;
  duplicates: number;
  tenantMismatched: number;
  loadStart: number;
  loadEnd: number;
}

interface Tagged extends Item {
  tenant: "A" | "B";
  t0: number;
  /** B's i-th event. */
  i?: number;
}

const load = () => present(loadavg()[0], "the 1-minute load average");

export async function fairnessRun(databaseUrl: string, o: FairnessOptions): Promise<FairnessRun> {
  const loadStart = load();
  const check = new OrderCheck();
  let backlogHandled = 0;
  let backlogDoneAt = 0;
  const quiet: number[] = [];
  // B's event i: when its append returned and when its handler ran (epoch ms)
  const quietAppended: number[] = [];
  const quietHandled: number[] = [];
  // the advancer's calls that queued something while B's events came (ms)
  const advanceCalls: number[] = [];
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  // each consumer's statements, sent while B's events came (epoch ms)
  let timing = false;
  const sent: number[][] = Array.from({ length: o.consumers }, () => []);
  let backlogLeftAtQuietDone = Number.NaN;
  const sub: SubscriptionDefinition = {
    name: "fair",
    key: "data.key",
    ...(o.tenant ? { tenant: "data.tenant" } : {}),
    batchSize: 100,
    leaseMs: 60_000,
    handle: (events: DeliveredEvent[]) => {
      const now = Date.now();
      for (const e of events) {
        const data = e.data as unknown as Tagged;
        check.record(data);
        if (data.tenant === "A") {
          if (++backlogHandled === o.events) backlogDoneAt = performance.now();
        } else {
          quiet.push(now - data.t0);
          quietHandled[data.i ?? 0] = now;
          if (quiet.length === o.quietEvents && o.events > 0) backlogLeftAtQuietDone = o.events - backlogHandled;
        }
      }
    },
  };
  const producer = createCorq({ databaseUrl, subscriptions: [sub], poolSize: 8 });
  await producer.migrate();
  const consumers: Corq[] = Array.from({ length: o.consumers }, (_, c) =>
    createCorq({
      databaseUrl,
      subscriptions: [sub],
      poolSize: 1,
      onStatement: () => {
        if (timing) sent[c]?.push(Date.now());
      },
    }),
  );
  const admin = await benchClient(databaseUrl);
  try {
    // A's backlog: 8 producers, batches of 100, event i on key i % keys (each key's events in order)
    await Promise.all(
      Array.from({ length: 8 }, async (_, p) => {
        const mine: Item[] = [];
        for (let i = 0; i < o.events; i++)
          if ((i % o.keys) % 8 === p) mine.push({ key: `a${i % o.keys}`, seq: Math.floor(i / o.keys) });
        for (const batch of chunks(mine, 100))
          await producer.append(
            `tenant-a-${p}`,
            batch.map((item) => ({ name: "Work", data: { ...item, tenant: "A", t0: Date.now() } })),
          );
      }),
    );
    await o.at?.("appended", admin);
    const advanceStarted = performance.now();
    let advanced = 0;
    for (;;) {
      const n = present((await producer.advance()).fair, "an advance count for the fair subscription");
      if (n === 0) break;
      advanced += n;
    }
    const advanceEps = o.events > 0 ? advanced / ((performance.now() - advanceStarted) / 1000) : Number.NaN;
    // what autovacuum would do to the loaded tables next, done now: every run starts from the
    // same statistics instead of meeting autovacuum at a random moment of its drain
    await admin.query("VACUUM (ANALYZE) corq.events, corq.queue, corq.keys");
    await o.at?.("queued", admin);

    // the consumers (and an advancer for B's appends): production's shape, as in bench/systems/corq.ts
    const appended = new Wakeup();
    const enqueued = new Wakeup();
    const total = o.events + o.quietEvents;
    const done = () => check.handled + check.duplicates >= total;
    const started = performance.now();
    const loops = Promise.all([
      (async () => {
        while (!done()) {
          const begun = performance.now();
          const n = await producer.advance();
          if (Object.values(n).some((x) => x > 0)) {
            if (timing) advanceCalls.push(performance.now() - begun);
            enqueued.notify();
          } else await appended.wait(50);
        }
      })(),
      ...consumers.map(async (c) => {
        while (!done())
          if ((await c.drain("fair", { budgetMs: 1000, keysPerClaim: o.keysPerClaim })).batches === 0)
            await enqueued.wait(50);
      }),
    ]);

    // B: once A's drain is under way (5% handled), single-event appends at its rate
    const appendMs: number[] = [];
    const appends: Promise<unknown>[] = [];
    if (o.quietEvents > 0) {
      while (backlogHandled < o.events * 0.05) await sleep(5);
      timing = true;
      loopDelay.enable();
      const begun = Date.now();
      for (let i = 0; i < o.quietEvents; i++) {
        const wait = begun + (i * 1000) / o.quietRate - Date.now();
        if (wait > 0) await sleep(wait);
        const t0 = Date.now();
        const key = `b${i % o.quietKeys}`;
        appends.push(
          producer
            .append(`tenant-b-${key}`, [
              { name: "Ping", data: { key, seq: Math.floor(i / o.quietKeys), tenant: "B", t0, i } },
            ])
            .then(() => {
              quietAppended[i] = Date.now();
              appendMs.push(Date.now() - t0);
              appended.notify();
            }),
        );
      }
      await Promise.all(appends);
      while (quiet.length < o.quietEvents && !done()) await sleep(5);
      timing = false;
      loopDelay.disable();
    }
    await loops;
    await o.at?.("handled", admin);
    const afterAppend = quietAppended.flatMap((at, i) => {
      const handledAt = quietHandled[i];
      return handledAt === undefined ? [] : [handledAt - at];
    });
    // (with A absent the consumers idle between B's events: their gaps are waits, not statements)
    const gaps = sent.flatMap((times) => times.slice(1).map((t, j) => t - (times[j] ?? t)));
    const stats = present(
      (await producer.stats()).subscriptions.find((s) => s.name === "fair"),
      "the fair subscription's stats",
    );
    return {
      quietP50Ms: percentile(quiet, 50),
      quietP99Ms: percentile(quiet, 99),
      quietMaxMs: quiet.length > 0 ? Math.max(...quiet) : Number.NaN,
      quietHandled: quiet.length,
      quietAppendP50Ms: percentile(appendMs, 50),
      quietAfterAppendP50Ms: percentile(afterAppend, 50),
      advanceCallP50Ms: percentile(advanceCalls, 50),
      eventLoopDelayP99Ms: o.quietEvents > 0 ? loopDelay.percentile(99) / 1e6 : Number.NaN,
      statementP50Ms: o.events > 0 ? percentile(gaps, 50) : Number.NaN,
      statementP99Ms: o.events > 0 ? percentile(gaps, 99) : Number.NaN,
      backlogLeftAtQuietDone,
      drainEps: o.events > 0 ? o.events / ((backlogDoneAt - started) / 1000) : Number.NaN,
      advanceEps,
      violations: check.violations,
      duplicates: check.duplicates,
      tenantMismatched: stats.tenantMismatched,
      loadStart,
      loadEnd: load(),
    };
  } finally {
    await admin.end();
    await Promise.all([producer, ...consumers].map((c) => c.close()));
  }
}
