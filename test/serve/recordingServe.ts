// A `serve` entry for the Node runtime's tests and benchmarks: one code subscription,
// "recorded" (key: the stream), whose handler records every event it handled in
// serve_handled (pid, key, position, when it started and finished) through ctx.run. How the
// handler behaves comes from the environment:
//   CORQ_TEST_HANDLER     "sleep" (default): CORQ_TEST_HANDLER_MS (default 0) then record;
//                         "until-aborted": wait for ctx.signal, then throw (records the start only);
//                         "ignore-abort": like until-aborted, but keeps running long after the signal
//   CORQ_TEST_LEASE_MS    the subscription's lease (default 30 s)
//   CORQ_TEST_BATCH_SIZE  events per batch (default 100)
import { sql } from "drizzle-orm";
import pg from "pg";
import { startServe, stopOnSignals } from "../../src/node/serve.js";
import type { SubscriptionDefinition } from "../../src/index.js";

const env = process.env;
const mode = env.CORQ_TEST_HANDLER ?? "sleep";
const handlerMs = Number(env.CORQ_TEST_HANDLER_MS ?? 0);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const setup = new pg.Client({ connectionString: env.DATABASE_URL });
await setup.connect();
// several processes start at once, and CREATE TABLE IF NOT EXISTS is not safe against itself
// (two can both find the table missing: a duplicate key in pg_type): one at a time
await setup.query("BEGIN");
await setup.query("SELECT pg_advisory_xact_lock(hashtext('serve_handled'))");
await setup.query(`CREATE TABLE IF NOT EXISTS public.serve_handled (id bigserial PRIMARY KEY, pid int NOT NULL,
  key text NOT NULL, position bigint NOT NULL, started_at timestamptz NOT NULL, finished_at timestamptz)`);
await setup.query("COMMIT");
await setup.end();

const subscriptions: SubscriptionDefinition[] = [
  {
    name: "recorded",
    leaseMs: Number(env.CORQ_TEST_LEASE_MS ?? 30_000),
    batchSize: Number(env.CORQ_TEST_BATCH_SIZE ?? 100),
    maxAttempts: 1000,
    backoff: { initialMs: 10, maxMs: 10, factor: 1 },
    async handle(events, ctx) {
      const startedAt = new Date().toISOString();
      const positions = `{${events.map((e) => e.position).join(",")}}`;
      if (mode === "until-aborted" || mode === "ignore-abort") {
        await ctx.run(sql`INSERT INTO public.serve_handled (pid, key, position, started_at)
          SELECT ${process.pid}, ${ctx.key}, unnest(${positions}::bigint[]), ${startedAt}::timestamptz`);
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
        if (mode === "ignore-abort") await sleep(600_000);
        throw new Error("gave up: the consumer is stopping");
      }
      if (handlerMs > 0) await sleep(handlerMs);
      await ctx.run(sql`INSERT INTO public.serve_handled (pid, key, position, started_at, finished_at)
        SELECT ${process.pid}, ${ctx.key}, unnest(${positions}::bigint[]), ${startedAt}::timestamptz, clock_timestamp()`);
    },
  },
];

const running = await startServe({ subscriptions, env });
stopOnSignals(running);
console.log(`corq ready ${running.url}`);
