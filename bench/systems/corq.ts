// corq, measured end to end and stage by stage, through the library (Node, node-postgres).
import { createCorq, type Corq, type StoredEvent, type SubscriptionDefinition } from "../../src/index.js";
import { DEFAULT_KEYS_PER_CLAIM } from "../../src/corq/consuming.js";
import { benchClient } from "../database.js";
import { present } from "../../test/helpers/present.js";
import { advancerLoop, chunks, OrderCheck, producerItems, sleep, Wakeup, type Item } from "../workload.js";

export interface Workload {
  events: number;
  keys: number;
  consumers: number;
  batchSize: number;
  producers?: number;
  /** Keys a consumer's drain claims (and acks) per statement; the library's default when absent. */
  keysPerClaim?: number;
}

const noop = () => undefined;

/**
 * Appends the workload: `producers` concurrent producers, batches of 100, key = data.key (the
 * keys named `${keyPrefix}k…`: a warm-up's keys are not the measured run's).
 */
export async function appendWorkload(
  corq: Corq,
  w: Workload,
  onAppended?: (items: Item[]) => void,
  keyPrefix = "",
): Promise<void> {
  const producers = w.producers ?? 8;
  await Promise.all(
    Array.from({ length: producers }, async (_, p) => {
      const items = producerItems(p, producers, w.events, w.keys).map((item) => ({
        ...item,
        key: `${keyPrefix}${item.key}`,
      }));
      for (const batch of chunks(items, 100)) {
        await corq.append(
          `producer-${p}`,
          batch.map((item) => ({ name: "Work", data: { ...item, t0: Date.now() } })),
        );
        onAppended?.(batch);
      }
    }),
  );
}

function subscription(w: Workload, handle: SubscriptionDefinition["handle"], key = "data.key"): SubscriptionDefinition {
  return { name: "bench", key, batchSize: w.batchSize, leaseMs: 60_000, handle };
}

/**
 * Production's shape, in process: an append kicks the advancer (`appended`), an advance that
 * enqueued n events wakes ceil(n / keysPerClaim) of the idle consumers (`enqueued`), as
 * `npm run serve`'s runner starts drains (src/node/runner.ts, consumeEnqueued: a drain claims
 * keysPerClaim keys per statement, so more would find nothing to claim); otherwise each idles up
 * to 50 ms. Consumers that are busy draining take what is left as they claim again.
 */
interface Signals {
  appended: Wakeup;
  enqueued: Wakeup;
}

const newSignals = (): Signals => ({ appended: new Wakeup(), enqueued: new Wakeup() });

function advancer(corq: Corq, done: () => boolean, signals: Signals, keysPerClaim = DEFAULT_KEYS_PER_CLAIM) {
  return advancerLoop(
    () => corq.advance(),
    signals,
    done,
    (enqueued) => Math.ceil(enqueued / keysPerClaim),
  );
}

/** A consumer invocation: drain (one statement per claim of up to keysPerClaim keys), then wait to be woken. */
async function consumer(corq: Corq, done: () => boolean, signals: Signals, keysPerClaim?: number) {
  while (!done())
    if ((await corq.drain("bench", { budgetMs: 1000, keysPerClaim })).batches === 0) await signals.enqueued.wait(50);
}

/** End to end: first append → last handler, with producers, the advancer and consumers all running. */
/**
 * A log of `events` over `keys` appended with no subscription, then vacuumed and analyzed (what
 * autovacuum would do next, done now: it would load the machine during a baseline). A
 * subscription created afterwards `from: "now"` starts past all of it, and its rewind to the
 * beginning requeues every event: how the replay and rewind-stall benches get a large rewind.
 */
export async function loadLogWithoutSubscriptions(
  databaseUrl: string,
  o: { events: number; keys: number },
): Promise<void> {
  const loader = createCorq({ databaseUrl, poolSize: 8 });
  await loader.migrate();
  await appendWorkload(loader, { events: o.events, keys: o.keys, consumers: 8, batchSize: 100 });
  await loader.close();
  const settle = await benchClient(databaseUrl);
  await settle.query("VACUUM (ANALYZE) corq.events");
  await settle.end();
}

/**
 * What the consumers handle before a measured run starts, on keys of their own (`w…`): their
 * connections open, their statements prepared and planned, the JIT warm — a running service's
 * state, as graphile-worker's runner and DBOS are started before their clocks. `warmup: false`
 * measures from cold: each consumer's first connection and plans fall inside the time.
 */
export const WARMUP: Workload = { events: 4000, keys: 1000, consumers: 8, batchSize: 100 };

/**
 * The warm-up's dead key and queue rows, vacuumed as autovacuum would soon do: the measured run
 * then meets the tables a cold one meets, and differs from it in the connections alone.
 */
async function vacuumWarmup(databaseUrl: string) {
  const admin = await benchClient(databaseUrl);
  try {
    await admin.query("VACUUM corq.keys, corq.queue");
  } finally {
    await admin.end();
  }
}

