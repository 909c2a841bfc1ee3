// A rewind's chunks keep their plans (docs/architecture.md, "The fast plan is the only plan"):
// each is one bounded statement only if it reads what its chunk names — never every key row,
// every queue row or every staged event. At 1M keys (2M events), planned on keys and queue as
// they were when last analyzed — empty — (the rewind does not ANALYZE them), and again after
// ANALYZE of every table; for the requeue, on rewind_staged as the rewind leaves it (ANALYZEd
// between staging and requeueing), for the
// parameters as corq sends them, each estimated far below `jit_above_cost`. EXPLAIN only: nothing runs.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq } from "../src/index.js";
import { requeueChunk } from "../src/sql/operate/rewindRequeue.js";
import { stageChunk } from "../src/sql/operate/rewindStage.js";
import { createTestDatabase } from "./helpers/database.js";
import { costOffenses, explain, planOffenses, type PlanNode } from "./helpers/plans.js";

const KEYS = 1_000_000;
const TOKEN = "00000000-0000-0000-0000-00000000000a";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let client: pg.Client;
let id: number;

beforeAll(async () => {
  database = await createTestDatabase(inject("postgresUrl"));
  const corq = createCorq({ databaseUrl: database.url, subscriptions: [{ name: "r", handle: () => undefined }] });
  await corq.migrate();
  await corq.close();
  client = new pg.Client({ connectionString: database.url });
  client.on("error", () => undefined);
  await client.connect();
  id = (await client.query("SELECT id FROM corq.subscriptions WHERE name = 'r'")).rows[0].id;
  for (const table of ["keys", "queue", "events", "rewind_staged"])
    await client.query(`ALTER TABLE corq.${table} SET (autovacuum_enabled = false)`);
  // keys and queue analyzed while empty (a new subscription's first rewind, say): the planner
  // counts them as empty however big they grew since
  await client.query("ANALYZE corq.keys, corq.queue");
  // 100,000 keys with 2 events each, half of them still queued; every event staged by a rewind
  // under way (its range staged: the requeue's turn)
  await client.query(`
    INSERT INTO corq.events (stream, version, name, data)
      SELECT 'k' || i, v, 'Placed', '{}' FROM generate_series(1, ${KEYS}) i, generate_series(0, 1) v;
    INSERT INTO corq.keys (subscription_id, key, pending, seq, last_seq, available_at)
      SELECT ${id}, 'k' || i, CASE WHEN i % 2 = 0 THEN 2 ELSE 0 END, 2, CASE WHEN i % 2 = 0 THEN 0 ELSE 2 END,
        CASE WHEN i % 2 = 0 THEN now() END
      FROM generate_series(1, ${KEYS}) i;
    INSERT INTO corq.queue (subscription_id, key, seq, tx, position)
      SELECT ${id}, e.stream, e.version + 1, e.tx, e.position FROM corq.events e
      WHERE substr(e.stream, 2)::int % 2 = 0;
    INSERT INTO corq.rewind_staged (subscription_id, key, tx, position)
      SELECT ${id}, stream, tx, position FROM corq.events ORDER BY stream, tx, position;
    UPDATE corq.subscriptions SET rewinds = 1, rewind_token = '${TOKEN}', rewind_until = now() + interval '1 hour',
      rewind_from_tx = '0', rewind_from_position = 0, rewind_cursor_tx = '0', rewind_cursor_position = -1,
      (watermark_tx, watermark_position) = (SELECT tx, position FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1)
    WHERE id = ${id};`);
  await client.query("ANALYZE corq.rewind_staged"); // as the rewind does before its requeue
}, 300_000);

afterAll(async () => {
  await client?.end();
  await database?.drop();
});

/** The scans of `relation` in `plan`, with the nodes above each. */
function scansOf(plan: PlanNode, relation: string): { node: PlanNode; above: PlanNode[] }[] {
  const found: { node: PlanNode; above: PlanNode[] }[] = [];
  const visit = (node: PlanNode, above: PlanNode[]) => {
    if (node["Relation Name"] === relation) found.push({ node, above });
    for (const child of node.Plans ?? []) visit(child, [...above, node]);
  };
  visit(plan, []);
  return found;
}

describe("a rewind's chunks, on keys and queue analyzed while empty", () => {
  it("keys and queue have the statistics of empty tables", async () => {
    const { rows } = await client.query(
      "SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = 'corq' AND tablename IN ('keys', 'queue', 'events', 'rewind_staged')",
    );
    expect(rows).toEqual([{ tablename: "rewind_staged" }]);
  });

  chunkChecks();
});

describe("after ANALYZE of every table", () => {
  beforeAll(async () => {
    await client.query("ANALYZE corq.keys, corq.queue, corq.events, corq.rewind_staged, corq.subscriptions");
  });
  chunkChecks();
});

/** The requeue and the stage chunk: their plans and their estimated costs. */
function chunkChecks() {
  it("a requeue chunk reads key rows and queue rows by key, and walks the staged events in order from its cursor", async () => {
    const plan = await explain(
      client,
      requeueChunk({
        subscriptionId: id,
        token: TOKEN,
        limit: 5000,
        leaseMs: 30_000,
        after: { key: "k5", tx: "1", position: 1 },
      }),
    );
    expect([...planOffenses(plan, { walks: [] }), ...costOffenses(plan)]).toEqual([]);
    // the staged events: an index walk from the cursor under the LIMIT, not a sort of all of them
    const walks = scansOf(plan, "rewind_staged").filter((s) =>
      ["Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan"].includes(s.node["Node Type"]),
    );
    // (from the cursor: the rows taken before are dead until vacuum, a walk from the start of
    // the subscription's rows steps over all of them in every chunk)
    expect(
      walks.map((s) => [
        s.node["Node Type"],
        s.above.some((n) => n["Node Type"] === "Sort"),
        /ROW\(key, tx, "position"\) > ROW\(/.test(s.node["Index Cond"] ?? ""),
      ]),
    ).toEqual([["Index Scan", false, true]]);
  });

  it("a stage chunk reads the log from its cursor", async () => {
    const plan = await explain(client, stageChunk({ subscriptionId: id, token: TOKEN, limit: 5000, leaseMs: 30_000 }));
    const offenses = [
      ...costOffenses(plan),
      ...planOffenses(plan, {
        walks: [],
        reads: [
          {
            relation: "events",
            cond: /ROW\(tx, "position"\) > ROW\(/,
            why: "the chunk starts at the cursor; as a join filter it walked the log from its start",
          },
        ],
      }),
    ];
    expect(offenses).toEqual([]);
  });
}
