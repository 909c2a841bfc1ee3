// The self-hosted Node runtime (`npm run serve`, src/node/serve.ts): append→handler latency of
// single-event appends over HTTP at a fixed rate against one serve process, its CPU while idle,
// and what NOTIFY costs an append (the same appends with and without it, in the same run).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { createCorq } from "../src/index.js";
import { createExecutor } from "../src/db/executor.js";
import { appendEvents } from "../src/sql/log/appendEvents.js";
import { WAKE_CHANNEL } from "../src/sql/log/notify.js";
import { benchPool } from "./database.js";
import { median, percentile, spreadPercent } from "./stats.js";
import { present } from "../test/helpers/present.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.timeOrigin + performance.now();
const TOKEN = "bench-admin-token-0123456789abcdef0123";

/** One serve process (bench/serveEntry.ts) and the handled times it printed, by position. */
async function startBenchServe(databaseUrl: string, env: Record<string, string> = {}) {
  // NODE_ARGS: node's own flags for the process (a profiler); SERVE_ROOT: another checkout's
  // serve, for a before/after in one run (bench/serveProbe.ts)
  const { NODE_ARGS: nodeArgs = "", SERVE_ROOT: serveRoot = root, ...serveEnv } = env;
  const args = [...nodeArgs.split(" ").filter(Boolean), "--import", "tsx", "bench/serveEntry.ts"];
  const child = spawn(process.execPath, args, {
    cwd: serveRoot,
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: "0", CORQ_ADMIN_TOKEN: TOKEN, ...serveEnv },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const handled = new Map<number, { at: number; createdAt: number }>();
  const handledKeys = new Map<string, number>(); // key → when first handled
  const holding = new Map<string, number>(); // key → when a holding handler started (BENCH_HOLD)
  let buffered = "";
  let errors = "";
  child.stderr.on("data", (chunk: Buffer) => {
    errors += chunk.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) {
        if (line.startsWith("H ")) {
          const [, position, at, createdAt, key] = line.split(" ");
          if (!handled.has(Number(position)))
            handled.set(Number(position), { at: Number(at), createdAt: Number(createdAt) });
          if (key === undefined) throw new Error(`serve printed a line without a key: ${line}`);
          if (!handledKeys.has(key)) handledKeys.set(key, Number(at));
        } else if (line.startsWith("S ")) {
          const [, key, at] = line.split(" ");
          if (key === undefined) throw new Error(`serve printed a line without a key: ${line}`);
          holding.set(key, Number(at));
        } else if (line.startsWith("corq ready ")) resolve(line.slice("corq ready ".length));
      }
    });
    child.once("exit", (code) => reject(new Error(`bench serve exited ${code}: ${errors}`)));
  });
  /** CPU seconds (user + system) the process used so far. */
  const cpuSeconds = () => {
    const fields = present(
      readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1],
      "/proc/<pid>/stat's fields",
    ).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  };
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGTERM");
    return exited;
  };
  return { url, handled, handledKeys, holding, cpuSeconds, stop };
}

/**
 * Single-event appends, one every 1/rate s for `seconds` — the workload of the library loop's
 * latency benchmark (bench/systems/corq.ts): event i to stream s{i mod 8}, key data.key =
 * k{i mod 1000} — over HTTP to the serve process, or from the library (`notify: true`) into
 * the database it serves. Each is timed from when it was DUE (a producer that falls behind
 * counts against the latency); the handler's time is printed by the serve process. Then the
 * process idles: its CPU over `idleSeconds`.
 */
