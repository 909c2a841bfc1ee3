// graphile-worker 0.18: one named queue per key (its per-key serial mode) or no queue
// (unordered, for reference). Jobs added by 8 producers through addJobs in batches of 100.
import { makeWorkerUtils, run, Logger } from "graphile-worker";
import { chunks, OrderCheck, producerItems, sleep, type Item } from "../workload.js";

const silent = new Logger(() => () => undefined);

export async function graphileWorker(
  databaseUrl: string,
  w: { events: number; keys: number; consumers: number; namedQueues: boolean; timeLimitMs: number },
) {
  const check = new OrderCheck();
  const utils = await makeWorkerUtils({ connectionString: databaseUrl, logger: silent });
  await utils.migrate();
  const runner = await run({
    connectionString: databaseUrl,
    concurrency: w.consumers,
    maxPoolSize: w.consumers + 2,
    noHandleSignals: true,
    pollInterval: 1000, // new jobs arrive by LISTEN/NOTIFY; polling is the fallback
    logger: silent,
    taskList: { work: async (payload) => void check.record(payload as Item) },
  });
  const started = performance.now();
  const deadline = Date.now() + w.timeLimitMs;
  await Promise.all(
    Array.from({ length: 8 }, async (_, p) => {
      for (const batch of chunks(producerItems(p, 8, w.events, w.keys), 100)) {
        await utils.addJobs(batch.map((item) => ({ identifier: "work", payload: item, queueName: w.namedQueues ? item.key : undefined })));
      }
    }),
  );
  while (check.handled < w.events && Date.now() < deadline) await sleep(5);
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  await utils.release();
  return { eps: check.handled / seconds, handled: check.handled, complete: check.handled >= w.events, violations: check.violations, duplicates: check.duplicates };
}
