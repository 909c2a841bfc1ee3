// No connection error reaches the process as an uncaught exception (issue 48, DESIGN invariant 14).
// pg-pool — and its copy inside @neondatabase/serverless — removes its idle 'error' listener when
// it lends a client; a new connection is lent from inside the parse of its ReadyForQuery, so a
// FATAL that arrives in the same read is emitted before the borrower's `await pool.connect()`
// resumes. Each test sends its statements through a proxy that ends chosen new connections
// exactly so (ReadyForQuery + ErrorResponse FATAL 57P01 in one write: test/helpers/terminatingProxy.ts),
// on each kind of pool corq opens or is given. Before src/db/guardPool.ts every one of them was
// an uncaught 'error' event (`npm run serve` exited with code 1 before it was ready).
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { sql } from "drizzle-orm";
import WebSocket from "ws";
import { neonConfig } from "@neondatabase/serverless";
import { CorqError, createCorq } from "../src/index.js";
import { createExecutor } from "../src/db/executor.js";
import { openCorq } from "../functions/database.js";
import { startWsProxy, type WsProxy } from "../cli/dev/wsProxy.js";
import { startHttpSqlEndpoint, type HttpSqlEndpoint } from "../cli/dev/httpSqlEndpoint.js";
import type { Env } from "../src/http/types.js";
import { createTestDatabase } from "./helpers/database.js";
import { startTerminatingProxy, type TerminatingProxy } from "./helpers/terminatingProxy.js";
import { startServeProcess } from "./helpers/serveProcess.js";
import { eventually } from "./helpers/stack.js";

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let proxy: TerminatingProxy;
let raw: pg.Pool;
// what would have ended a process of its own (vitest's handler keeps this one alive)
const uncaught: string[] = [];
const record = (error: Error) => uncaught.push(error.message);
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  process.on("uncaughtException", record);
  database = await createTestDatabase(inject("postgresUrl"));
  raw = new pg.Pool({ connectionString: database.url, max: 2 });
  proxy = await startTerminatingProxy(database.url);
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  proxy.terminateWhere(() => false);
});
afterAll(async () => {
  process.off("uncaughtException", record);
  await proxy?.close();
  await raw?.end();
  await database?.drop();
});

const events = async () => (await raw.query("SELECT count(*)::int AS n FROM corq.events")).rows[0].n as number;

interface Appends {
  append(stream: string, events: { name: string; data: object }[]): Promise<unknown>;
}

/**
 * Appends one event through `corq` while the next `dying` new connections end as they are lent:
 * nothing uncaught, the append done (its connect retried), `dying` connections ended.
 */
async function appendThrough(corq: Appends, dying = 1) {
  const [before, terminated] = [await events(), proxy.terminated()];
  proxy.terminateNext(dying);
  const outcome = await corq.append(`s-${before}`, [{ name: "E", data: {} }]).then(
    () => "appended",
    (error: unknown) => error,
  );
  expect(uncaught.splice(0)).toEqual([]);
  expect(outcome).toBe("appended");
  expect(proxy.terminated() - terminated).toBe(dying);
  expect(await events()).toBe(before + 1);
}

