// corq push delivery to a local HTTP receiver (Node), and the same through the local Workers
// stack (wrangler dev + Neon driver + proxy): batches POSTed, signed, acked by a 2xx.
import { createServer } from "node:http";
import { createCorq } from "../../src/index.js";
import { startLocalStack } from "../../cli/dev/localStack.js";
import { appendWorkload, type Workload } from "./corq.js";
import { OrderCheck, sleep, type Item } from "../workload.js";
import { present } from "../../test/helpers/present.js";

/** A push receiver on 127.0.0.1: each delivered event recorded in `check`; `requests()` counts the POSTs. */
export async function startCountingReceiver(check: OrderCheck) {
  let requests = 0;
  const server = createServer(async (request, response) => {
    requests++;
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { events: { data: Item }[] };
    for (const event of body.events) check.record(event.data);
    response.writeHead(200).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/`,
    requests: () => requests,
    close: () => new Promise((r) => server.close(r)),
  };
}

// the receiver listens on 127.0.0.1: corq refuses private destinations unless allowed
const pushSettings = (url: string, w: Workload) => ({
  key: "data.key",
  batchSize: w.batchSize,
  deliver: { url, timeoutMs: 10_000 },
});

/** Node: the queue is filled first, then C consumers deliver it: events/s delivered. */
export async function pushNode(databaseUrl: string, w: Workload) {
  const check = new OrderCheck();
  const receiver = await startCountingReceiver(check);
  const loader = createCorq({ databaseUrl, pushAllowPrivate: true });
  await loader.migrate();
  await loader.putSubscription("bench-push", pushSettings(receiver.url, w));
  await appendWorkload(loader, w);
  while (present((await loader.advance())["bench-push"], "an advance count for the bench-push subscription") > 0);
  await loader.close();
  const consumers = Array.from({ length: w.consumers }, () =>
    createCorq({ databaseUrl, poolSize: 1, pushAllowPrivate: true }),
  );
  const started = performance.now();
  await Promise.all(
    consumers.map(async (c) => {
      while ((await c.consume("bench-push")) !== null);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(consumers.map((c) => c.close()));
  await receiver.close();
  return { eps: check.handled / seconds, handled: check.handled, violations: check.violations };
}

/** Workers: the same through the local stack, consumers fanned out by POST /dispatch. */
export async function pushWorkers(databaseUrl: string, w: Workload) {
  const check = new OrderCheck();
  const receiver = await startCountingReceiver(check);
  const stack = await startLocalStack({
    databaseUrl,
    vars: {
      CORQ_CONCURRENCY: String(w.consumers),
      CORQ_CONSUMER_BUDGET_MS: "30000",
      ...(w.keysPerClaim ? { CORQ_KEYS_PER_CLAIM: String(w.keysPerClaim) } : {}),
    },
  });
  try {
    const loader = createCorq({ databaseUrl, pushAllowPrivate: true });
    await loader.putSubscription("bench-push", pushSettings(receiver.url, w));
    await appendWorkload(loader, w);
    await loader.close();
    const started = performance.now();
    const deadline = Date.now() + 120_000;
    while (check.handled < w.events && Date.now() < deadline) {
      const response = await fetch(`${stack.url}/dispatch`, {
        method: "POST",
        headers: { authorization: `Bearer ${stack.adminToken}` },
      });
      await response.body?.cancel();
      await sleep(10);
    }
    const seconds = (performance.now() - started) / 1000;
    return { eps: check.handled / seconds, handled: check.handled, violations: check.violations };
  } finally {
    await stack.stop();
    await receiver.close();
  }
}
