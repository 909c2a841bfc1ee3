// Append-to-handler latency on the local Workers stack (wrangler dev + Neon driver + WS
// proxy + Postgres): POST /streams/:s/events at a fixed rate, then compare each event's
// created_at with the time the projection handler wrote it (both from the database clock).
import { startLocalStack } from "../cli/dev/localStack.js";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { benchPool } from "./database.js";
import { percentile } from "./stats.js";

export async function measureWorkersLatency(options: { events: number; ratePerSecond: number; databaseUrl?: string }) {
  const embedded = options.databaseUrl ? undefined : await startEmbeddedPostgres();
  const stack = await startLocalStack({ databaseUrl: options.databaseUrl ?? embedded!.url, cronIntervalMs: 1000 });
  const db = benchPool(stack.databaseUrl, 2);
  try {
    const run = `lat${Date.now()}`;
    const started = Date.now();
    const requests: Promise<Response>[] = [];
    for (let i = 0; i < options.events; i++) {
      const due = started + (i * 1000) / options.ratePerSecond;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
      requests.push(
        // visitor-…: the example's subscriptions take visitors' streams only
        fetch(`${stack.url}/streams/visitor-${run}-${i}/events`, {
          method: "POST",
          headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
          body: JSON.stringify({ events: [{ name: "Registered", data: { name: `v${i}` } }] }),
        }),
      );
    }
    await Promise.all(requests);
    const deadline = Date.now() + 60_000;
    let latencies: number[] = [];
    while (Date.now() < deadline) {
      const { rows } = await db.query(
        `SELECT extract(epoch FROM v.updated_at - e.created_at) * 1000 AS ms
         FROM example.visitors v JOIN corq.events e ON e.position = v.last_position WHERE v.stream LIKE $1`,
        [`visitor-${run}-%`],
      );
      latencies = rows.map((r) => Number(r.ms));
      if (latencies.length === options.events) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return {
      delivered: latencies.length,
      events: options.events,
      ratePerSecond: options.ratePerSecond,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
    };
  } finally {
    await db.end();
    await stack.stop();
    await embedded?.stop();
  }
}
