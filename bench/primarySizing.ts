// What one Postgres primary carries (issue 50, item 5): the whole pipeline — single-event
// appends, the advance, claims and acks — at a fixed offered rate, and what it cost the server
// in CPU time, statements and WAL, per event. Stated per CPU-second of the Postgres server, not
// per machine: the machine (2 cores) is shared with the bench's own process and other work.
//
//   producers      `rate` events a second in appends of `eventsPerAppend` (1: what an HTTP append
//                  of one event is), event n to the stream `order-<n mod keys>` with data.customer
//                  `c<n mod customers>` (an append's events to one stream); at most 64 appends in
//                  flight (past that the producer falls behind, and says so)
//   subscriptions  `byStream` (key = stream); with two, also `byCustomer` (key = data.customer)
//   advancer       one loop, as serve runs it: advance, wake consumers, else wait for an append
//   consumers      `consumers` drain loops per subscription (the library's keysPerClaim)
//   measured       after `warmupSeconds` at the same rate, for `seconds`: the cluster's CPU time
//                  (/proc utime + stime of the postmaster's tree — backends, autovacuum, WAL
//                  writer, checkpointer — and the ended backends' time it reaped; less the
//                  monitor's backend), statements sent (every corq instance's onStatement),
//                  pg_current_wal_lsn() moved, events appended and handled
// Retention, housekeeping and the dashboard are not part of it (bench/RESULTS.md has a retention
// pass's own WAL and time). At the end every appended event must be handled by each subscription.
import { loadavg } from "node:os";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { DEFAULT_KEYS_PER_CLAIM } from "../src/corq/consuming.js";
import { benchClient } from "./database.js";
import { commit } from "./commit.js";
import { ownCpuMs, parentOf, treeCpuMs } from "./processCpu.js";
import { advancerLoop, sleep, Wakeup } from "./workload.js";

export interface SizingOptions {
  /** Events offered per second. */
  rate: number;
  /** Events per append (each append one transaction). */
  eventsPerAppend: number;
  subscriptions: 1 | 2;
  seconds: number;
  warmupSeconds: number;
  keys: number;
  customers: number;
  /** Drain loops per subscription. */
  consumers: number;
}

export interface SizingRun {
  options: SizingOptions;
  /** in the measured window */
  appended: number;
  /** in the measured window, by the slowest subscription */
  handled: number;
  seconds: number;
  postgresCpuMs: number;
  statements: number;
  walBytes: number;
  /** the bench process's own CPU time (producers, consumers, the driver) in the window */
  benchCpuMs: number;
  /** how far behind its schedule the producer ended the window, ms */
  behindMs: number;
  /** events appended but not yet handled by every subscription, at the window's end */
  backlog: number;
  /** after the drain: events some subscription never handled (the target: 0) */
  lost: number;
  load: { start: number; end: number };
}

