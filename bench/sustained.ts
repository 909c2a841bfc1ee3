// The sustained run (issue 30): a saga-shaped workload at a fixed rate for many minutes, with
// retention and idle-key compaction on, to show whether speed and size hold as time passes.
//
//   producers  new sagas all the time: saga n is the stream `saga-<n>`, its `steps` events are
//              appended one at a time, `stepGapMs` apart (a process that lives a few seconds),
//              at `rate` events/s in total; every event carries the saga's customer
//              (`data.customer`, one of `customers`: long-lived keys) and its append time
//   byStream   a subscription keyed by the stream: a key per saga, idle once the saga ends
//   byCustomer a subscription keyed by the JSON path data.customer: keys that never go idle
//   upkeep     every `upkeepMs`: one retention pass and one housekeeping pass (idle keys), as the
//              cron or the serve loop would run them
//
// Per minute: events appended and handled per second, append→handler p50/p99 (both
// subscriptions), the size of every corq table with its indexes, dead tuples, key rows, the
// machine's load. At the end every appended event must have been handled by both subscriptions
// in per-stream version order: `lost` and `outOfOrder` count what was not.
import { loadavg } from "node:os";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { createCorqRuntime } from "../src/internal.js";
import { benchClient } from "./database.js";
import { percentile } from "./stats.js";
import { sleep, Wakeup } from "./workload.js";

export interface SustainedOptions {
  minutes: number;
  /** Events appended per second, in total. */
  rate: number;
  /** Events per saga, and the time between two of them. */
  steps: number;
  stepGapMs: number;
  customers: number;
  /** Retention: events older than this go (once both subscriptions are past them). */
  retentionMs: number;
  /** Idle key rows older than this go. */
  keyIdleMs: number;
  /** Consumers (drain loops) per subscription. */
  consumers: number;
  upkeepMs: number;
  /** Called with each minute's row as it is measured. */
  onRow?: (row: MinuteRow) => void;
}

export interface MinuteRow {
  minute: number;
  appendedPerSecond: number;
  handledPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Bytes of each corq table, its indexes and TOAST included. */
  sizes: Record<string, number>;
  deadTuples: Record<string, number>;
  keyRows: number;
  retentionDeleted: number;
  keysCompacted: number;
  load: number;
}

export interface SustainedResult {
  rows: MinuteRow[];
  appended: number;
  handled: number;
  lost: number;
  outOfOrder: number;
  duplicates: number;
  /** Appends that had to wait: the producer could not keep the rate (it was behind by this much at the end, ms). */
  behindMs: number;
}

/** The tables whose size the run follows (every table corq has, by name). */
const tables = ["events", "streams", "queue", "keys", "subscriptions", "activity", "throughput"];

