// pg-boss 12, jobs inserted by 8 producers with insert() in batches of 100 — the peer's own bulk
// path — in one of two per-key modes:
// - "key_strict_fifo": the queue policy that is FIFO per singletonKey (singletonKey = the key);
// - "group": a standard queue, each job in group { id: key }, the workers fetching with
//   groupConcurrency 1 (at most one active job per group, counted in the database across workers).
//   pg-boss promises a concurrency limit per group, not an order: the order check says what it keeps.
//   (12.38's fetch orders by created_on, which one insert statement's jobs share, and keeps one job
//   per group of a fetch by ROW_NUMBER() … ORDER BY id, a random uuid: a key's jobs inserted in
//   the same statement run in random order. Smoke run: 2,000 jobs over 100 keys, 1,418 out of
//   order; over 1,000 keys, where no batch holds two jobs of a key, 0.)
import { PgBoss } from "pg-boss";
import { chunks, OrderCheck, producerItems, sleep, type Item } from "../workload.js";

export async function pgBoss(
  databaseUrl: string,
  w: {
    events: number;
    keys: number;
    consumers: number;
    batchSize: number;
    timeLimitMs: number;
    pollingIntervalSeconds: number;
    mode: "key_strict_fifo" | "group";
  },
) {
  const groups = w.mode === "group";
  const check = new OrderCheck();
  const boss = new PgBoss({ connectionString: databaseUrl, max: w.consumers + 8 });
  boss.on("error", () => undefined); // its pool's and clients' errors arrive here (without a listener: uncaught)
  await boss.start();
  await boss.createQueue("bench", groups ? {} : { policy: "key_strict_fifo" });
  const started = performance.now();
  const deadline = Date.now() + w.timeLimitMs;
  await Promise.all(
    Array.from({ length: 8 }, async (_, p) => {
      for (const batch of chunks(producerItems(p, 8, w.events, w.keys), 100)) {
        await boss.insert(
          "bench",
          batch.map((item) =>
            groups ? { data: item, group: { id: item.key } } : { data: item, singletonKey: item.key },
          ),
        );
      }
    }),
  );
  for (let i = 0; i < w.consumers; i++) {
    await boss.work<Item>(
      "bench",
      {
        batchSize: w.batchSize,
        pollingIntervalSeconds: w.pollingIntervalSeconds,
        ...(groups ? { groupConcurrency: 1 } : {}),
      },
      async (jobs) => {
        for (const job of jobs) check.record(job.data);
      },
    );
  }
  while (check.handled < w.events && Date.now() < deadline) await sleep(5);
  const seconds = (performance.now() - started) / 1000;
  await boss.stop({ graceful: false }).catch(() => undefined);
  return {
    eps: check.handled / seconds,
    handled: check.handled,
    complete: check.handled >= w.events,
    violations: check.violations,
    duplicates: check.duplicates,
  };
}
