// A consumer process for the crash scenario (test/chaos/crash.chaos.test.ts): advances and
// drains the "chaos" subscription (CORQ_CHAOS_KEYS_PER_CLAIM keys per claim) in a loop until it is killed. Its handler records every
// event it handled (after the work, before the ack) in chaos_handled, with its pid and the
// time the handler started, so the test can tell duplicates and overlaps apart.
import pg from "pg";
import { createCorq } from "../../src/index.js";

const databaseUrl = process.env.DATABASE_URL!;
const leaseMs = Number(process.env.CORQ_CHAOS_LEASE_MS ?? 2000);
// keys claimed (and settled) per statement: a kill lands among several held keys at once
const keysPerClaim = Number(process.env.CORQ_CHAOS_KEYS_PER_CLAIM ?? 1);
const record = new pg.Pool({ connectionString: databaseUrl, max: 1 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const corq = createCorq({
  databaseUrl,
  poolSize: 2,
  subscriptions: [
    {
      name: "chaos",
      batchSize: 5,
      leaseMs,
      maxAttempts: 1000,
      backoff: { initialMs: 10, maxMs: 10, factor: 1 },
      async handle(events, ctx) {
        const startedAt = new Date();
        await sleep(Math.random() * 20); // the work; a SIGKILL lands here, or anywhere else
        await record.query(
          `INSERT INTO chaos_handled (pid, key, position, started_at, finished_at)
           SELECT $1, $2, unnest($3::bigint[]), $4, clock_timestamp()`,
          [process.pid, ctx.key, events.map((e) => e.position), startedAt],
        );
      },
    },
  ],
});

for (;;) {
  try {
    await corq.advance();
    const { batches } = await corq.drain("chaos", { budgetMs: 500, keysPerClaim });
    if (batches === 0) await sleep(20);
  } catch (error) {
    console.error(`consumer ${process.pid}:`, error instanceof Error ? error.message : error);
    await sleep(100);
  }
}