export async function sustainedRun(databaseUrl: string, o: SustainedOptions): Promise<SustainedResult> {
  const handledBy = { byStream: new Map<string, number>(), byCustomer: new Map<string, number>() };
  /** stream → events appended to it so far (removed once both subscriptions handled its last step). */
  const appendedTo = new Map<string, number>();
  let outOfOrder = 0;
  let duplicates = 0;
  let handled = 0;
  let latencies: number[] = [];
  const handler = (name: keyof typeof handledBy) => (events: DeliveredEvent[]) => {
    const now = Date.now();
    const last = handledBy[name];
    for (const e of events) {
      // per stream, versions 0, 1, 2 … in order; the count handled so far is the next one expected,
      // and a version below it is a redelivery
      const seen = last.get(e.stream) ?? 0;
      if (e.version < seen) duplicates++;
      else {
        if (e.version !== seen) outOfOrder++;
        last.set(e.stream, e.version + 1);
        handled++;
        latencies.push(now - (e.data as { t0: number }).t0);
        forgetIfDone(e.stream);
      }
    }
  };
  const forgetIfDone = (stream: string) => {
    const appended = appendedTo.get(stream);
    if (appended !== o.steps) return;
    if (handledBy.byStream.get(stream) === o.steps && handledBy.byCustomer.get(stream) === o.steps) {
      appendedTo.delete(stream);
      handledBy.byStream.delete(stream);
      handledBy.byCustomer.delete(stream);
    }
  };
  const subscriptions: SubscriptionDefinition[] = [
    { name: "byStream", key: "stream", batchSize: 50, handle: handler("byStream") },
    { name: "byCustomer", key: "data.customer", batchSize: 50, handle: handler("byCustomer") },
  ];
  const options = { databaseUrl, subscriptions, keyIdleMs: o.keyIdleMs };
  const corq = createCorqRuntime({ ...options, poolSize: 8 });
  await corq.migrate();
  await corq.setRetention({ maxAgeMs: o.retentionMs });
  const consumers: Corq[] = subscriptions.flatMap(() =>
    Array.from({ length: o.consumers }, () => createCorq({ ...options, poolSize: 1 })),
  );
  const db = await benchClient(databaseUrl);

  let stop = false;
  let producing = true;
  const enqueued = new Wakeup();
  const appendedWake = new Wakeup();
  let appended = 0;
  let retentionDeleted = 0;
  let keysCompacted = 0;
  const loops = [
    (async () => {
      while (!stop) {
        const advanced = await corq.advance();
        if (Object.values(advanced).some((n) => n > 0)) enqueued.notify();
        else await appendedWake.wait(50);
      }
    })(),
    ...consumers.map(async (c, i) => {
      const name = subscriptions[Math.floor(i / o.consumers)]?.name ?? "";
      while (!stop) {
        const drained = await c.drain(name, { budgetMs: 1000 });
        if (drained.batches === 0) await enqueued.wait(50);
      }
    }),
    (async () => {
      while (!stop) {
        await sleep(o.upkeepMs);
        retentionDeleted += (await corq.runRetention()).deleted;
        keysCompacted += (await corq.housekeeping()).keys;
      }
    })(),
  ];

  // the producer: one event per append, each saga's next step `stepGapMs` after the last
  const started = Date.now();
  const due: { at: number; stream: string; customer: string }[] = [];
  let nextSaga = 0;
  let behindMs = 0;
  const inFlight = new Set<Promise<unknown>>();
  const producer = (async () => {
    for (let i = 0; producing; i++) {
      const at = started + (i * 1000) / o.rate;
      const wait = at - Date.now();
      if (wait > 0) await sleep(wait);
      behindMs = Math.max(0, -wait);
      // the oldest saga whose next step is due, else a new saga
      const next =
        due.length > 0 && (due[0]?.at ?? 0) <= Date.now()
          ? (due.shift() as (typeof due)[number])
          : { at: 0, stream: `saga-${nextSaga}`, customer: `c${nextSaga++ % o.customers}` };
      const version = (appendedTo.get(next.stream) ?? 0) + 1;
      appendedTo.set(next.stream, version);
      if (version < o.steps) due.push({ at: Date.now() + o.stepGapMs, stream: next.stream, customer: next.customer });
      const append = corq
        .append(next.stream, [{ name: `Step${version}`, data: { customer: next.customer, t0: Date.now() } }], {
          expectedVersion: version - 2, // the stream's versions count from 0; -1: it does not exist yet
        })
        .then(() => {
          appended++;
          appendedWake.notify();
        });
      inFlight.add(append);
      void append.finally(() => inFlight.delete(append));
      // a bounded number in flight: past it the producer falls behind (and says so) rather than pile up
      while (inFlight.size >= 64) await Promise.race(inFlight);
    }
  })();

  const rows: MinuteRow[] = [];
  let lastAppended = 0;
  let lastHandled = 0;
  let lastDeleted = 0;
  let lastCompacted = 0;
  try {
    for (let minute = 1; minute <= o.minutes; minute++) {
      await sleep(started + minute * 60_000 - Date.now());
      const samples = latencies;
      latencies = [];
      const sizes: Record<string, number> = {};
      const deadTuples: Record<string, number> = {};
      const measured = await db.query<{ name: string; bytes: string; dead: string }>(
        `SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes, coalesce(s.n_dead_tup, 0) AS dead
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
          WHERE n.nspname = 'corq' AND c.relkind = 'r' AND c.relname = ANY($1)`,
        [tables],
      );
      for (const r of measured.rows) {
        sizes[r.name] = Number(r.bytes);
        deadTuples[r.name] = Number(r.dead);
      }
      const keyRows = Number((await db.query("SELECT count(*) AS n FROM corq.keys")).rows[0].n);
      rows.push({
        minute,
        appendedPerSecond: (appended - lastAppended) / 60,
        handledPerSecond: (handled - lastHandled) / 60,
        p50Ms: percentile(samples, 50),
        p99Ms: percentile(samples, 99),
        sizes,
        deadTuples,
        keyRows,
        retentionDeleted: retentionDeleted - lastDeleted,
        keysCompacted: keysCompacted - lastCompacted,
        load: loadavg()[0] ?? 0,
      });
      [lastAppended, lastHandled, lastDeleted, lastCompacted] = [appended, handled, retentionDeleted, keysCompacted];
      o.onRow?.(rows[rows.length - 1] as MinuteRow);
    }
    producing = false;
    await producer;
    await Promise.all(inFlight);
    // sagas still open end where they are: both subscriptions must handle every event appended
    const settled = () =>
      [...appendedTo].every(
        ([stream, n]) => handledBy.byStream.get(stream) === n && handledBy.byCustomer.get(stream) === n,
      );
    const drainUntil = Date.now() + 120_000;
    while (!settled() && Date.now() < drainUntil) await sleep(200);
  } finally {
    stop = true;
    producing = false;
    enqueued.notify();
    appendedWake.notify();
    await Promise.allSettled(loops);
    await db.end();
    await Promise.all([corq, ...consumers].map((c) => c.close()));
  }
  // what is left in appendedTo was not handled to its last appended version by both
  let lost = 0;
  for (const [stream, version] of appendedTo) {
    lost += version - (handledBy.byStream.get(stream) ?? 0);
    lost += version - (handledBy.byCustomer.get(stream) ?? 0);
  }
  return { rows, appended, handled, lost, outOfOrder, duplicates, behindMs };
}

const mb = (bytes: number | undefined) => ((bytes ?? 0) / 2 ** 20).toFixed(1);

export function formatRow(r: MinuteRow): string {
  return `| ${r.minute} | ${Math.round(r.appendedPerSecond)} | ${Math.round(r.handledPerSecond)} | ${r.p50Ms} | ${r.p99Ms} | ${mb(r.sizes.events)} | ${mb(r.sizes.queue)} | ${mb(r.sizes.keys)} | ${r.keyRows.toLocaleString("en")} | ${r.deadTuples.events ?? 0} / ${r.deadTuples.queue ?? 0} / ${r.deadTuples.keys ?? 0} | ${r.retentionDeleted.toLocaleString("en")} | ${r.keysCompacted.toLocaleString("en")} | ${r.load.toFixed(1)} |`;
}

export const tableHeader =
  "| minute | appended/s | handled/s (both subscriptions) | p50 ms | p99 ms | events MB | queue MB | keys MB | key rows | dead tuples events / queue / keys | retention deleted | keys compacted | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|";
