// Live traffic beside a long operation (a rewind, a retention pass): single-event appends at a
// fixed rate that one subscription of their own takes — its own instance advances (coalesced)
// and drains it with 2 consumers, as a process of its own would. A phase measures each append's
// call and its append→handler latency, and, every 250 ms, the oldest client transaction of the
// database that holds a transaction id (pg_stat_activity.backend_xid: what holds the xmin horizon
// back, and with it every subscription's advance) and the oldest client transaction of any kind.
import { loadavg } from "node:os";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { benchClient } from "./database.js";
import { advancerLoop, sleep, Wakeup } from "./workload.js";
import { percentile } from "./stats.js";
import { present } from "../test/helpers/present.js";

export interface LivePhase {
  /** append→handler of the phase's live events */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  samples: number;
  /** The highest p50 of any 5-second window of the phase ("throughout"). */
  worstWindowP50Ms: number;
  /** the append calls alone (sent → answered) */
  appendP50Ms: number;
  appendP99Ms: number;
  /** The oldest transaction holding an xid seen in the phase, and the oldest of any kind (ms). */
  longestXidMs: number;
  longestTransactionMs: number;
  /** The statement that longest xid was running (its first characters). */
  longestXidQuery: string;
  /** The 1-minute load average at the phase's end (the machine is shared). */
  load: number;
}

export interface LiveProbe {
  /** Live appends at the probe's rate for `seconds`, and on until `done()`; the phase's figures. */
  phase(seconds: number, done: () => boolean): Promise<LivePhase>;
  stop(): Promise<void>;
}

/**
 * Starts the probe's subscription (`name`, created `from: "now"`: it takes only the probe's own
 * "Ping" events) and its loops. The database must be migrated.
 */
export async function startLiveProbe(databaseUrl: string, o: { name: string; rate: number }): Promise<LiveProbe> {
  const live: { ms: number; t0: number }[] = [];
  const subscription: SubscriptionDefinition = {
    name: o.name,
    key: "data.key",
    events: ["Ping"],
    from: "now",
    batchSize: 100,
    handle: (events: DeliveredEvent[]) => {
      const now = Date.now();
      for (const e of events) {
        const { t0 } = e.data as { t0: number };
        live.push({ ms: now - t0, t0 });
      }
    },
  };
  const app = createCorq({ databaseUrl, subscriptions: [subscription], poolSize: 4 });
  const consumers: Corq[] = [0, 1].map(() => createCorq({ databaseUrl, subscriptions: [subscription], poolSize: 1 }));
  await app.advance(); // the subscription exists, its watermark at the log's head
  const watcher = await benchClient(databaseUrl);

  const appended = new Wakeup();
  const enqueued = new Wakeup();
  let stop = false;
  // the runtimes' shape: a woken advancer that returns where another is at work (coalesce)
  const loops = Promise.all([
    advancerLoop(
      () => app.advance({ coalesce: true }),
      { appended, enqueued },
      () => stop,
    ),
    ...consumers.map(async (c) => {
      while (!stop) if ((await c.drain(o.name, { budgetMs: 1000 })).batches === 0) await enqueued.wait(50);
    }),
  ]);
  let longestXidMs = 0;
  let longestXidQuery = "";
  let longestTransactionMs = 0;
  const watching = (async () => {
    while (!stop) {
      const { rows } = await watcher.query(`
        SELECT extract(epoch FROM clock_timestamp() - xact_start) * 1000 AS ms, backend_xid IS NOT NULL AS xid,
          state || coalesce(' ' || wait_event_type || '/' || wait_event, '') || ': ' ||
            regexp_replace(left(query, 200), '\\s+', ' ', 'g') AS query
        FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
          -- not autovacuum: its xid (taken to truncate a table) holds back no snapshot's xmin
          AND backend_type = 'client backend'`);
      for (const row of rows as { ms: number; xid: boolean; query: string }[]) {
        longestTransactionMs = Math.max(longestTransactionMs, Number(row.ms));
        if (row.xid && Number(row.ms) > longestXidMs) {
          longestXidMs = Number(row.ms);
          longestXidQuery = row.query.slice(0, 120);
          if (longestXidMs > 2000) console.log(`xid held ${Math.round(longestXidMs)} ms: ${row.query}`);
        }
      }
      await sleep(250);
    }
  })();

  let sent = 0; // across phases: every live event has its own stream position in the run
  return {
    async phase(seconds, done) {
      live.length = 0;
      longestXidMs = 0;
      longestXidQuery = "";
      longestTransactionMs = 0;
      const started = Date.now();
      const appends: Promise<unknown>[] = [];
      const appendMs: number[] = [];
      for (let i = 0; Date.now() - started < seconds * 1000 || !done(); i++) {
        const wait = started + (i * 1000) / o.rate - Date.now();
        if (wait > 0) await sleep(wait);
        const t0 = Date.now();
        const key = `live-${sent++ % 50}`;
        appends.push(
          app.append(key, [{ name: "Ping", data: { key, t0 } }]).then(() => {
            appendMs.push(Date.now() - t0);
            appended.notify();
          }),
        );
      }
      await Promise.all(appends);
      const deadline = Date.now() + 120_000;
      while (live.length < appends.length && Date.now() < deadline) await sleep(10);
      const samples = live.map((l) => l.ms);
      const windows = new Map<number, number[]>();
      for (const l of live) {
        const w = Math.floor((l.t0 - started) / 5000);
        const window = windows.get(w) ?? [];
        window.push(l.ms);
        windows.set(w, window);
      }
      return {
        p50Ms: percentile(samples, 50),
        p99Ms: percentile(samples, 99),
        maxMs: Math.max(...samples),
        samples: samples.length,
        worstWindowP50Ms: Math.max(...[...windows.values()].map((w) => percentile(w, 50))),
        appendP50Ms: percentile(appendMs, 50),
        appendP99Ms: percentile(appendMs, 99),
        longestXidMs,
        longestTransactionMs,
        longestXidQuery,
        load: present(loadavg()[0], "the 1-minute load average"),
      };
    },
    async stop() {
      stop = true;
      enqueued.notify();
      appended.notify();
      await Promise.all([loops, watching]);
      await watcher.end();
      await Promise.all([app, ...consumers].map((c) => c.close()));
    },
  };
}
