// `npx tsx bench/postgresFigures.ts [--keys 100000] [--runs 15] [--events 20000] [--event-keys 1000]`:
// the figures that differ between Postgres servers (issue 46; DESIGN invariant 12), on the embedded
// 18 or on DATABASE_URL (Debian's 15 with JIT on: `export DATABASE_URL=$(infra/systemPostgres.sh start)`):
//   planning   each hot statement's planning and execution time, the median of `runs`
//              EXPLAIN (ANALYZE) runs rolled back, on `keys` ready keys after ANALYZE, and whether
//              any run was JIT-compiled (corq sends unnamed statements: each is planned every time);
//   advance    corq.advance() with nothing to do (one subscription, one event advanced): p50/p95;
//   consume    `events` events over `event-keys` keys drained by 8 loops of consume() and by 8
//              drains of keysPerClaim 1, in the same run: the one-key consumer against the drain.
// The server's version, JIT setting and the machine's load are printed beside the figures. The
// last line printed is one JSON object.
import { PgDialect } from "drizzle-orm/pg-core";
import type { SQL } from "drizzle-orm";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { createCorq } from "../src/index.js";
import { ackBatch } from "../src/sql/consume/ackBatch.js";
import { claimBatch, settleAndClaim } from "../src/sql/consume/claimBatch.js";
import { failBatch } from "../src/sql/consume/failBatch.js";
import { readyKeys } from "../src/sql/consume/readyKeys.js";
import { advanceSubscription } from "../src/sql/advance/advanceSubscription.js";
import { syncSubscriptions } from "../src/sql/advance/syncSubscriptions.js";
import { appendEvents } from "../src/sql/log/appendEvents.js";
import { subscriptionStats } from "../src/sql/inspect/subscriptionStats.js";
import { listKeys } from "../src/sql/inspect/listKeys.js";
import { benchClient, dropDatabase, freshDatabase } from "./database.js";
import { loadAverages, positiveFlag } from "./flags.js";
import { median, percentile } from "./stats.js";

const keys = positiveFlag("keys", 100_000);
const runs = positiveFlag("runs", 15);
const events = positiveFlag("events", 20_000);
const eventKeys = positiveFlag("event-keys", 1000);
const ms = (n: number) => n.toFixed(2);

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres();
const serverUrl = process.env.DATABASE_URL ?? embedded?.url ?? "";
const dialect = new PgDialect();
const out: Record<string, unknown> = {};

try {
  const server = await benchClient(serverUrl);
  const { rows } = await server.query(
    "SELECT current_setting('server_version') AS version, pg_jit_available() AS jit, current_setting('jit') AS setting",
  );
  await server.end();
  const { version, jit, setting } = rows[0];
  out.server = { version, jit: jit && setting === "on" };
  console.log(`PostgreSQL ${version}, JIT ${jit ? setting : "not available"}; load ${loadAverages()}`);
  out.planning = await planning();
  out.advance = await advanceNothing();
  out.consume = await consumeAgainstDrain();
  console.log(JSON.stringify(out));
} finally {
  await embedded?.stop();
}