export async function endToEnd(databaseUrl: string, w: Workload, options: { warmup?: boolean } = {}) {
  const warmup = options.warmup ?? true;
  const warmEvents = warmup ? WARMUP.events : 0;
  const check = new OrderCheck();
  let batches = 0;
  const handle = (events: StoredEvent[]) => {
    batches++;
    for (const e of events) check.record(e.data as unknown as Item);
  };
  const sub = subscription(w, handle);
  let producerStatements = 0;
  let consumerStatements = 0;
  const producer = createCorq({
    databaseUrl,
    subscriptions: [sub],
    poolSize: w.producers ?? 8,
    onStatement: () => void producerStatements++,
  });
  await producer.migrate();
  const consumers = Array.from({ length: w.consumers }, () =>
    createCorq({ databaseUrl, subscriptions: [sub], poolSize: 1, onStatement: () => void consumerStatements++ }),
  );
  const done = () => check.handled >= warmEvents + w.events;
  const signals = newSignals();
  let started = performance.now();
  let appendedAt = started;
  try {
    const loops = Promise.all([
      advancer(producer, done, signals, w.keysPerClaim),
      ...consumers.map((c) => consumer(c, done, signals, w.keysPerClaim)),
    ]);
    if (warmup) {
      await appendWorkload(producer, { ...WARMUP, producers: w.producers }, () => signals.appended.notify(), "w");
      while (check.handled < warmEvents) await sleep(5);
      await vacuumWarmup(databaseUrl);
      batches = 0;
      producerStatements = 0;
      consumerStatements = 0;
    }
    started = performance.now();
    await appendWorkload(producer, w, () => signals.appended.notify());
    appendedAt = performance.now();
    await loops;
  } finally {
    await Promise.all([producer, ...consumers].map((c) => c.close()));
  }
  const seconds = (performance.now() - started) / 1000;
  const handled = check.handled - warmEvents;
  return {
    eps: w.events / seconds,
    seconds,
    violations: check.violations,
    duplicates: check.duplicates,
    // where the time went: appending alone, and how the consumers saw the work arrive
    appendSeconds: (appendedAt - started) / 1000,
    eventsPerBatch: handled / batches,
    consumerStatementsPerEvent: consumerStatements / handled,
    producerStatements,
  };
}

/** Append alone: 8 producers, batches of 100. */
export async function appendStage(databaseUrl: string, w: Workload) {
  const corq = createCorq({ databaseUrl, poolSize: w.producers ?? 8 });
  await corq.migrate();
  const started = performance.now();
  await appendWorkload(corq, w);
  const seconds = (performance.now() - started) / 1000;
  await corq.close();
  return { eps: w.events / seconds };
}

/** Advance alone: a subscription created over an existing log replays it (key = stream or a JSON path). */
export async function advanceStage(databaseUrl: string, w: Workload, key: "stream" | "data.key") {
  const loader = createCorq({ databaseUrl });
  await loader.migrate();
  await appendWorkload(loader, w);
  await loader.close();
  const corq = createCorq({ databaseUrl, subscriptions: [subscription(w, noop, key)] });
  await corq.migrate();
  const started = performance.now();
  let enqueued = 0;
  for (;;) {
    // advance() counts only the subscriptions that advanced: one that failed is missing
    const n = present((await corq.advance()).bench, "an advance count for the bench subscription");
    if (n === 0) break;
    enqueued += n;
  }
  const seconds = (performance.now() - started) / 1000;
  await corq.close();
  return { eps: enqueued / seconds, enqueued };
}

/**
 * Consume alone: a queue already advanced, C consumers, no-op handler; statements per batch and
 * per event. `timeLimitMs` boxes the consuming (1M keys): the rate is then of what was consumed.
 */
