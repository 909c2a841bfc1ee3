import { startEmbeddedPostgres } from "../infra/embeddedPostgres.js";
import { freshDatabase } from "./database.js";
import { createCorq } from "../src/index.js";
import { appendWorkload } from "./systems/corq.js";
import { claimBatch } from "../src/sql/claimBatch.js";
import { ackBatch } from "../src/sql/ackBatch.js";
import { PgDialect } from "drizzle-orm/pg-core";
import pgm from "pg";
const pg = await startEmbeddedPostgres();
try {
  const url = await freshDatabase(pg.url, "x");
  const w = { events: 20000, keys: 1000, consumers: 8, batchSize: 100 };
  const sub = { name: "bench", key: "data.key", handle: () => undefined };
  const c = createCorq({ databaseUrl: url, subscriptions: [sub] });
  await c.migrate(); await appendWorkload(c, w); while ((await c.advance()).bench > 0);
  const d = new PgDialect();
  const client = new pgm.Client({ connectionString: url }); await client.connect();
  await client.query("VACUUM ANALYZE");
  const q = d.sqlToQuery(claimBatch("bench"));
  await client.query("BEGIN");
  const r = await client.query({ text: "EXPLAIN (ANALYZE, BUFFERS) " + q.sql, values: q.params });
  console.log(r.rows.map((x) => x["QUERY PLAN"]).join("\n"));
  const rows = (await client.query({ text: q.sql, values: q.params })).rows;
  const last = rows[rows.length - 1];
  const a = d.sqlToQuery(ackBatch({ subscriptionId: last.subscription_id, key: last.key, token: last.lease_token }, { tx: last.tx, position: Number(last.position) }, rows.length));
  const r2 = await client.query({ text: "EXPLAIN (ANALYZE, BUFFERS) " + a.sql, values: a.params });
  console.log(r2.rows.map((x) => x["QUERY PLAN"]).join("\n"));
  await client.query("ROLLBACK"); await client.end(); await c.close();
} finally { await pg.stop(); }
