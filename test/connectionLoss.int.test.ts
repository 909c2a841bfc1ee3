// The server ends connections on its own: a restart, pg_terminate_backend, DROP DATABASE …
// WITH (FORCE) ("terminating connection due to administrator command"). node-postgres reports
// that as an 'error' event on the pool (idle client) or on a lent-out client; with no listener
// it is an uncaught exception that ends the process (vitest fails the run on one). Each test
// ends every backend of its database at a moment when no statement is running.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { sql } from "drizzle-orm";
import { benchPool } from "../bench/database.js";
import { createExecutor } from "../src/db/executor.js";
import { createCorq } from "../src/index.js";
import { createTestDatabase } from "./helpers/database.js";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let admin: pg.Client;
// what would have ended a process of its own (vitest's handler keeps this one alive)
const uncaught: string[] = [];
const record = (error: Error) => uncaught.push(error.message);
beforeAll(async () => {
  process.on("uncaughtException", record);
  database = await createTestDatabase(inject("postgresUrl"));
  admin = new pg.Client({ connectionString: inject("postgresUrl") });
  await admin.connect();
});
afterAll(async () => {
  process.off("uncaughtException", record);
  await admin?.end();
  await database?.drop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Ends every connection to the test database, and waits for the clients to hear of it. */
async function terminateAll() {
  const name = new URL(database.url).pathname.slice(1);
  const { rows } = await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [
    name,
  ]);
  expect(rows.length).toBeGreaterThan(0);
  await sleep(300);
}

describe("a connection the server ends", () => {
  it("does not crash the benchmark: its pools' idle and lent-out clients listen for 'error'", async () => {
    const pool = benchPool(database.url, 2);
    try {
      const lent = await pool.connect();
      await lent.query("SELECT 1");
      await pool.query("SELECT 1"); // a second client, idle in the pool
      await terminateAll();
      lent.release();
      expect(uncaught.splice(0)).toEqual([]);
      expect((await pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it("inside a transaction between statements fails that transaction, and does not crash the process", async () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 2 });
    pool.on("error", () => undefined); // as createCorq's own pool
    const db = createExecutor(pool);
    try {
      await expect(
        db.transaction(async (tx) => {
          await tx.run(sql`SELECT 1`);
          await terminateAll(); // e.g. while a transactional handler awaits something else
          await tx.run(sql`SELECT 1`);
        }),
      ).rejects.toThrow();
      expect(uncaught.splice(0)).toEqual([]);
      expect(await db.run(sql`SELECT 1 AS one`)).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it("while idle in createCorq's own pool does not crash the process; the next call reconnects", async () => {
    const corq = createCorq({ databaseUrl: database.url });
    try {
      await corq.readLog({ limit: 1 });
      await terminateAll();
      expect(uncaught.splice(0)).toEqual([]);
      expect(await corq.readLog({ limit: 1 })).toMatchObject({ events: [] });
    } finally {
      await corq.close();
    }
  });
});