/** Each hot statement's planning and execution time (medians), on `keys` ready keys after ANALYZE. */
async function planning() {
  const url = await freshDatabase(serverUrl, "planning");
  try {
    const corq = createCorq({
      databaseUrl: url,
      subscriptions: [
        { name: "plain", handle: () => undefined },
        { name: "fair", tenant: "data.t", handle: () => undefined },
      ],
    });
    await corq.migrate();
    await corq.advance();
    await corq.close();
    const client = await benchClient(url);
    const id = async (name: string) =>
      (await client.query("SELECT id FROM corq.subscriptions WHERE name = $1", [name])).rows[0].id as number;
    const [plain, fair] = [await id("plain"), await id("fair")];
    // `keys` ready keys of each subscription (one event each, queued), spread over 100 tenants
    await client.query(`
      INSERT INTO corq.events (stream, version, name, data)
        SELECT 'k' || i, 0, 'Placed', jsonb_build_object('t', 't' || (i % 100)) FROM generate_series(1, ${keys}) i;
      INSERT INTO corq.keys (subscription_id, key, pending, seq, available_at, tenant)
        SELECT s, 'k' || i, 1, 1, now() - (i % 1000) * interval '1 ms', CASE WHEN s = ${fair} THEN 't' || (i % 100) END
        FROM generate_series(1, ${keys}) i, unnest(ARRAY[${plain}, ${fair}]) s;
      INSERT INTO corq.queue (subscription_id, key, seq, tx, position)
        SELECT k.subscription_id, k.key, 1, e.tx, e.position FROM corq.keys k JOIN corq.events e ON e.stream = k.key;
      ANALYZE corq.keys, corq.queue, corq.events, corq.subscriptions`);
    const lease = { subscriptionId: plain, key: "k1", token: "00000000-0000-0000-0000-000000000000" };
    const through = { through: { tx: "1", position: 1, seq: 1 }, count: 1, claimedAt: new Date(0) };
    const settlements = Array.from({ length: 16 }, (_, i) => ({
      key: `k${i + 1}`,
      token: lease.token,
      claimedAt: new Date(),
      count: 1,
      outcome: { through: through.through },
    }));
    const drain = { limit: 16, replayLimit: 4, holder: "bench" };
    const statements: [string, SQL][] = [
      ["append (1 event)", appendEvents("new-1", [{ name: "Placed", data: {} }])],
      ["advance: the sync", syncSubscriptions([], { kick: false })],
      ["advance: a round", advanceSubscription(plain, 5000)],
      ["claim, one key (consume)", claimBatch("plain", { plain: true })],
      ["claim, 16 keys (drain)", claimBatch("plain", { ...drain, plain: true })],
      [
        "settle 16 + claim 16 (drain)",
        settleAndClaim("plain", { ...drain, plain: true }, { subscriptionId: plain, settlements }),
      ],
      ["claim, fair only (100 tenants)", claimBatch("fair", { ...drain, fairOnly: true })],
      ["claim, every part", claimBatch("fair", drain)],
      ["ack", ackBatch(lease, through)],
      ["fail", failBatch(lease, { error: "Error: no", headPosition: 1, count: 1, claimedAt: new Date(0) })],
      ["ready keys (dispatch)", readyKeys(128)],
      ["keys page", listKeys("plain", { limit: 51 })],
      ["stats", subscriptionStats("plain")],
    ];
    const result: Record<string, { planningMs: number; executionMs: number; jit: boolean }> = {};
    console.log(
      `\n| statement (${keys.toLocaleString("en")} ready keys, after ANALYZE) | planning ms | execution ms | JIT |`,
    );
    console.log("|---|---|---|---|");
    for (const [name, query] of statements) {
      const { sql: text, params } = dialect.sqlToQuery(query);
      const planned: number[] = [];
      const executed: number[] = [];
      let compiled = false;
      for (let i = 0; i < runs; i++) {
        await client.query("BEGIN");
        try {
          // an unnamed statement, as corq sends it: planned for its parameters, every time
          const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${inline(client, text, params)}`);
          const plan = rows[0]["QUERY PLAN"][0];
          planned.push(plan["Planning Time"]);
          executed.push(plan["Execution Time"]);
          compiled ||= plan.JIT !== undefined;
        } finally {
          await client.query("ROLLBACK");
        }
      }
      result[name] = { planningMs: median(planned), executionMs: median(executed), jit: compiled };
      console.log(`| ${name} | ${ms(median(planned))} | ${ms(median(executed))} | ${compiled ? "yes" : "no"} |`);
    }
    console.log(`load ${loadAverages()}`);
    await client.end();
    return result;
  } finally {
    await dropDatabase(serverUrl, url);
  }
}

/** EXPLAIN takes no parameters: the values go into the text as literals (as the driver would bind them). */
function inline(client: { escapeLiteral(value: string): string }, text: string, params: unknown[]): string {
  const literal = (value: unknown): string => {
    if (value === null || value === undefined) return "NULL";
    if (typeof value === "number" || typeof value === "bigint") return String(value);
    if (typeof value === "boolean") return String(value);
    if (value instanceof Date) return client.escapeLiteral(value.toISOString());
    if (Array.isArray(value))
      return client.escapeLiteral(
        `{${value.map((v) => (v === null ? "NULL" : `"${String(v).replace(/["\\]/g, "\\$&")}"`)).join(",")}}`,
      );
    return client.escapeLiteral(String(value));
  };
  return text.replace(/\$(\d+)/g, (_, n: string) => literal(params[Number(n) - 1]));
}

/** corq.advance() with nothing to do, `runs` × 4 times: p50 and p95. */
async function advanceNothing() {
  const url = await freshDatabase(serverUrl, "advance");
  try {
    const corq = createCorq({ databaseUrl: url, subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.migrate();
    await corq.append("s-1", [{ name: "Placed", data: {} }]);
    await corq.advance();
    const took: number[] = [];
    for (let i = 0; i < runs * 4; i++) {
      const started = performance.now();
      await corq.advance();
      took.push(performance.now() - started);
    }
    await corq.close();
    const figures = { p50Ms: median(took), p95Ms: percentile(took, 95) };
    console.log(
      `\nadvance() with nothing to do: p50 ${ms(figures.p50Ms)} ms, p95 ${ms(figures.p95Ms)} ms (load ${loadAverages()})`,
    );
    return figures;
  } finally {
    await dropDatabase(serverUrl, url);
  }
}

/** `events` over `eventKeys` keys: 8 loops of consume() against 8 drains of one key per claim, in turns. */
async function consumeAgainstDrain() {
  const rates: Record<"consume" | "drain", number[]> = { consume: [], drain: [] };
  for (let round = 0; round < 2; round++)
    for (const how of ["consume", "drain"] as const) {
      const url = await freshDatabase(serverUrl, how);
      try {
        const subscription = { name: "s", key: "data.k", batchSize: 100, handle: () => undefined };
        const corq = createCorq({ databaseUrl: url, poolSize: 10, subscriptions: [subscription] });
        await corq.migrate();
        for (let i = 0; i < events; i += 1000)
          await corq.append(
            `s-${i}`,
            Array.from({ length: Math.min(1000, events - i) }, (_, j) => ({
              name: "Placed",
              data: { k: `k${(i + j) % eventKeys}` },
            })),
          );
        while (Object.values(await corq.advance()).some((n) => n > 0));
        const started = performance.now();
        let consumed = 0;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            // a drain ends when a claim comes back empty (under 8 at once, also while keys are only
            // locked by the others' claims): drain again until one finds nothing at all
            if (how === "drain")
              for (let drained = -1; drained !== 0; ) {
                drained = (await corq.drain("s", { keysPerClaim: 1, budgetMs: 60_000 })).events;
                consumed += drained;
              }
            else
              for (let result = await corq.consume("s"); result !== null; result = await corq.consume("s"))
                consumed += result.events;
          }),
        );
        rates[how].push(consumed / ((performance.now() - started) / 1000));
        await corq.close();
      } finally {
        await dropDatabase(serverUrl, url);
      }
    }
  const figures = { consumeEps: median(rates.consume), drainEps: median(rates.drain) };
  console.log(
    `\n${events.toLocaleString("en")} events over ${eventKeys.toLocaleString("en")} keys, 8 at once: consume() ${Math.round(figures.consumeEps)} ev/s, drain (keysPerClaim 1) ${Math.round(figures.drainEps)} ev/s, ratio ${(figures.consumeEps / figures.drainEps).toFixed(2)} (medians of 2 runs each, in turns; load ${loadAverages()})`,
  );
  return figures;
}