export async function primarySizing(databaseUrl: string, o: SizingOptions): Promise<SizingRun> {
  const handled = [0, 0];
  const handler = (i: number) => (events: DeliveredEvent[]) => {
    handled[i] = (handled[i] ?? 0) + events.length;
  };
  const subscriptions: SubscriptionDefinition[] = [
    { name: "byStream", key: "stream", handle: handler(0) },
    { name: "byCustomer", key: "data.customer", handle: handler(1) },
  ].slice(0, o.subscriptions);
  let statements = 0;
  const onStatement = () => void statements++;
  const producer = createCorq({ databaseUrl, subscriptions, poolSize: 8, onStatement });
  await producer.migrate();
  const consumers: { corq: Corq; name: string }[] = subscriptions.flatMap((s) =>
    Array.from({ length: o.consumers }, () => ({
      corq: createCorq({ databaseUrl, subscriptions, poolSize: 1, onStatement }),
      name: s.name,
    })),
  );
  const monitor = await benchClient(databaseUrl);
  const [{ pid: monitorPid }] = (await monitor.query("SELECT pg_backend_pid() AS pid")).rows;
  const postmaster = parentOf(monitorPid);

  let stop = false;
  let producing = true;
  const signals = { appended: new Wakeup(), enqueued: new Wakeup() };
  const loops = [
    advancerLoop(
      () => producer.advance(),
      signals,
      () => stop,
      (enqueued) => Math.ceil(enqueued / DEFAULT_KEYS_PER_CLAIM),
    ),
    ...consumers.map(async ({ corq, name }) => {
      while (!stop) if ((await corq.drain(name, { budgetMs: 1000 })).batches === 0) await signals.enqueued.wait(50);
    }),
  ];

  let appended = 0;
  let behindMs = 0;
  const inFlight = new Set<Promise<unknown>>();
  const started = Date.now();
  const produce = (async () => {
    for (let n = 0; producing; n++) {
      const wait = started + (n * o.eventsPerAppend * 1000) / o.rate - Date.now();
      if (wait > 0) await sleep(wait);
      behindMs = Math.max(0, -wait);
      const events = Array.from({ length: o.eventsPerAppend }, (_, i) => ({
        name: "OrderStep",
        data: { customer: `c${n % o.customers}`, n, i },
      }));
      const append = producer.append(`order-${n % o.keys}`, events).then(() => {
        appended += o.eventsPerAppend;
        signals.appended.notify();
      });
      inFlight.add(append);
      void append.finally(() => inFlight.delete(append));
      while (inFlight.size >= 64) await Promise.race(inFlight);
    }
  })();

  const snapshot = async () => {
    const { rows } = await monitor.query("SELECT pg_current_wal_lsn()::text AS lsn");
    const cpu = process.cpuUsage();
    return {
      at: performance.now(),
      postgresMs: treeCpuMs(postmaster) - ownCpuMs(monitorPid),
      benchMs: (cpu.user + cpu.system) / 1000,
      lsn: rows[0].lsn as string,
      statements,
      appended,
      handled: Math.min(...handled.slice(0, o.subscriptions)),
      load: loadavg()[0] ?? 0,
    };
  };
  let lost = 0;
  try {
    await sleep(o.warmupSeconds * 1000);
    const before = await snapshot();
    await sleep(o.seconds * 1000);
    const after = await snapshot();
    const { rows } = await monitor.query("SELECT pg_wal_lsn_diff($1, $2)::float8 AS bytes", [after.lsn, before.lsn]);
    producing = false;
    await produce;
    await Promise.all(inFlight);
    const drainUntil = Date.now() + 60_000;
    while (handled.slice(0, o.subscriptions).some((h) => h < appended) && Date.now() < drainUntil) await sleep(100);
    lost = handled.slice(0, o.subscriptions).reduce((sum, h) => sum + Math.max(0, appended - h), 0);
    return {
      options: o,
      appended: after.appended - before.appended,
      handled: after.handled - before.handled,
      seconds: (after.at - before.at) / 1000,
      postgresCpuMs: after.postgresMs - before.postgresMs,
      statements: after.statements - before.statements,
      walBytes: Number(rows[0].bytes),
      benchCpuMs: after.benchMs - before.benchMs,
      behindMs,
      backlog: after.appended - after.handled,
      lost,
      load: { start: before.load, end: after.load },
    };
  } finally {
    stop = true;
    producing = false;
    signals.appended.notify();
    signals.enqueued.notify();
    await Promise.allSettled(loops);
    await monitor.end();
    await Promise.all([producer, ...consumers.map((c) => c.corq)].map((c) => c.close()));
  }
}

/** The figures per event and per Postgres CPU-second of one run. */
export function perEvent(r: SizingRun) {
  const cpuSeconds = r.postgresCpuMs / 1000;
  return {
    eventsPerSecond: r.appended / r.seconds,
    eventsPerCpuSecond: r.appended / cpuSeconds,
    /** Postgres CPU-seconds used per second of wall time: cores busy */
    postgresCores: cpuSeconds / r.seconds,
    cpuMsPerEvent: r.postgresCpuMs / r.appended,
    statementsPerEvent: r.statements / r.appended,
    walBytesPerEvent: r.walBytes / r.appended,
    benchCores: r.benchCpuMs / 1000 / r.seconds,
  };
}

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? (process.argv[at + 1] ?? fallback) : fallback;
};
const integers = (name: string, fallback: string) => {
  const values = arg(name, fallback).split(",").map(Number);
  if (values.some((v) => !Number.isInteger(v) || v <= 0))
    throw new Error(`--${name}: positive integers, comma-separated`);
  return values;
};
const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });

/**
 * `npm run bench -- --only sizing [--sizing-batches 1,10] [--sizing-rates 250,500] [--sizing-seconds 60]`:
 * one run per events-per-append, rate and subscription count (1, 2), each on a fresh database of
 * the bench's Postgres (DATABASE_URL, or the embedded one), a row each. The rates stay below what
 * saturates this 2-core machine (1,000 single-event appends/s with two subscriptions left the
 * producer seconds behind, Postgres at 1.4 cores and the bench at 0.4): a saturated server's
 * CPU per event counts its waits on contention too.
 */
