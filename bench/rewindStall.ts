// Another subscription's delivery while one subscription is rewound (issue 30, item 4): a log
// of N events over K keys that subscription "rewound" has advanced past, then live single-event
// appends at a fixed rate that only subscription "other" takes (its own instance advances and
// drains it, as a process of its own would). Measured, append→handler of the live events:
//   baseline   nothing rewound;
//   rewind     while `rewind("rewound", { to: "beginning" })` runs (N events requeued).
// Beside it, every 250 ms, the oldest transaction of the database that holds a transaction id
// (pg_stat_activity.backend_xid: what holds the xmin horizon back, and with it every
// subscription's advance) and the oldest transaction of any kind. Nobody consumes "rewound":
// the figure is what the rewind itself costs the others.
import { loadavg } from "node:os";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { benchClient } from "./database.js";
import { loadLogWithoutSubscriptions } from "./systems/corq.js";
import { sleep, Wakeup } from "./workload.js";
import { percentile } from "./stats.js";
import { present } from "../test/helpers/present.js";

export interface RewindStallOptions {
  events: number;
  keys: number;
  /** Live appends per second (to "other"). */
  rate: number;
  baselineSeconds: number;
}

export interface StallPhase {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  samples: number;
  /** The highest p50 of any 5-second window of the phase ("throughout"). */
  worstWindowP50Ms: number;
  /** The oldest transaction holding an xid seen in the phase, and the oldest of any kind (ms). */
  longestXidMs: number;
  longestTransactionMs: number;
  /** The statement that longest xid was running (its first characters). */
  longestXidQuery: string;
  /** The 1-minute load average at the phase's end (the machine is shared). */
  load: number;
}

export async function rewindStall(databaseUrl: string, o: RewindStallOptions) {
  // the log first, with no subscription: the subscription rewound is created `from: "now"`
  await loadLogWithoutSubscriptions(databaseUrl, { events: o.events, keys: o.keys });

  const rewound: SubscriptionDefinition = {
    name: "rewound",
    key: "data.key",
    events: ["Work"],
    from: "now",
    handle: () => undefined,
  };
  const live: { ms: number; t0: number }[] = [];
  const other: SubscriptionDefinition = {
    name: "other",
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
  // the rewind's statements one after another: each one's time is the gap to the next one sent
  const sent: { at: number; text: string }[] = [];
  const operator = createCorq({
    databaseUrl,
    subscriptions: [rewound],
    poolSize: 2,
    onStatement: (text) => void sent.push({ at: performance.now(), text }),
  });
  await operator.migrate();
  await operator.advance(); // "rewound" exists, its watermark past the log
  const app = createCorq({ databaseUrl, subscriptions: [other], poolSize: 4 });
  const consumers: Corq[] = [0, 1].map(() => createCorq({ databaseUrl, subscriptions: [other], poolSize: 1 }));
  await app.advance();
  const watcher = await benchClient(databaseUrl);

  const appended = new Wakeup();
  const enqueued = new Wakeup();
  let stop = false;
  // the runtimes' shape: a woken advancer that returns where another is at work (coalesce)
  const loops = Promise.all([
    (async () => {
      while (!stop) {
        const advanced = await app.advance({ coalesce: true });
        if (Object.values(advanced).some((n) => n > 0)) enqueued.notify();
        else await appended.wait(50);
      }
    })(),
    ...consumers.map(async (c) => {
      while (!stop) if ((await c.drain("other", { budgetMs: 1000 })).batches === 0) await enqueued.wait(50);
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
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`);
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

  /** Live appends at the rate until `done()` (and at least `seconds`); the phase's figures. */
  const phase = async (seconds: number, done: () => boolean): Promise<StallPhase> => {
    live.length = 0;
    longestXidMs = 0;
    longestXidQuery = "";
    longestTransactionMs = 0;
    const started = Date.now();
    const appends: Promise<unknown>[] = [];
    for (let i = 0; Date.now() - started < seconds * 1000 || !done(); i++) {
      const wait = started + (i * 1000) / o.rate - Date.now();
      if (wait > 0) await sleep(wait);
      const t0 = Date.now();
      appends.push(
        app
          .append(`live-${i % 50}`, [{ name: "Ping", data: { key: `live-${i % 50}`, t0 } }])
          .then(() => appended.notify()),
      );
    }
    await Promise.all(appends);
    const deadline = Date.now() + 120_000;
    while (live.length < appends.length && Date.now() < deadline) await sleep(10);
    const samples = live.map((l) => l.ms);
    const windows = new Map<number, number[]>();
    for (const l of live) {
      const w = Math.floor((l.t0 - started) / 5000);
      windows.set(w, [...(windows.get(w) ?? []), l.ms]);
    }
    return {
      p50Ms: percentile(samples, 50),
      p99Ms: percentile(samples, 99),
      maxMs: Math.max(...samples),
      samples: samples.length,
      worstWindowP50Ms: Math.max(...[...windows.values()].map((w) => percentile(w, 50))),
      longestXidMs,
      longestTransactionMs,
      longestXidQuery,
      load: present(loadavg()[0], "the 1-minute load average"),
    };
  };

  try {
    const baseline = await phase(o.baselineSeconds, () => true);
    let rewindMs = 0;
    let requeued = 0;
    let ended = false;
    const rewinding = (async () => {
      const t0 = performance.now();
      requeued = (await operator.rewind("rewound", { to: "beginning" })).requeued;
      rewindMs = performance.now() - t0;
    })().finally(() => {
      ended = true;
    });
    const first = sent.length;
    const during = await phase(1, () => ended);
    await rewinding;
    // the rewind call's statements: the longest (the gap to the next one sent), and the count
    const calls = sent.slice(first);
    let longestStatementMs = 0;
    let longestStatement = "";
    for (let i = 0; i + 1 < calls.length; i++) {
      const gap = present(calls[i + 1], "the next statement").at - present(calls[i], "a statement").at;
      if (gap > longestStatementMs) {
        longestStatementMs = gap;
        longestStatement = present(calls[i], "a statement").text.replace(/\s+/g, " ").slice(0, 80);
      }
    }
    return { baseline, during, rewindMs, requeued, statements: calls.length, longestStatementMs, longestStatement };
  } finally {
    stop = true;
    enqueued.notify();
    appended.notify();
    await Promise.all([loops, watching]);
    await watcher.end();
    await Promise.all([operator, app, ...consumers].map((c) => c.close()));
  }
}
