// Issue 12 on the local Workers stack (wrangler dev + workerd + the Neon driver): how the
// Worker's database connections scale with invocation concurrency, old path against new, in
// the same run on the same Postgres cluster (its own, max_connections = 100).
//
//   "before"  CORQ_DB_DRIVER=websocket: a WebSocket Pool (a Postgres connection) per invocation,
//             through cli/dev/wsProxy.ts
//   "after"   the default http path: every one-statement operation is one request to
//             cli/dev/httpSqlEndpoint.ts, queued behind a bounded pool (CORQ_HTTP_POOL_SIZE)
//
// Deliveries go to a push subscription whose receiver (here, in this process) records when it
// first saw each position; a producer records when it sent the append. Both clocks are this
// process's performance.now(), so append→delivery includes the append request itself.
import { createServer } from "node:http";
import { startLocalStack, type LocalStack } from "../cli/dev/localStack.js";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { HTTP_SQL_APPLICATION_NAME } from "../cli/dev/httpSqlEndpoint.js";
import { createCorq } from "../src/index.js";
import { benchClient, dropDatabase, freshDatabase } from "./database.js";
import { percentile } from "./stats.js";
import { chunks, sleep } from "./workload.js";

export type Driver = "websocket" | "http";

/** What the receiver saw of one push subscription. */
interface SubscriptionLog {
  /** position → first delivery (performance.now()) */
  first: Map<number, number>;
  /** data.key → highest position delivered so far */
  last: Map<string, number>;
  violations: number;
  duplicates: number;
  requests: number;
}

/**
 * A push receiver for every subscription of a stack: first delivery per position, and per-key
 * order — each key's events first delivered in log order (position). Two appends to one stream
 * in flight at once may commit in either order; the log's order is the one promised.
 */
export async function startRecorder() {
  const logs = new Map<string, SubscriptionLog>();
  const log = (name: string) => {
    let found = logs.get(name);
    if (!found) {
      found = { first: new Map(), last: new Map(), violations: 0, duplicates: 0, requests: 0 };
      logs.set(name, found);
    }
    return found;
  };
  const server = createServer(async (request, response) => {
    const chunksIn: Buffer[] = [];
    for await (const chunk of request) chunksIn.push(chunk as Buffer);
    const now = performance.now();
    const body = JSON.parse(Buffer.concat(chunksIn).toString("utf8")) as {
      subscription: string;
      events: { position: number; data: { key: string } }[];
    };
    const sub = log(body.subscription);
    sub.requests++;
    for (const event of body.events) {
      const position = Number(event.position);
      if (sub.first.has(position)) {
        sub.duplicates++;
        continue;
      }
      sub.first.set(position, now);
      const { key } = event.data;
      if (position < (sub.last.get(key) ?? -1)) sub.violations++;
      else sub.last.set(key, position);
    }
    response.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    log,
    /** Forgets a subscription's deliveries (positions start again in the next database). */
    reset: (name: string) => void logs.delete(name),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
type Recorder = Awaited<ReturnType<typeof startRecorder>>;

/**
 * Client backends on the cluster every 50 ms (this sampler's own connection, held from the
 * start, not counted), and the cluster's committed transactions (to tell when it is idle).
 */
async function startConnectionSampler(serverUrl: string) {
  const client = await benchClient(serverUrl);
  let peak = 0;
  let peakHttp = 0;
  let other = 0;
  let busy = false;
  const transactions: { at: number; count: number }[] = [];
  const sample = async () => {
    const { rows } = await client.query(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE application_name = $1)::int AS http,
         (SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database)::float8 AS transactions
       FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      [HTTP_SQL_APPLICATION_NAME],
    );
    other = rows[0].total - rows[0].http;
    peak = Math.max(peak, rows[0].total);
    peakHttp = Math.max(peakHttp, rows[0].http);
    transactions.push({ at: performance.now(), count: rows[0].transactions });
    while (transactions.length > 100) transactions.shift();
  };
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    sample()
      .catch(() => undefined)
      .finally(() => (busy = false));
  }, 50);
  return {
    /** Starts a new peak. */
    reset: () => {
      peak = 0;
      peakHttp = 0;
    },
    peak: () => ({ total: peak, http: peakHttp }),
    /** Connections now that are not the HTTP endpoint's pool (whose idle connections stay). */
    other: () => other,
    /** Transactions per second on the cluster over the last ~2 s (this sampler's own included: ~20/s). */
    transactionRate: () => {
      const recent = transactions.filter((t) => t.at > performance.now() - 2000);
      const [first, last] = [recent[0], recent.at(-1)];
      if (recent.length < 2 || first === undefined || last === undefined) return Number.POSITIVE_INFINITY;
      return ((last.count - first.count) * 1000) / (last.at - first.at);
    },
    stop: async () => {
      clearInterval(timer);
      await client.end();
    },
  };
}
type Sampler = Awaited<ReturnType<typeof startConnectionSampler>>;