export async function consumeStage(
  databaseUrl: string,
  w: Workload,
  timeLimitMs = 600_000,
  options: { warmup?: boolean } = {},
) {
  let statements = 0;
  const sub = subscription(w, noop);
  const loader = createCorq({ databaseUrl, subscriptions: [sub] });
  await loader.migrate();
  const consumers = Array.from({ length: w.consumers }, () =>
    createCorq({ databaseUrl, subscriptions: [sub], poolSize: 1, onStatement: () => void statements++ }),
  );
  const advanceAll = async () => {
    while (present((await loader.advance()).bench, "an advance count for the bench subscription") > 0);
  };
  // warm-up (WARMUP): the same consumers drain a queue of other keys first
  if (options.warmup ?? true) {
    await appendWorkload(loader, { ...WARMUP, producers: w.producers }, undefined, "w");
    await advanceAll();
    await Promise.all(consumers.map((c) => c.drain("bench", { budgetMs: timeLimitMs, keysPerClaim: w.keysPerClaim })));
    await vacuumWarmup(databaseUrl);
    statements = 0;
  }
  await appendWorkload(loader, w);
  await advanceAll();
  await loader.close();
  let batches = 0;
  let events = 0;
  const started = performance.now();
  await Promise.all(
    consumers.map(async (c) => {
      const drained = await c.drain("bench", { budgetMs: timeLimitMs, keysPerClaim: w.keysPerClaim });
      batches += drained.batches;
      events += drained.events;
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(consumers.map((c) => c.close()));
  // each consumer's first claim is extra: after it, every statement acks batches and claims the next
  return {
    eps: events / seconds,
    events,
    batches,
    batchesPerSecond: batches / seconds,
    statementsPerBatch: (statements - w.consumers) / batches,
    statementsPerEvent: statements / events,
  };
}

/**
 * Append-to-handler latency at a fixed offered rate (single-event appends, many keys). The first
 * `warmupSeconds` (2) at the same rate open the connections, cache the plans and warm the JIT,
 * as a running service has them (serve's bench warms up too); on a fresh database the first
 * second or so of appends also waits on WAL writes (p99 150–420 ms there). Their samples come
 * back apart (`warmup`), the rest are the figure (`samples`).
 */
export async function latency(
  databaseUrl: string,
  options: { rate: number; seconds: number; consumers: number; keysPerClaim?: number; warmupSeconds?: number },
): Promise<{ samples: number[]; warmup: number[] }> {
  const samples: number[] = [];
  const warmup: number[] = [];
  const warm = Math.round(options.rate * (options.warmupSeconds ?? 2));
  const total = warm + Math.round(options.rate * options.seconds);
  let handled = 0;
  const sub: SubscriptionDefinition = {
    name: "bench",
    key: "data.key",
    handle: (events) => {
      const now = Date.now();
      for (const e of events) {
        const { t0, i } = e.data as { t0: number; i: number };
        (i < warm ? warmup : samples).push(now - t0);
        handled++;
      }
    },
  };
  const producer = createCorq({ databaseUrl, subscriptions: [sub], poolSize: 8 });
  await producer.migrate();
  const consumers = Array.from({ length: options.consumers }, () =>
    createCorq({ databaseUrl, subscriptions: [sub], poolSize: 1 }),
  );
  const done = () => handled >= total;
  const signals = newSignals();
  const started = Date.now();
  const appends: Promise<unknown>[] = [];
  const produce = async () => {
    for (let i = 0; i < total; i++) {
      const due = started + (i * 1000) / options.rate;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      appends.push(
        producer
          .append(`s${i % 8}`, [{ name: "Ping", data: { key: `k${i % 1000}`, t0: Date.now(), i } }])
          .then(() => signals.appended.notify()),
      );
    }
    await Promise.all(appends);
  };
  await Promise.all([
    produce(),
    advancer(producer, done, signals, options.keysPerClaim),
    ...consumers.map((c) => consumer(c, done, signals, options.keysPerClaim)),
  ]);
  await Promise.all([producer, ...consumers].map((c) => c.close()));
  return { samples, warmup };
}

/**
 * A long open transaction holds the xmin horizon: the advancer must wait (never skip) and
 * resume when it ends. Events are appended while it is open; we count what was handled
 * during, then commit and time the catch-up. Table sizes before / during / after.
 */
export async function xminHorizon(databaseUrl: string, w: Workload, holdMs: number) {
  const check = new OrderCheck();
  const sub = subscription(w, (events) => {
    for (const e of events) check.record(e.data as unknown as Item);
  });
  const corq = createCorq({ databaseUrl, subscriptions: [sub], poolSize: 8 });
  await corq.migrate();
  const admin = await benchClient(databaseUrl);
  const size = async () =>
    Number(
      (await admin.query("SELECT pg_total_relation_size('corq.queue') + pg_total_relation_size('corq.keys') AS b"))
        .rows[0].b,
    );
  const before = await size();
  const holder = await benchClient(databaseUrl);
  await holder.query("BEGIN");
  await holder.query("SELECT pg_current_xact_id()");
  let stop = false;
  const signals = newSignals();
  const loops = Promise.all([
    advancer(corq, () => stop, signals),
    ...Array.from({ length: w.consumers }, () => consumer(corq, () => stop, signals)),
  ]);
  await appendWorkload(corq, w, () => signals.appended.notify());
  await sleep(holdMs);
  const handledDuring = check.handled;
  const during = await size();
  await holder.query("COMMIT");
  const released = performance.now();
  while (check.handled < w.events) await sleep(5);
  const catchUpSeconds = (performance.now() - released) / 1000;
  stop = true;
  await loops;
  const after = await size();
  await holder.end();
  await admin.end();
  await corq.close();
  return {
    handledDuring,
    catchUpEps: w.events / catchUpSeconds,
    violations: check.violations,
    bytes: { before, during, after },
  };
}