export async function serveLatency(
  databaseUrl: string,
  options: {
    rate: number;
    seconds: number;
    idleSeconds?: number;
    via?: "http" | "library";
    /** More environment for the serve process (a variant's knobs, a profiler). */
    env?: Record<string, string>;
    /** Streams the appends go to, round robin (default 8, the library loop's workload). */
    streams?: number;
  },
) {
  const streams = options.streams ?? 8;
  // SPLIT=1: the HTTP API in one process (CORQ_ROLE=api), the consumers in another (worker)
  const { SPLIT: split, ...env } = options.env ?? {};
  const worker = await startBenchServe(databaseUrl, split === "1" ? { ...env, CORQ_ROLE: "worker" } : env);
  const api = split === "1" ? await startBenchServe(databaseUrl, { ...env, CORQ_ROLE: "api" }) : undefined;
  const serve = {
    url: api?.url ?? worker.url,
    handled: worker.handled,
    cpuSeconds: () => worker.cpuSeconds() + (api?.cpuSeconds() ?? 0),
    stop: async () => {
      await api?.stop();
      return worker.stop();
    },
  };
  const producer = options.via === "library" ? createCorq({ databaseUrl, poolSize: 8, notify: true }) : undefined;
  const overHttp = appender(serve.url);
  const post = producer
    ? async (stream: string, key: string) =>
        present(
          (await producer.append(stream, [{ name: "Ping", data: { key } }])).positions[0],
          "the append's position",
        )
    : overHttp;
  try {
    // warm-up: connections, JIT, prepared statements
    for (let i = 0; i < 200; i++) await post(`s${i % streams}`, `k${i % 1000}`);
    await sleep(500);
    const total = Math.round(options.rate * options.seconds);
    const cpuBefore = serve.cpuSeconds();
    const due = new Map<number, number>();
    // where the time goes: due → sent (the producer behind), sent → answered (the append's request)
    const sentLate: number[] = [];
    const answeredIn = new Map<number, number>();
    const ownCpuBefore = process.cpuUsage();
    const started = now() + 50;
    const inFlight: Promise<void>[] = [];
    let failed = 0;
    let failure: string | undefined; // the first refusal's reason
    for (let i = 0; i < total; i++) {
      const at = started + (i * 1000) / options.rate;
      const wait = at - now();
      if (wait > 1) await sleep(wait);
      const sent = now();
      sentLate.push(sent - at);
      inFlight.push(
        post(`s${i % streams}`, `k${i % 1000}`).then(
          (position) => {
            due.set(position, at);
            answeredIn.set(position, now() - sent);
          },
          (error: unknown) => {
            failed++;
            failure ??= String(error);
          },
        ),
      );
    }
    await Promise.all(inFlight);
    const elapsedS = (now() - started) / 1000;
    const loadCpuPercent = ((serve.cpuSeconds() - cpuBefore) / elapsedS) * 100;
    const ownCpu = process.cpuUsage(ownCpuBefore);
    const producerCpuPercent = ((ownCpu.user + ownCpu.system) / 1e6 / elapsedS) * 100;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && [...due.keys()].some((p) => !serve.handled.has(p))) await sleep(50);
    const latencies = [...due].map(([position, at]) => (serve.handled.get(position)?.at ?? Number.NaN) - at);
    const lost = latencies.filter(Number.isNaN).length;
    const measured = latencies.filter((ms) => !Number.isNaN(ms));
    // from the append's start in the database (createdAt, millisecond resolution) to the handler
    const fromCommit = [...due.keys()].flatMap((position) => {
      const h = serve.handled.get(position);
      return h ? [h.at - h.createdAt] : [];
    });
    let idleCpuPercent: number | undefined;
    if (options.idleSeconds) {
      await sleep(2000);
      const before = serve.cpuSeconds();
      await sleep(options.idleSeconds * 1000);
      idleCpuPercent = ((serve.cpuSeconds() - before) / options.idleSeconds) * 100;
    }
    return {
      rate: options.rate,
      appends: total,
      failed,
      failure,
      lost,
      p50Ms: percentile(measured, 50),
      p99Ms: percentile(measured, 99),
      maxMs: Math.max(...measured),
      inDatabaseP50Ms: percentile(fromCommit, 50),
      inDatabaseP99Ms: percentile(fromCommit, 99),
      loadCpuPercent,
      idleCpuPercent,
      // the breakdown (bench/serveProbe.ts prints it)
      sentLateP50Ms: percentile(sentLate, 50),
      sentLateP99Ms: percentile(sentLate, 99),
      requestP50Ms: percentile([...answeredIn.values()], 50),
      requestP99Ms: percentile([...answeredIn.values()], 99),
      producerCpuPercent,
    };
  } finally {
    await producer?.close();
    await serve.stop();
  }
}

