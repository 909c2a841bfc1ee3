// What tracing costs (docs/operations.md, "Traces"): the library on embedded Postgres, three ways,
// each run in a fresh process on a fresh database, the ways interleaved ROUNDS times:
//   base   the code before tracing (CORQ_BASE_SRC: another checkout's src/index.ts)
//   none   this code, no tracer registered (the fast path: trace_context stays null)
//   sdk    this code with the OpenTelemetry SDK registered as a Node app registers it: a tracer
//          provider with a BatchSpanProcessor (to an exporter that counts and drops; spansExported
//          says every span got there) and an AsyncLocalStorage context manager
// Each run measures
//   append   p50 / p99 of single-event appends one at a time (2,000), and of appends paced at
//            RATE per second (default 1,000) over 100 streams for SECONDS (default 5)
//   consume  events per second of one drain (keysPerClaim 16, a no-op handler) over 50,000
//            events of 1,000 keys, after one advance
// Prints one JSON line per run and a summary (medians per way).
//   npx tsx bench/tracingCost.ts [ROUNDS=3] (CORQ_BASE_SRC=/path/to/base/src/index.ts for "base")
import { spawnSync } from "node:child_process";
import { AsyncLocalStorage } from "node:async_hooks";
import { fileURLToPath } from "node:url";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { dropDatabase, freshDatabase } from "./database.js";

const RATE = Number(process.env.RATE ?? 1000);
const SECONDS = Number(process.env.SECONDS ?? 5);
const here = fileURLToPath(import.meta.url);

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const median = (values: number[]) => percentile(values, 50);
const round = (n: number, digits = 3) => Number(n.toFixed(digits));

async function child(way: string, databaseUrl: string) {
  const source = way === "base" ? (process.env.CORQ_BASE_SRC ?? "") : "../src/index.js";
  let exported = 0;
  let flush = () => Promise.resolve();
  if (way === "sdk") {
    const { context, trace, ROOT_CONTEXT } = await import("@opentelemetry/api");
    const { BasicTracerProvider, BatchSpanProcessor } = await import("@opentelemetry/sdk-trace-base");
    const storage = new AsyncLocalStorage<ReturnType<typeof context.active>>();
    context.setGlobalContextManager({
      active: () => storage.getStore() ?? ROOT_CONTEXT,
      with: (ctx, fn, thisArg, ...args) => storage.run(ctx, () => fn.apply(thisArg, args)),
      bind: (_ctx, target) => target,
      enable() {
        return this;
      },
      disable() {
        return this;
      },
    });
    const exporter = {
      export(spans: unknown[], done: (result: { code: number }) => void) {
        exported += spans.length;
        done({ code: 0 });
      },
      shutdown: () => Promise.resolve(),
    };
    // a queue that never drops (the default 2,048 drops spans under this load: less work measured)
    const processor = new BatchSpanProcessor(exporter, { maxQueueSize: 1_000_000, maxExportBatchSize: 512 });
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [processor] }));
    flush = () => processor.forceFlush();
  }
  const { createCorq } = (await import(source)) as typeof import("../src/index.js");
  const corq = createCorq({
    databaseUrl,
    poolSize: 10,
    subscriptions: [{ name: "sink", events: ["Consumed"], key: "data.k", handle: () => undefined }],
  });
  await corq.migrate();
  // warm up: connections, prepared statements
  for (let i = 0; i < 200; i++) await corq.append(`warm-${i % 10}`, [{ name: "Warm", data: { i } }]);

  const sequential: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const started = performance.now();
    await corq.append(`seq-${i % 100}`, [{ name: "Appended", data: { i } }]);
    sequential.push(performance.now() - started);
  }

  const paced: Promise<number>[] = [];
  const start = performance.now();
  for (let i = 0; i < RATE * SECONDS; i++) {
    const wait = start + (i * 1000) / RATE - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const t = performance.now();
    paced.push(corq.append(`paced-${i % 100}`, [{ name: "Appended", data: { i } }]).then(() => performance.now() - t));
  }
  const pacedMs = await Promise.all(paced);
  const achieved = pacedMs.length / ((performance.now() - start) / 1000);

  for (let i = 0; i < 5000; i++) {
    await corq.append(
      `c-${i}`,
      Array.from({ length: 10 }, (_, j) => ({ name: "Consumed", data: { k: `k${(i * 10 + j) % 1000}` } })),
    );
  }
  await corq.advance();
  const drained = performance.now();
  const { events } = await corq.drain("sink", { budgetMs: 120_000, maxBatches: 1_000_000, keysPerClaim: 16 });
  const consumePerSecond = events / ((performance.now() - drained) / 1000);
  await corq.close();
  await flush();
  console.log(
    JSON.stringify({
      way,
      appendP50: round(median(sequential)),
      appendP99: round(percentile(sequential, 99)),
      pacedRate: Math.round(achieved),
      pacedP50: round(median(pacedMs)),
      pacedP99: round(percentile(pacedMs, 99)),
      consumed: events,
      consumePerSecond: Math.round(consumePerSecond),
      spansExported: exported,
    }),
  );
}

async function main(rounds: number) {
  const ways = process.env.CORQ_BASE_SRC ? ["base", "none", "sdk"] : ["none", "sdk"];
  const postgres = await startEmbeddedPostgres();
  const results: Record<string, Record<string, number>[]> = {};
  try {
    for (let r = 0; r < rounds; r++) {
      for (const way of ways) {
        const databaseUrl = await freshDatabase(postgres.url, "tracing");
        const run = spawnSync(process.execPath, ["--import", "tsx", here, "--child", way, databaseUrl], {
          encoding: "utf8",
          env: process.env,
        });
        await dropDatabase(postgres.url, databaseUrl);
        if (run.status !== 0) throw new Error(`${way} failed:\n${run.stdout}${run.stderr}`);
        const line = run.stdout.trim().split("\n").at(-1) ?? "";
        console.log(line);
        results[way] = [...(results[way] ?? []), JSON.parse(line)];
      }
    }
  } finally {
    await postgres.stop();
  }
  const summary = Object.fromEntries(
    Object.entries(results).map(([way, runs]) => [
      way,
      Object.fromEntries(
        ["appendP50", "appendP99", "pacedRate", "pacedP50", "pacedP99", "consumePerSecond"].map((k) => [
          k,
          median(runs.map((run) => run[k] ?? Number.NaN)),
        ]),
      ),
    ]),
  );
  console.log(JSON.stringify({ medians: summary }));
}

if (process.argv[2] === "--child") await child(process.argv[3] ?? "none", process.argv[4] ?? "");
else await main(Number(process.argv[2] ?? 3));