/** The cron, locally every second (production: every minute): the backstop of a kick that failed. */
export function startCron(stack: LocalStack) {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    stack
      .runCron()
      .catch(() => undefined)
      .finally(() => (running = false));
  }, 1000);
  return () => clearInterval(timer);
}

interface Appended {
  status: number;
  /** performance.now() when the request was sent */
  sentAt: number;
  ms: number;
  position?: number;
  problem?: string;
}

export async function append(stack: LocalStack, stream: string, name: string, data: unknown): Promise<Appended> {
  const sentAt = performance.now();
  try {
    const response = await fetch(`${stack.url}/streams/${stream}/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ events: [{ name, data }] }),
    });
    const text = await response.text();
    const ms = performance.now() - sentAt;
    if (response.status === 201) return { status: 201, sentAt, ms, position: Number(JSON.parse(text).positions[0]) };
    let problem = text.slice(0, 120);
    try {
      const json = JSON.parse(text) as { type?: string; title?: string };
      problem = json.type ?? json.title ?? problem;
    } catch {
      // not JSON: the text itself
    }
    return { status: response.status, sentAt, ms, problem };
  } catch (error) {
    return {
      status: 0,
      sentAt,
      ms: performance.now() - sentAt,
      problem: String((error as Error).cause ?? error).slice(0, 120),
    };
  }
}

export async function putSubscription(
  databaseUrl: string,
  name: string,
  events: string[],
  url: string,
  key = "stream",
) {
  const corq = createCorq({ databaseUrl, poolSize: 1, pushAllowPrivate: true });
  try {
    await corq.putSubscription(name, { events, key, batchSize: 100, deliver: { url } });
  } finally {
    await corq.close();
  }
}

async function deleteSubscription(databaseUrl: string, name: string) {
  const corq = createCorq({ databaseUrl, poolSize: 1, pushAllowPrivate: true });
  try {
    await corq.deleteSubscription(name);
  } finally {
    await corq.close();
  }
}

/** Waits until every position is delivered or `timeoutMs` passes; the ones never delivered. */
export async function awaitDelivery(log: SubscriptionLog, positions: number[], timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = positions.filter((p) => !log.first.has(p)).length;
    if (missing === 0 || Date.now() > deadline) return missing;
    await sleep(100);
  }
}

/**
 * Waits until the background work of a phase is over: the invocations' own connections closed
 * and the cluster about idle (Postgres' statistics lag up to a second); at most 30 s. Its seconds.
 */
async function settle(sampler: Sampler): Promise<number> {
  const started = performance.now();
  const deadline = Date.now() + 30_000;
  await sleep(2500);
  while ((sampler.other() > 0 || sampler.transactionRate() > 50) && Date.now() < deadline) await sleep(250);
  return Number(((performance.now() - started) / 1000).toFixed(1));
}

const round = (n: number, digits = 1) => (Number.isFinite(n) ? Number(n.toFixed(digits)) : null);

export function summarize(appends: Appended[], log: SubscriptionLog, lost: number) {
  const ok = appends.filter((a) => a.status === 201);
  const problems: Record<string, number> = {};
  for (const a of appends)
    if (a.status !== 201)
      problems[`${a.status} ${a.problem ?? ""}`.trim()] = (problems[`${a.status} ${a.problem ?? ""}`.trim()] ?? 0) + 1;
  const delivery = ok.filter((a) => log.first.has(a.position!)).map((a) => log.first.get(a.position!)! - a.sentAt);
  return {
    appends: appends.length,
    status201: ok.length,
    status503: appends.filter((a) => a.status === 503).length,
    other: appends.filter((a) => a.status !== 201 && a.status !== 503).length,
    problems,
    appendP50: round(
      percentile(
        appends.map((a) => a.ms),
        50,
      ),
    ),
    appendP99: round(
      percentile(
        appends.map((a) => a.ms),
        99,
      ),
    ),
    deliveryP50: round(percentile(delivery, 50)),
    deliveryP99: round(percentile(delivery, 99)),
    lost,
    outOfOrder: log.violations,
    redelivered: log.duplicates,
    /** delivered events whose append was not answered 201 (committed, then the answer failed) */
    deliveredUnconfirmed: log.first.size - (ok.length - lost),
  };
}
export type PhaseResult = ReturnType<typeof summarize>;

/** N producers, each appending single events to its own stream one after another, all at once. */
async function burst(
  stack: LocalStack,
  recorder: Recorder,
  sampler: Sampler,
  options: { producers: number; appends: number; timeoutMs: number },
) {
  const name = "bench-burst";
  recorder.reset(name);
  await putSubscription(stack.databaseUrl, name, ["Burst"], recorder.url);
  const perProducer = Math.ceil(options.appends / options.producers);
  const appends: Appended[] = [];
  sampler.reset();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: options.producers }, async (_, p) => {
      for (let seq = 0; seq < perProducer; seq++)
        appends.push(await append(stack, `burst-${p}`, "Burst", { key: `burst-${p}`, seq }));
    }),
  );
  const appendSeconds = (performance.now() - started) / 1000;
  const positions = appends.filter((a) => a.status === 201).map((a) => a.position!);
  const lost = await awaitDelivery(recorder.log(name), positions, options.timeoutMs);
  const deliveredSeconds = (performance.now() - started) / 1000;
  const peak = sampler.peak();
  const settleSeconds = await settle(sampler);
  await deleteSubscription(stack.databaseUrl, name);
  return {
    ...summarize(appends, recorder.log(name), lost),
    settleSeconds,
    producers: options.producers,
    appendsPerSecond: round(appends.length / appendSeconds, 0),
    seconds: round(deliveredSeconds),
    peakConnections: peak.total,
    peakHttpPoolConnections: peak.http,
    wsSessions: stack.wsSessions(),
  };
}

/** Single-event appends at a fixed rate (open loop: a slow answer does not slow the next send), 100 streams. */
async function steady(
  stack: LocalStack,
  recorder: Recorder,
  sampler: Sampler,
  options: { rate: number; seconds: number; timeoutMs: number },
) {
  const name = `bench-steady-${options.rate}`;
  const event = `Steady${options.rate}`;
  recorder.reset(name);
  await putSubscription(stack.databaseUrl, name, [event], recorder.url);
  const total = Math.round(options.rate * options.seconds);
  const requests: Promise<Appended>[] = [];
  sampler.reset();
  const started = performance.now();
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / options.rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    requests.push(append(stack, `steady${options.rate}-${i % 100}`, event, { key: `s${i % 100}`, seq: i }));
  }
  const appends = await Promise.all(requests);
  const positions = appends.filter((a) => a.status === 201).map((a) => a.position!);
  const lost = await awaitDelivery(recorder.log(name), positions, options.timeoutMs);
  const peak = sampler.peak();
  const settleSeconds = await settle(sampler);
  await deleteSubscription(stack.databaseUrl, name);
  return {
    ...summarize(appends, recorder.log(name), lost),
    settleSeconds,
    rate: options.rate,
    peakConnections: peak.total,
  };
}

/**
 * Network distance: append latency of sequential single-event appends (no subscription takes
 * them), then one consumer invocation (POST /consume, corq-budget-ms) draining a pre-filled
 * push subscription.
 */
async function distance(
  stack: LocalStack,
  recorder: Recorder,
  options: { appends: number; fillEvents: number; fillKeys: number; budgetMs: number },
) {
  const latencies: number[] = [];
  const statuses: number[] = [];
  // a fresh stack: the isolate's first requests (module load, first connections) are not the distance
  for (let i = 0; i < 3; i++) await append(stack, "distance-warm", "Ping", { key: "warm", seq: i });
  for (let i = 0; i < options.appends; i++) {
    const a = await append(stack, `distance-${i % 10}`, "Ping", { key: `d${i % 10}`, seq: i });
    latencies.push(a.ms);
    statuses.push(a.status);
  }
  await sleep(2000); // the appends' background advances finish before the queue is filled

  const name = "bench-drain";
  recorder.reset(name);
  const loader = createCorq({ databaseUrl: stack.databaseUrl, poolSize: 4, pushAllowPrivate: true });
  try {
    await loader.putSubscription(name, {
      events: ["Fill"],
      key: "data.key",
      batchSize: 100,
      deliver: { url: recorder.url },
    });
    const items = Array.from({ length: options.fillEvents }, (_, i) => ({
      key: `k${i % options.fillKeys}`,
      seq: Math.floor(i / options.fillKeys),
    }));
    for (const batch of chunks(items, 100))
      await loader.append(
        "fill",
        batch.map((data) => ({ name: "Fill", data })),
      );
    while (((await loader.advance())[name] ?? 0) > 0);
  } finally {
    await loader.close();
  }
  const started = performance.now();
  const response = await fetch(`${stack.url}/consume/${name}`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.adminToken}`, "corq-budget-ms": String(options.budgetMs) },
  });
  const seconds = (performance.now() - started) / 1000;
  const body =
    response.status === 200 ? ((await response.json()) as { batches: number; eventsTotal: number }) : undefined;
  if (!body) await response.body?.cancel();
  const log = recorder.log(name);
  return {
    appends: options.appends,
    refused: statuses.filter((s) => s !== 201).length,
    appendP50: round(percentile(latencies, 50)),
    appendP99: round(percentile(latencies, 99)),
    drainStatus: response.status,
    drainEvents: body?.eventsTotal ?? 0,
    drainBatches: body?.batches ?? 0,
    drainSeconds: round(seconds, 2),
    drainEventsPerSecond: round((body?.eventsTotal ?? 0) / seconds, 0),
    drainQueued: options.fillEvents,
    drainReceived: log.first.size,
    drainOutOfOrder: log.violations,
  };
}
export type DistanceResult = Awaited<ReturnType<typeof distance>>;

