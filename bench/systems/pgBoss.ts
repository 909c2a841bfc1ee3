// pg-boss 12 with the key_strict_fifo queue policy (FIFO per singletonKey), jobs inserted by 8
// producers with insert() in batches of 100 — the peer's own bulk path.
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
  },
) {
  const check = new OrderCheck();
  const boss = new PgBoss({ connectionString: databaseUrl, max: w.consumers + 8 });
  boss.on("error", () => undefined); // its pool's and clients' errors arrive here (without a listener: uncaught)
  await boss.start();
  await boss.createQueue("bench", { policy: "key_strict_fifo" });
  const started = performance.now();
  const deadline = Date.now() + w.timeLimitMs;
  await Promise.all(
    Array.from({ length: 8 }, async (_, p) => {
      for (const batch of chunks(producerItems(p, 8, w.events, w.keys), 100)) {
        await boss.insert(
          "bench",
          batch.map((item) => ({ data: item, singletonKey: item.key })),
        );
      }
    }),
  );
  for (let i = 0; i < w.consumers; i++) {
    await boss.work<Item>(
      "bench",
      { batchSize: w.batchSize, pollingIntervalSeconds: w.pollingIntervalSeconds },
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
