// graphile-worker 0.18: one named queue per key (its per-key serial mode) or no queue
// (unordered, for reference). Jobs added by 8 producers through addJobs in batches of 100.
//
// Both get pools of ours (the sizes graphile-worker would pick): the pools it makes from a
// connection string lose their 'error' listeners on release while their end() is still under
// way (not awaited), so a connection the server ends then — the DROP DATABASE … WITH (FORCE)
// after each run — is an uncaught exception that ends `npm run bench`.
import { makeWorkerUtils, run, Logger } from "graphile-worker";
import { benchPool } from "../database.js";
import { chunks, OrderCheck, producerItems, sleep, type Item } from "../workload.js";

const silent = new Logger(() => () => undefined);

export async function graphileWorker(
  databaseUrl: string,
  w: { events: number; keys: number; consumers: number; namedQueues: boolean; timeLimitMs: number },
) {
  const check = new OrderCheck();
  const utilsPool = benchPool(databaseUrl, 10);
  const runnerPool = benchPool(databaseUrl, w.consumers + 2);
  const utils = await makeWorkerUtils({ pgPool: utilsPool, logger: silent });
  await utils.migrate();
  const runner = await run({
    pgPool: runnerPool,
    concurrency: w.consumers,
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
        await utils.addJobs(
          batch.map((item) => ({ identifier: "work", payload: item, queueName: w.namedQueues ? item.key : undefined })),
        );
      }
    }),
  );
  while (check.handled < w.events && Date.now() < deadline) await sleep(5);
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  await utils.release();
  await Promise.all([utilsPool.end(), runnerPool.end()]);
  return {
    eps: check.handled / seconds,
    handled: check.handled,
    complete: check.handled >= w.events,
    violations: check.violations,
    duplicates: check.duplicates,
  };
}