/** POSTs single-event appends over keep-alive connections (node:http: lighter than fetch, less client-side noise). */
function appender(url: string) {
  const target = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  return (stream: string, key: string) =>
    new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ events: [{ name: "Ping", data: { key } }] });
      const request = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: `/streams/${stream}/events`,
          method: "POST",
          agent,
          headers: {
            authorization: `Bearer ${TOKEN}`,
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
          },
        },
        (response) => {
          let text = "";
          response.on("data", (chunk) => {
            text += chunk;
          });
          response.on("end", () => {
            const [position] =
              response.statusCode === 201 ? (JSON.parse(text) as { positions: number[] }).positions : [];
            if (position === undefined)
              reject(new Error(`append answered ${response.statusCode}: ${text.slice(0, 300)}`));
            else resolve(position);
          });
        },
      );
      request.on("error", reject);
      request.end(body);
    });
}

/**
 * Append throughput without NOTIFY, with it as corq sends it (after the commit, coalesced), and
 * with it inside the append's transaction (as an outbox append does): `producers` concurrent
 * single-event appends (one commit each: the worst case for NOTIFY's commit-time lock),
 * library to database, with a LISTEN connection open as serve keeps one. Alternating runs,
 * median of `reps` each.
 */
export async function notifyCost(
  databaseUrl: (label: string) => Promise<{ url: string; drop: () => Promise<void> }>,
  options: { events: number; producers: number; reps: number },
) {
  const modes = ["without", "after", "inside"] as const;
  const runs: Record<(typeof modes)[number], number[]> = { without: [], after: [], inside: [] };
  for (let rep = 0; rep < options.reps; rep++) {
    for (const mode of modes) {
      const database = await databaseUrl(`notify_${mode}`);
      const corq = createCorq({ databaseUrl: database.url, poolSize: options.producers, notify: mode === "after" });
      const pool = benchPool(database.url, options.producers);
      const inside = createExecutor(pool as never);
      const listener = new pg.Client({ connectionString: database.url });
      listener.on("error", () => undefined);
      try {
        await corq.migrate();
        await listener.connect();
        listener.on("notification", () => undefined);
        await listener.query(`LISTEN ${WAKE_CHANNEL}`);
        const appendOne = (stream: string) =>
          mode === "inside"
            ? inside.run(appendEvents(stream, [{ name: "E", data: {} }], { notify: true }))
            : corq.append(stream, [{ name: "E", data: {} }]);
        let next = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: options.producers }, async () => {
            for (let i = next++; i < options.events; i = next++) await appendOne(`s${i}`);
          }),
        );
        runs[mode].push(options.events / ((performance.now() - started) / 1000));
      } finally {
        await listener.end().catch(() => undefined);
        await pool.end();
        await corq.close();
        await database.drop();
      }
    }
  }
  return {
    withoutEps: median(runs.without),
    afterEps: median(runs.after),
    insideEps: median(runs.inside),
    spread: {
      without: spreadPercent(runs.without),
      after: spreadPercent(runs.after),
      inside: spreadPercent(runs.inside),
    },
  };
}

/**
 * SIGTERM with batches in flight: process A holds `keys` keys (handlers that run until
 * aborted), process B runs beside it; A gets SIGTERM with CORQ_SHUTDOWN_MS=0, aborts its
 * handlers, releases their leases and exits; B takes the keys. Returns, per key, the time from
 * the SIGTERM to B's handler (ms), and A's exit code.
 */
export async function shutdownPickup(databaseUrl: string, options: { keys: number }) {
  const a = await startBenchServe(databaseUrl, { BENCH_HOLD: "1", CORQ_SHUTDOWN_MS: "0" });
  let b: Awaited<ReturnType<typeof startBenchServe>> | undefined;
  try {
    const post = appender(a.url);
    const keys = Array.from({ length: options.keys }, (_, i) => `held-${i}`);
    for (const key of keys) await post(key, key);
    const deadline = Date.now() + 10_000;
    while (a.holding.size < keys.length && Date.now() < deadline) await sleep(10);
    b = await startBenchServe(databaseUrl);
    await sleep(500); // B has looked (the keys are leased for 30 s: nothing for it)
    const signalled = now();
    const exit = await a.stop();
    const until = Date.now() + 35_000;
    while (keys.some((key) => !b?.handledKeys.has(key)) && Date.now() < until) await sleep(5);
    return { exit, pickupMs: keys.map((key) => (b?.handledKeys.get(key) ?? Number.NaN) - signalled) };
  } finally {
    await a.stop();
    await b?.stop();
  }
}
