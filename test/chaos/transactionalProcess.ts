// A consumer process for the exactly-once scenario (test/chaos/exactlyOnce.chaos.test.ts): drains
// the transactional "projection" subscription (CORQ_CHAOS_KEYS_PER_CLAIM keys per claim) until it
// is killed. Its handler writes, through ctx.tx only, one row per event (projection_applied: a
// duplicate effect shows as a second row) and the per-key counters (projection) — naive
// counters, right only if every batch's effects are applied exactly once.
// The parent SIGKILLs these processes at random (mostly mid-handler: the handler is where the
// time goes). A process told CORQ_CHAOS_KILL_AT_COMMIT=n kills itself with SIGKILL at its n-th
// COMMIT: "before" the COMMIT is sent (the ack done, inside the transaction) or right "after"
// it was written to the socket, its answer not read (the commit happens, nobody hears of it).
import { sql } from "drizzle-orm";
import { createCorq } from "../../src/index.js";

const databaseUrl = process.env.DATABASE_URL!;
const leaseMs = Number(process.env.CORQ_CHAOS_LEASE_MS ?? 1500);
const keysPerClaim = Number(process.env.CORQ_CHAOS_KEYS_PER_CLAIM ?? 1);
const killAtCommit = Number(process.env.CORQ_CHAOS_KILL_AT_COMMIT ?? 0);
const killWhen = process.env.CORQ_CHAOS_KILL_WHEN === "after" ? "after" : "before";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let commits = 0;
const die = () => process.kill(process.pid, "SIGKILL");

const corq = createCorq({
  databaseUrl,
  poolSize: keysPerClaim + 2,
  onStatement(text) {
    if (text !== "COMMIT" || killAtCommit === 0 || ++commits < killAtCommit) return;
    if (killWhen === "before") die();
    // the statement is written to the socket right after this call returns, in the same turn
    else setImmediate(die);
  },
  subscriptions: [
    {
      name: "projection",
      transactional: true,
      batchSize: 5,
      leaseMs,
      maxAttempts: 1000,
      backoff: { initialMs: 10, maxMs: 10, factor: 1 },
      async handle(events, ctx) {
        const tx = ctx.tx!;
        await tx.execute(sql`INSERT INTO projection_applied (key, position)
          SELECT ${ctx.key}, unnest(${`{${events.map((e) => e.position).join(",")}}`}::bigint[])`);
        await sleep(Math.random() * 25); // the work; a SIGKILL from the parent lands here, or anywhere else
        await tx.execute(sql`INSERT INTO projection (key, events, batches) VALUES (${ctx.key}, ${events.length}, 1)
          ON CONFLICT (key) DO UPDATE SET events = projection.events + excluded.events, batches = projection.batches + 1`);
      },
    },
  ],
});

for (;;) {
  try {
    await corq.advance();
    const { batches } = await corq.drain("projection", { budgetMs: 500, keysPerClaim });
    if (batches === 0) await sleep(20);
  } catch (error) {
    console.error(`consumer ${process.pid}:`, error instanceof Error ? error.message : error);
    await sleep(100);
  }
}
