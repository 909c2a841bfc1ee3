// How soon a dead key's alert arrives on Node (issue 33's target: within 2 s, once): one serve
// process (role "worker": advancer, consumers and the alerts pass every CORQ_ALERTS_EVERY_MS)
// with a subscription whose handler always fails on its only attempt, an alert on "key.dead" to
// a receiver on 127.0.0.1, and keys that die one after another. Latency: from the key's dead_at
// (the database's clock, on this machine) to the receiver's clock when the alert came.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { loadavg } from "node:os";
import { createCorq } from "../src/index.js";
import { startServe } from "../src/node/serve.js";
import { percentile } from "./stats.js";

export interface AlertRun {
  keys: number;
  /** alerts received per key: 1 each is the target */
  alerts: number;
  duplicates: number;
  missing: number;
  p50Ms: number;
  maxMs: number;
  load: { start: number; end: number };
}

export async function alertLatency(databaseUrl: string, { keys }: { keys: number }): Promise<AlertRun> {
  const loadStart = loadavg()[0] ?? 0;
  const received = new Map<string, number[]>();
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = Date.now();
      const payload = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { type: string; key?: string };
      if (payload.type === "key.dead" && payload.key !== undefined)
        received.set(payload.key, [...(received.get(payload.key) ?? []), at]);
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/alerts`;
  const corq = createCorq({ databaseUrl, poolSize: 2, notify: true, pushAllowPrivate: true });
  await corq.migrate();
  const serve = await startServe({
    subscriptions: [
      {
        name: "dies",
        maxAttempts: 1,
        handle: () => {
          throw new Error("this key dies");
        },
      },
    ],
    env: { DATABASE_URL: databaseUrl, CORQ_PUSH_ALLOW_PRIVATE: "true" },
    role: "worker",
    log: () => undefined,
  });
  try {
    await corq.putAlert("bench", { url, on: ["key.dead"] });
    const latencies: number[] = [];
    for (let i = 0; i < keys; i++) {
      const key = `dies-${i}`;
      await corq.append(key, [{ name: "Doomed", data: { i } }]);
      const deadline = Date.now() + 10_000;
      while (!received.has(key) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const dead = (await corq.deadLetters({ subscription: "dies", limit: 1000 })).find((d) => d.key === key);
      const at = received.get(key)?.[0];
      if (at !== undefined && dead !== undefined) latencies.push(at - Date.parse(dead.deadAt));
      await new Promise((r) => setTimeout(r, 200));
    }
    // a pass or two more: a second alert for a key would come now
    await new Promise((r) => setTimeout(r, 2500));
    latencies.sort((a, b) => a - b);
    const counts = [...received.values()].map((times) => times.length);
    return {
      keys,
      alerts: counts.reduce((a, b) => a + b, 0),
      duplicates: counts.filter((n) => n > 1).length,
      missing: keys - received.size,
      p50Ms: percentile(latencies, 50),
      maxMs: latencies.at(-1) ?? Number.NaN,
      load: { start: loadStart, end: loadavg()[0] ?? 0 },
    };
  } finally {
    await serve.stop();
    await corq.close();
    await new Promise((resolve) => receiver.close(resolve));
  }
}
