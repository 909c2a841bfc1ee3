// `npm run serve` with DATABASE_URL through a transaction-mode pooler (Debian's PgBouncer 1.18,
// as Neon's pooled `-pooler` host; test/helpers/pgbouncer.ts). Before issue 48: 1,640 of 3,003
// HTTP appends were 500s, 795 deliveries came twice, and wake-ups silently stopped (a LISTEN
// through the pooler hears nothing). Now: no 500, nothing twice; without CORQ_LISTEN_DATABASE_URL
// it says so at start and polls every CORQ_POLL_MS; with it pointed at a direct connection
// wake-ups are immediate. Both runs keep the safety net at an hour: what wakes it is the poll or
// the LISTEN, never the safety net.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createCorq, type Corq } from "../../src/index.js";
import { createTestDatabase } from "../helpers/database.js";
import {
  pgbouncerAvailable,
  pooledSessionSettings,
  sessionSettings,
  startPgBouncer,
  type RunningPgBouncer,
} from "../helpers/pgbouncer.js";
import { startServeProcess } from "../helpers/serveProcess.js";
import { until } from "../helpers/until.js";
import { sleep } from "../helpers/corq.js";

const TOKEN = "serve-pooler-admin-token-0123456789abcdef";
const POLL_MS = 1000;
const APPENDS = 240;
const WARNING = /warning: LISTEN on DATABASE_URL does not receive notifications .*CORQ_LISTEN_DATABASE_URL/;

const available = pgbouncerAvailable("serve through PgBouncer");