export interface ConnectionsOptions {
  quick: boolean;
  /** Progress lines (stderr is fine): each phase as it ends. */
  progress?: (line: string) => void;
}

export async function measureConnections(options: ConnectionsOptions) {
  const { quick } = options;
  const progress = options.progress ?? (() => undefined);
  const maxConnections = 100;
  const httpPoolSize = 20;
  const plan = {
    producers: 200,
    burstAppends: quick ? 1000 : 3000,
    steadySeconds: quick ? 5 : 10,
    steadyRates: { http: quick ? [50] : [50, 200], websocket: [50] } as Record<Driver, number[]>,
    latencies: [0, 10],
    sequentialAppends: quick ? 20 : 50,
    fillEvents: quick ? 10_000 : 20_000,
    fillKeys: quick ? 500 : 1000,
    budgetMs: 3000,
    timeoutMs: quick ? 30_000 : 60_000,
  };
  const cluster = await startEmbeddedPostgres({ settings: { max_connections: String(maxConnections) } });
  const sampler = await startConnectionSampler(cluster.url);
  const recorder = await startRecorder();
  const burstResults = {} as Record<Driver, Awaited<ReturnType<typeof burst>>>;
  const steadyResults: Record<string, Awaited<ReturnType<typeof steady>>> = {};
  const distanceResults = {} as Record<Driver, Record<number, DistanceResult>>;
  const startupSeconds: number[] = [];
  const started = performance.now();

  /** A fresh database and a local stack on it, for one driver and one network distance. */
  const withStack = async (driver: Driver, dbLatencyMs: number, fn: (stack: LocalStack) => Promise<void>) => {
    const databaseUrl = await freshDatabase(cluster.url, `conn_${driver}`);
    const started = performance.now();
    const stack = await startLocalStack({
      databaseUrl,
      httpPoolSize,
      dbLatencyMs,
      vars: driver === "websocket" ? { CORQ_DB_DRIVER: "websocket" } : {},
      logLevel: "none", // the old path logs every refused connection; the counts are below
    });
    startupSeconds.push((performance.now() - started) / 1000);
    try {
      await fn(stack);
    } finally {
      await stack.stop();
      await dropDatabase(cluster.url, databaseUrl);
    }
  };

  try {
    for (const driver of ["websocket", "http"] as const) {
      await withStack(driver, 0, async (stack) => {
        const stopCron = startCron(stack);
        try {
          burstResults[driver] = await burst(stack, recorder, sampler, {
            producers: plan.producers,
            appends: plan.burstAppends,
            timeoutMs: plan.timeoutMs,
          });
          progress(`connections: burst ${driver}: ${JSON.stringify(burstResults[driver])}`);
          for (const rate of plan.steadyRates[driver]) {
            steadyResults[`${driver}_${rate}`] = await steady(stack, recorder, sampler, {
              rate,
              seconds: plan.steadySeconds,
              timeoutMs: plan.timeoutMs,
            });
            progress(`connections: steady ${driver} ${rate}/s: ${JSON.stringify(steadyResults[`${driver}_${rate}`])}`);
          }
        } finally {
          stopCron();
        }
        await settle(sampler);
        distanceResults[driver] = { 0: await distance(stack, recorder, { ...plan, appends: plan.sequentialAppends }) };
        progress(`connections: distance ${driver} 0 ms: ${JSON.stringify(distanceResults[driver][0])}`);
      });
    }
    for (const latency of plan.latencies.filter((l) => l > 0)) {
      for (const driver of ["websocket", "http"] as const) {
        await withStack(driver, latency, async (stack) => {
          distanceResults[driver][latency] = await distance(stack, recorder, {
            ...plan,
            appends: plan.sequentialAppends,
          });
          progress(
            `connections: distance ${driver} ${latency} ms: ${JSON.stringify(distanceResults[driver][latency])}`,
          );
        });
      }
    }
  } finally {
    await recorder.close();
    await sampler.stop();
    await cluster.stop();
  }
  return {
    seconds: round((performance.now() - started) / 1000, 0),
    maxConnections,
    httpPoolSize,
    plan,
    burst: burstResults,
    steady: steadyResults,
    distance: distanceResults,
    stackStartupSeconds: startupSeconds.map((s) => round(s)),
  };
}
export type ConnectionsResult = Awaited<ReturnType<typeof measureConnections>>;

