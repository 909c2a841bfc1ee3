// DBOS Transact 5 (@dbos-inc/dbos-sdk): a partitioned workflow queue, partition key = the
// correlation key, partitionConcurrency 1 (per-key serial), workerConcurrency 8 (this one
// process runs at most 8 workflows at once: the 8 consumers). Each event is one workflow
// whose single step is the no-op handler (it records the order). Enqueued by 8 producers in
// batches of 100 through DBOS's own bulk path (eventreceiver: prepareEnqueuedWorkflow +
// enqueueWorkflows, one transaction per batch, created_at kept monotonic per partition key).
// DBOS dequeues by polling only (no LISTEN/NOTIFY for queues): each poll claims at most one
// head per idle partition, up to the free worker slots; a workflow's own statements (claim, step
// output, status) and the polling interval bound the rate.
//
// DBOS is a process-wide singleton: registered, launched and shut down (deregistered) per run.
import { DBOS, type DLogger } from "@dbos-inc/dbos-sdk";
import { enqueueWorkflows, prepareEnqueuedWorkflow } from "@dbos-inc/dbos-sdk/eventreceiver";
import { benchPool } from "../database.js";
import { chunks, OrderCheck, producerItems, sleep, type Item } from "../workload.js";

const silent: DLogger = {
  info: () => undefined,
  debug: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

export async function dbosPartitioned(
  databaseUrl: string,
  w: {
    events: number;
    keys: number;
    consumers: number;
    batchSize: number;
    pollingIntervalMs: number;
    timeLimitMs: number;
  },
) {
  const check = new OrderCheck();
  // our pool (with 'error' listeners): the DROP DATABASE … WITH (FORCE) after the run ends its connections
  const pool = benchPool(databaseUrl, w.consumers + 8);
  // every statement DBOS sends through its pool (BEGIN and COMMIT included): its cost per event
  let statements = 0;
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: typeof query }).query = (...args) => {
      statements++;
      return query(...args);
    };
  });
  DBOS.setConfig({ name: "corq-bench", systemDatabasePool: pool, logger: silent });
  const work = DBOS.registerWorkflow(
    async (item: Item) => {
      await DBOS.runStep(async () => check.record(item), { name: "noop" });
    },
    { name: "work" },
  );
  await DBOS.launch();
  try {
    await DBOS.registerQueue("bench", {
      partitionConcurrency: 1,
      workerConcurrency: w.consumers,
      minPollingIntervalMs: w.pollingIntervalMs,
    });
    const statementsBefore = statements;
    const started = performance.now();
    const deadline = Date.now() + w.timeLimitMs;
    await Promise.all(
      Array.from({ length: 8 }, async (_, p) => {
        for (const batch of chunks(producerItems(p, 8, w.events, w.keys), w.batchSize)) {
          const prepared = await Promise.all(
            batch.map((item) =>
              prepareEnqueuedWorkflow(work, [item], {
                queueName: "bench",
                workflowID: `${item.key}#${item.seq}`,
                queuePartitionKey: item.key,
              }),
            ),
          );
          await enqueueWorkflows(prepared);
        }
      }),
    );
    while (check.handled < w.events && Date.now() < deadline) await sleep(5);
    const seconds = (performance.now() - started) / 1000;
    const sent = statements - statementsBefore;
    return {
      eps: check.handled / seconds,
      handled: check.handled,
      complete: check.handled >= w.events,
      violations: check.violations,
      duplicates: check.duplicates,
      statementsPerEvent: check.handled ? sent / check.handled : 0,
    };
  } finally {
    await DBOS.shutdown({ deregister: true }).catch(() => undefined);
    await pool.end().catch(() => undefined);
  }
}