describe.skipIf(!available)("serve with DATABASE_URL through PgBouncer in transaction mode", () => {
  let bouncer: RunningPgBouncer;
  let database: { url: string; drop(): Promise<void> };
  let pooledUrl: string;
  let raw: pg.Pool;
  let library: Corq;

  beforeAll(async () => {
    database = await createTestDatabase(inject("postgresUrl"));
    bouncer = await startPgBouncer(inject("postgresUrl"), { poolSize: 4 });
    pooledUrl = bouncer.pooled(database.url);
    raw = new pg.Pool({ connectionString: database.url, max: 2 });
    // another process's appends (the library's, NOTIFYing as serve's own do), through the pooler too
    library = createCorq({ databaseUrl: pooledUrl, notify: true });
  });

  afterAll(async () => {
    await library?.close();
    await raw?.end();
    await bouncer?.stop();
    await database?.drop();
  });

  const start = (env: Record<string, string> = {}) =>
    startServeProcess({
      databaseUrl: pooledUrl,
      entry: "test/serve/recordingServe.ts",
      env: { CORQ_ADMIN_TOKEN: TOKEN, CORQ_SAFETY_NET_MS: "3600000", CORQ_POLL_MS: String(POLL_MS), ...env },
    });

  /** `count` appends over HTTP, 8 at a time, to `prefix`-0 … -11: the statuses answered. */
  const appendOverHttp = async (url: string, prefix: string, count: number) => {
    const statuses: number[] = [];
    let next = 0;
    const client = async () => {
      while (next < count) {
        const i = next++;
        const response = await fetch(`${url}/streams/${prefix}-${i % 12}/events`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ events: [{ name: "E", data: { i } }] }),
        });
        await response.arrayBuffer();
        statuses.push(response.status);
      }
    };
    await Promise.all(Array.from({ length: 8 }, client));
    return statuses;
  };

  /** Every event of streams starting with `prefix` handled exactly once, in order per key. */
  const deliveredOnce = async (prefix: string, count: number) => {
    const handled = async () =>
      (
        await raw.query<{ n: number }>("SELECT count(*)::int AS n FROM serve_handled WHERE key LIKE $1", [
          `${prefix}-%`,
        ])
      ).rows[0]?.n ?? 0;
    await until(async () => (await handled()) >= count, {
      timeoutMs: 30_000,
      everyMs: 100,
      message: `${prefix} handled`,
    });
    const { rows } = await raw.query<{ position: string; times: number }>(
      "SELECT position, count(*)::int AS times FROM serve_handled WHERE key LIKE $1 GROUP BY position HAVING count(*) > 1",
      [`${prefix}-%`],
    );
    expect(rows).toEqual([]);
    const order = await raw.query<{ key: string; ordered: boolean }>(
      `SELECT key, array_agg(position ORDER BY id) = array_agg(position ORDER BY position) AS ordered
       FROM serve_handled WHERE key LIKE $1 GROUP BY key`,
      [`${prefix}-%`],
    );
    expect(order.rows.filter((r) => !r.ordered)).toEqual([]);
    expect(await handled()).toBe(count);
  };

  /** Library appends, one at a time: how long each waited from its commit to its handler (ms). */
  const wakeUpLatencies = async (prefix: string, count: number) => {
    const latencies: number[] = [];
    for (let i = 0; i < count; i++) {
      // spaced out, so that some land just after a poll (up to POLL_MS away from the next)
      await sleep(150 + ((i * 337) % 700));
      const stream = `${prefix}-${i}`;
      await library.append(stream, [{ name: "E", data: {} }]);
      let latency: number | undefined;
      await until(
        async () => {
          const { rows } = await raw.query<{ ms: number }>(
            `SELECT extract(epoch FROM h.started_at - e.created_at) * 1000 AS ms
             FROM serve_handled h JOIN corq.events e ON e.position = h.position WHERE h.key = $1`,
            [stream],
          );
          latency = rows[0]?.ms;
          return latency !== undefined;
        },
        { timeoutMs: 15_000, everyMs: 20, message: `${stream} handled` },
      );
      latencies.push(Number(latency));
    }
    return latencies;
  };

  it("without CORQ_LISTEN_DATABASE_URL: says at start that LISTEN hears nothing, answers no 500, polls every CORQ_POLL_MS", async () => {
    const serve = await start();
    try {
      // said before "ready", with what to do
      expect(serve.output()).toMatch(WARNING);
      expect(serve.output()).toContain(`polled every ${POLL_MS} ms`);
      const statuses = await appendOverHttp(serve.url, "pooled", APPENDS);
      expect(statuses.filter((s) => s !== 201)).toEqual([]);
      await deliveredOnce("pooled", APPENDS);
      // another process's append: its NOTIFY does not arrive, the poll finds it within its interval
      const latencies = await wakeUpLatencies("polled", 5);
      expect(Math.max(...latencies)).toBeLessThan(POLL_MS + 1500);
      expect(serve.output()).not.toMatch(/\b500\b|failed/);
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  });

  it("with CORQ_LISTEN_DATABASE_URL on a direct connection: no warning, no 500, woken at once (no poll at all)", async () => {
    // polling an hour apart: only the LISTEN can wake it
    const serve = await start({ CORQ_LISTEN_DATABASE_URL: database.url, CORQ_POLL_MS: "3600000" });
    try {
      expect(serve.output()).not.toMatch(/warning: (LISTEN|no LISTEN|could not check)/);
      const statuses = await appendOverHttp(serve.url, "listened", APPENDS);
      expect(statuses.filter((s) => s !== 201)).toEqual([]);
      await deliveredOnce("listened", APPENDS);
      const latencies = await wakeUpLatencies("woken", 5);
      // generous (a loaded machine): a direct connection's wake-up is tens of ms
      expect(Math.max(...latencies)).toBeLessThan(1000);
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  });

  it("leaves no session setting behind for the pooler's other clients", async () => {
    const direct = await sessionSettings(database.url);
    const seen = await pooledSessionSettings(pooledUrl, { clients: 8, rounds: 3 });
    expect(seen.size).toBeGreaterThanOrEqual(2);
    for (const [pid, settings] of seen) expect(settings, `session ${pid}`).toEqual(direct.settings);
  });
});