describe("a connection that dies as it is lent (ReadyForQuery and FATAL 57P01 in one write)", () => {
  it("corq's own pool (databaseUrl): absorbed, the statement runs on a new connection, the pool goes on", async () => {
    const corq = createCorq({ databaseUrl: proxy.url });
    closers.push(() => corq.close());
    await appendThrough(corq);
    await appendThrough(corq, 0);
  });

  it("corq's own pool: when every connect attempt dies within the retry window the call fails with database_unavailable, and the next call works", async () => {
    const corq = createCorq({ databaseUrl: proxy.url, retries: { withinMs: 300 } });
    closers.push(() => corq.close());
    const before = await events();
    proxy.terminateWhere(() => true);
    const error = await corq.append("s-gave-up", [{ name: "E", data: {} }]).catch((e: unknown) => e);
    proxy.terminateWhere(() => false);
    expect(proxy.terminated()).toBeGreaterThan(2);
    expect(uncaught.splice(0)).toEqual([]);
    expect(error).toBeInstanceOf(CorqError);
    expect(error).toMatchObject({ code: "database_unavailable", cause: { code: "57P01" } });
    expect(await events()).toBe(before);
    await appendThrough(corq, 0);
  });

  it("a transaction's dedicated connection (migrate, a transactional handler): the connect is retried", async () => {
    const pool = new pg.Pool({ connectionString: proxy.url, max: 2 });
    closers.push(() => pool.end());
    const db = createExecutor(pool);
    proxy.terminateNext(1);
    const outcome = await db
      .transaction((tx) => tx.run<{ one: number }>(sql`SELECT 1 AS one`))
      .catch((e: unknown) => e);
    expect(uncaught.splice(0)).toEqual([]);
    expect(outcome).toEqual([{ one: 1 }]);
  });

  it("a pg Pool the user passes (createCorq({ db }), with no 'error' listener of its own)", async () => {
    const pool = new pg.Pool({ connectionString: proxy.url, max: 2 });
    closers.push(() => pool.end());
    const corq = createCorq({ db: pool });
    closers.push(() => corq.close());
    await appendThrough(corq);
    // the user's own pool.connect (as drizzle's transactions do) on a new connection: heard, not thrown
    const idle = await pool.connect();
    proxy.terminateNext(1);
    const client = await pool.connect();
    expect(uncaught.splice(0)).toEqual([]);
    await expect(client.query("SELECT 1")).rejects.toThrow(/not queryable/);
    client.release(true);
    idle.release();
    expect((await pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  it("the Worker's WebSocket pool (@neondatabase/serverless Pool, CORQ_DB_DRIVER=websocket) through the local WebSocket proxy", async () => {
    const wsProxy: WsProxy = await startWsProxy({ host: "127.0.0.1", port: proxy.port });
    closers.push(() => wsProxy.close());
    neonConfig.webSocketConstructor = WebSocket; // Node 20 has no global WebSocket; workerd does
    const env = { DATABASE_URL: proxy.url, CORQ_DB_DRIVER: "websocket", CORQ_NEON_WS_PROXY: wsProxy.address } as Env;
    const opened = openCorq(env, []);
    closers.push(() => opened.end());
    const sessions = wsProxy.sessions();
    await appendThrough(opened.corq);
    expect(wsProxy.sessions() - sessions).toBe(2); // the dead one and its replacement
    expect(uncaught.splice(0)).toEqual([]);
    await appendThrough(opened.corq, 0);
  });

  it("the Worker's HTTP path on corq dev's HTTP SQL endpoint: the endpoint's own pool", async () => {
    const endpoint: HttpSqlEndpoint = await startHttpSqlEndpoint({ target: proxy.url, poolSize: 2 });
    closers.push(() => endpoint.close());
    const env = { DATABASE_URL: proxy.url, CORQ_NEON_HTTP_ENDPOINT: endpoint.url } as Env;
    const opened = openCorq(env, []);
    closers.push(() => opened.end());
    await appendThrough(opened.corq);
    await appendThrough(opened.corq, 0);
  });

  it("npm run serve: every other new connection dies as it is lent, through start and a burst of appends; it serves on and exits 0", async () => {
    const TOKEN = "pool-errors-admin-token-0123456789abcdef";
    // connection 1 is test/serve/recordingServe.ts's own setup client, not serve's
    const [from, terminated] = [proxy.opened(), proxy.terminated()];
    proxy.terminateWhere((ordinal) => ordinal - from >= 2 && (ordinal - from) % 2 === 0 && ordinal - from <= 30);
    const serve = await startServeProcess({
      databaseUrl: proxy.url,
      entry: "test/serve/recordingServe.ts",
      env: { CORQ_ADMIN_TOKEN: TOKEN, CORQ_CONCURRENCY: "4" },
    });
    closers.push(() => serve.stop());
    const streams = Array.from({ length: 20 }, (_, i) => `burst-${i}`);
    const answers = await Promise.all(
      streams.map((stream) =>
        fetch(`${serve.url}/streams/${stream}/events`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ events: [{ name: "E", data: {} }] }),
        }).then((response) => response.status),
      ),
    );
    expect(answers.filter((status) => status !== 201)).toEqual([]);
    await eventually(
      async () =>
        expect(
          (await raw.query("SELECT count(DISTINCT key)::int AS n FROM serve_handled WHERE key LIKE 'burst-%'")).rows[0]
            .n,
        ).toBe(20),
      { timeoutMs: 20_000 },
    );
    expect(proxy.terminated() - terminated).toBeGreaterThanOrEqual(4);
    expect(serve.output()).not.toMatch(/Unhandled 'error' event|uncaught/i);
    expect(await serve.stop()).toBe(0);
  }, 90_000);
});