export async function sizingSection({
  quick,
  say,
  serverUrl,
  onFreshDatabase,
}: {
  quick: boolean;
  say: (line: string) => void;
  serverUrl: string;
  onFreshDatabase: <T>(label: string, fn: (url: string) => Promise<T>) => Promise<T>;
}) {
  const batches = integers("sizing-batches", quick ? "1" : "1,10");
  const rates = integers("sizing-rates", quick ? "500" : "250,500");
  const seconds = integers("sizing-seconds", quick ? "20" : "60")[0] ?? 60;
  const server = await benchClient(serverUrl);
  const { rows } = await server.query(
    "SELECT current_setting('server_version') AS version, current_setting('jit') AS jit, pg_jit_available() AS jit_available",
  );
  await server.end();
  const { version, jit, jit_available } = rows[0] as { version: string; jit: string; jit_available: boolean };
  const postgres = `PostgreSQL ${version}, jit ${jit}${jit === "on" && !jit_available ? " (no JIT provider: never compiles)" : jit_available ? " (a JIT provider: compiles past jit_above_cost)" : ""}`;
  const base = { warmupSeconds: quick ? 5 : 10, keys: 10_000, customers: 2_000, consumers: 3 };
  say(
    `${postgres}, default settings otherwise; commit ${commit()}. Appends at a fixed offered rate of events (one event per append, or 10 to one stream; event n to stream \`order-<n mod ${fmt(base.keys)}>\`, data.customer one of ${fmt(base.customers)}), one advance loop, ${base.consumers} drain loops per subscription (keysPerClaim ${DEFAULT_KEYS_PER_CLAIM}, batch size 100), no-op handlers; one subscription keyed by stream, or that and a second keyed by data.customer. ` +
      `After ${base.warmupSeconds} s of warm-up at the rate, ${seconds} s measured: **Postgres CPU** = utime + stime of the cluster's processes (/proc: the postmaster's tree, ended backends included; the monitor's backend left out) — per CPU-second, since the 2-core machine is shared with the bench's own process (its CPU in \`bench cores\`) and other work; **statements** = every statement corq sent (appends, advances, claims, acks), per event appended; **WAL** = pg_current_wal_lsn() moved ÷ events appended. \`load\`: the 1-minute load average at the window's start → end.\n`,
  );
  say(
    "| events per append | subscriptions | offered events/s | appended events/s | events / Postgres CPU-second | Postgres cores busy | Postgres CPU ms / event | statements / event | WAL bytes / event | bench cores | backlog at the end | lost | load start → end |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  const json: Record<string, unknown> = { postgres: version, jit, jit_available, commit: commit() };
  for (const eventsPerAppend of batches)
    for (const rate of rates)
      for (const subscriptions of [1, 2] as const) {
        const run = await onFreshDatabase("sizing", (url) =>
          primarySizing(url, { ...base, rate, eventsPerAppend, subscriptions, seconds }),
        );
        const e = perEvent(run);
        say(
          `| ${eventsPerAppend} | ${subscriptions} | ${fmt(rate)} | ${fmt(e.eventsPerSecond)}${run.behindMs > 1000 ? ` (producer ${fmt(run.behindMs / 1000, 1)} s behind)` : ""} | **${fmt(e.eventsPerCpuSecond)}** | ${fmt(e.postgresCores, 2)} | ${fmt(e.cpuMsPerEvent, 3)} | ${fmt(e.statementsPerEvent, 2)} | ${fmt(e.walBytesPerEvent)} | ${fmt(e.benchCores, 2)} | ${fmt(run.backlog)} | ${run.lost} | ${run.load.start.toFixed(1)} → ${run.load.end.toFixed(1)} |`,
        );
        json[`batch${eventsPerAppend}_rate${rate}_subs${subscriptions}`] = {
          events_per_cpu_second: Math.round(e.eventsPerCpuSecond),
          statements_per_event: Number(e.statementsPerEvent.toFixed(3)),
          wal_bytes_per_event: Math.round(e.walBytesPerEvent),
          postgres_cores: Number(e.postgresCores.toFixed(3)),
          appended: run.appended,
          lost: run.lost,
          load: run.load,
        };
      }
  return json;
}