const label = { websocket: "websocket (before)", http: "http (after)" } as const;
const ms = (p50: number | null, p99: number | null) => `${p50 ?? "–"} / ${p99 ?? "–"}`;
const int = (n: number) => Math.round(n).toLocaleString("en");
/** after / before, as "0.42×" ("–" when either is missing or the before is 0). */
const ratio = (after: number | null | undefined, before: number | null | undefined) =>
  after == null || before == null || before === 0 ? "–" : `${(after / before).toFixed(2)}×`;

/** The section's Markdown lines (bench/run.ts prints them and writes them to RESULTS.md). */
export function connectionLines(r: ConnectionsResult): string[] {
  const lines: string[] = [];
  const { plan } = r;
  lines.push(
    `Own embedded Postgres cluster, max_connections = ${r.maxConnections}; the Worker under wrangler dev (workerd); before = \`CORQ_DB_DRIVER=websocket\` ` +
      `(a WebSocket Pool per invocation through cli/dev/wsProxy.ts), after = the default http path (cli/dev/httpSqlEndpoint.ts, pool ${r.httpPoolSize}). ` +
      `Deliveries: a push subscription (key = stream, batch 100) to a receiver in the bench process; the local cron every second. ` +
      `Append→delivery runs from sending the append to the receiver's first sight of the event. Peak connections: client backends on the cluster, sampled every 50 ms (the sampler's own not counted). ` +
      `Section runtime ${r.seconds} s (${r.stackStartupSeconds.length} stacks, ${r.stackStartupSeconds.join(" / ")} s to start).`,
  );

  const [bw, bh] = [r.burst.websocket, r.burst.http];
  lines.push(
    `\n### ${plan.producers} concurrent producers: ${int(bw.appends)} single-event appends (${plan.producers} × ${Math.ceil(plan.burstAppends / plan.producers)}, each producer its own stream)`,
  );
  lines.push(
    "| path | 201 | 503 | other | appends/s | append p50 / p99 ms | append→delivery p50 / p99 ms | lost | out of order | peak connections | WebSocket sessions |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const [driver, b] of [
    ["websocket", bw],
    ["http", bh],
  ] as const) {
    lines.push(
      `| ${label[driver]} | ${b.status201} | ${b.status503} | ${b.other} | ${b.appendsPerSecond} | ${ms(b.appendP50, b.appendP99)} | ${ms(b.deliveryP50, b.deliveryP99)} | ${b.lost} | ${b.outOfOrder} | ${b.peakConnections} | ${b.wsSessions} |`,
    );
  }
  lines.push(
    `| after / before | ${ratio(bh.status201, bw.status201)} | ${bh.status503} vs ${bw.status503} | | ${ratio(bh.appendsPerSecond, bw.appendsPerSecond)} | ${ratio(bh.appendP50, bw.appendP50)} / ${ratio(bh.appendP99, bw.appendP99)} | ${ratio(bh.deliveryP50, bw.deliveryP50)} / ${ratio(bh.deliveryP99, bw.deliveryP99)} | | | ${ratio(bh.peakConnections, bw.peakConnections)} | |`,
  );
  for (const [driver, b] of [
    ["websocket", bw],
    ["http", bh],
  ] as const) {
    const refusals = Object.entries(b.problems).map(([what, n]) => `${n} × ${what}`);
    if (refusals.length) lines.push(`${label[driver]} refusals: ${refusals.join("; ")}`);
  }

  lines.push(
    `\n### Steady rate: single-event appends for ${plan.steadySeconds} s over 100 streams (sent on schedule, not waiting for answers)`,
  );
  lines.push(
    "| path | offered/s | 201 of sent | append p50 / p99 ms | append→handler p50 / p99 ms | lost | out of order | peak connections |",
  );
  lines.push("|---|---|---|---|---|---|---|---|");
  for (const [name, st] of Object.entries(r.steady)) {
    const driver = name.split("_")[0] as Driver;
    lines.push(
      `| ${label[driver]} | ${st.rate} | ${st.status201} of ${st.appends} | ${ms(st.appendP50, st.appendP99)} | ${ms(st.deliveryP50, st.deliveryP99)} | ${st.lost} | ${st.outOfOrder} | ${st.peakConnections} |`,
    );
  }
  const [sw, sh] = [r.steady.websocket_50, r.steady.http_50];
  if (sw && sh)
    lines.push(
      `| after / before at 50/s | | | ${ratio(sh.appendP50, sw.appendP50)} / ${ratio(sh.appendP99, sw.appendP99)} | ${ratio(sh.deliveryP50, sw.deliveryP50)} / ${ratio(sh.deliveryP99, sw.deliveryP99)} | | | ${ratio(sh.peakConnections, sw.peakConnections)} |`,
    );

  lines.push(
    `\n### Network distance (CORQ_DB_LATENCY_MS: half of it on each HTTP statement's way in and out, on each WebSocket message in each direction, a round trip on the WebSocket upgrade)`,
  );
  lines.push(
    `| path | latency ms | append p50 / p99 ms (${plan.sequentialAppends} one after another) | one consumer invocation (POST /consume, corq-budget-ms ${plan.budgetMs}; ${int(plan.fillEvents)} events queued over ${int(plan.fillKeys)} keys): events, batches, seconds | events/s |`,
  );
  lines.push("|---|---|---|---|---|");
  for (const latency of plan.latencies) {
    for (const driver of ["websocket", "http"] as const) {
      const d = r.distance[driver]?.[latency];
      if (!d) continue;
      lines.push(
        `| ${label[driver]} | ${latency} | ${ms(d.appendP50, d.appendP99)} | ${int(d.drainEvents)}, ${d.drainBatches}, ${d.drainSeconds} | ${int(d.drainEventsPerSecond ?? 0)} |`,
      );
    }
    const [w, h] = [r.distance.websocket?.[latency], r.distance.http?.[latency]];
    if (w && h)
      lines.push(
        `| after / before | ${latency} | ${ratio(h.appendP50, w.appendP50)} / ${ratio(h.appendP99, w.appendP99)} | | ${ratio(h.drainEventsPerSecond, w.drainEventsPerSecond)} |`,
      );
  }

  const far = Math.max(...plan.latencies);
  const check = (ok: boolean) => (ok ? "met" : "**missed**");
  lines.push(
    `\nTargets (issue 12): http path 0 refused (${bh.status503 + bh.other}: ${check(bh.status503 + bh.other === 0)}), nothing lost (${bh.lost}: ${check(bh.lost === 0)}), ` +
      `order kept (${bh.outOfOrder} out of order: ${check(bh.outOfOrder === 0)}), connections ≤ pool + a few (peak ${bh.peakConnections}, pool ${r.httpPoolSize}: ${check(bh.peakConnections <= r.httpPoolSize + 5)}); ` +
      (sh
        ? `append→handler at 50/s p50 ≤ 30 ms (${sh.deliveryP50}: ${check((sh.deliveryP50 ?? Infinity) <= 30)}), p99 ≤ 150 ms (${sh.deliveryP99}: ${check((sh.deliveryP99 ?? Infinity) <= 150)}); `
        : "") +
      `append p50 ≤ 25 ms at ${far} ms from the database (${r.distance.http?.[far]?.appendP50}: ${check((r.distance.http?.[far]?.appendP50 ?? Infinity) <= 25)}).`,
  );
  return lines;
}

