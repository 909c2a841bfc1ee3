// Delayed events on Node (issue 32's target): events appended with deliverAt spread over the
// next seconds, consumed by one serve process (role "worker": the advancer and the consumers,
// woken at the next due key). Counts events handed out before their time — the target is none —
// and how late after it each was handled. Each key's events have rising times, so a key's wait
// is its own event's time, not the one before it (that would be order, not delay).
import { loadavg } from "node:os";
import { createCorq } from "../src/index.js";
import { startServe } from "../src/node/serve.js";
import { percentile } from "./stats.js";

export interface DelayRun {
  events: number;
  early: number;
  lateP50Ms: number;
  lateP99Ms: number;
  lateMaxMs: number;
  handled: number;
  /** How long the appends took, and how many events were due before they were all in. */
  appendMs: number;
  dueBeforeAppended: number;
  load: number;
}

export async function delayedDelivery(
  databaseUrl: string,
  { events, keys, spreadMs }: { events: number; keys: number; spreadMs: number },
): Promise<DelayRun> {
  const handled: { at: number; due: number }[] = [];
  const serve = await startServe({
    subscriptions: [
      {
        name: "delayed",
        key: "stream",
        batchSize: 100,
        handle: (batch) => {
          const at = Date.now();
          for (const e of batch) handled.push({ at, due: Date.parse(e.deliverAt ?? "") });
        },
      },
    ],
    env: { DATABASE_URL: databaseUrl, CORQ_CONCURRENCY: "8" },
    role: "worker",
    log: () => undefined,
  });
  const producer = createCorq({ databaseUrl, poolSize: 8, notify: true });
  try {
    const begun = Date.now();
    const start = begun + 5000; // after the appends are in (appendMs says whether they were)
    const perKey = Math.ceil(events / keys);
    const streams = Array.from({ length: keys }, () => {
      const times = Array.from({ length: perKey }, () => start + Math.random() * spreadMs).sort((a, b) => a - b);
      return times.map((t, i) => ({ name: "Later", data: { i }, deliverAt: new Date(t).toISOString() }));
    });
    for (let k = 0; k < keys; k += 8)
      await Promise.all(streams.slice(k, k + 8).map((batch, j) => producer.append(`delayed-${k + j}`, batch)));
    const appended = Date.now();
    const total = streams.reduce((n, s) => n + s.length, 0);
    const deadline = start + spreadMs + 30_000;
    while (handled.length < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    // late after its time, or after the appends were in when they took longer than planned
    const late = handled.map((h) => h.at - Math.max(h.due, appended)).sort((a, b) => a - b);
    return {
      events: total,
      early: handled.filter((h) => h.at < h.due).length,
      appendMs: appended - begun,
      dueBeforeAppended: handled.filter((h) => h.due < appended).length,
      lateP50Ms: percentile(late, 50),
      lateP99Ms: percentile(late, 99),
      lateMaxMs: late.at(-1) ?? Number.NaN,
      handled: handled.length,
      load: loadavg()[0] ?? 0,
    };
  } finally {
    await producer.close();
    await serve.stop();
  }
}