/** The section's figures for the bench's final JSON line. */
export function connectionsJson(r: ConnectionsResult) {
  const burst = (b: ConnectionsResult["burst"][Driver]) => ({
    ok: b.status201,
    refused_503: b.status503,
    other: b.other,
    appends_per_s: b.appendsPerSecond,
    append_p50_ms: b.appendP50,
    append_p99_ms: b.appendP99,
    delivery_p50_ms: b.deliveryP50,
    delivery_p99_ms: b.deliveryP99,
    lost: b.lost,
    out_of_order: b.outOfOrder,
    peak_connections: b.peakConnections,
    ws_sessions: b.wsSessions,
  });
  const steadyJson = Object.fromEntries(
    Object.entries(r.steady).map(([name, st]) => [
      name,
      {
        ok: st.status201,
        sent: st.appends,
        append_p50_ms: st.appendP50,
        append_p99_ms: st.appendP99,
        handler_p50_ms: st.deliveryP50,
        handler_p99_ms: st.deliveryP99,
        lost: st.lost,
        out_of_order: st.outOfOrder,
        peak_connections: st.peakConnections,
      },
    ]),
  );
  const distanceJson = Object.fromEntries(
    (["websocket", "http"] as const).map((driver) => [
      driver,
      Object.fromEntries(
        Object.entries(r.distance[driver] ?? {}).map(([latency, d]) => [
          `${latency}ms`,
          {
            append_p50_ms: d.appendP50,
            append_p99_ms: d.appendP99,
            drain_events: d.drainEvents,
            drain_batches: d.drainBatches,
            drain_eps: d.drainEventsPerSecond,
          },
        ]),
      ),
    ]),
  );
  return {
    seconds: r.seconds,
    max_connections: r.maxConnections,
    http_pool: r.httpPoolSize,
    producers: r.plan.producers,
    burst: { websocket: burst(r.burst.websocket), http: burst(r.burst.http) },
    steady: steadyJson,
    distance: distanceJson,
  };
}
