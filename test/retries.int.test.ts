// A statement that fails on a connection error is sent again on a new connection, within a window
// (default 5 s, `retries.withinMs`), with jittered backoff (50 ms doubling, capped at 1 s) — but
// only when sending it again cannot apply it twice (src/db/retries.ts): any statement after an
// error that proves it did not commit (a refused or dead connect, 57P01 while it ran), and after
// a connection cut while it was out only a statement safe to repeat (an advance, a claim, a
// settlement), never an append. Real pools on the test database: one whose connect step fails on
// demand, and a proxy that cuts a chosen statement's connection (test/helpers/terminatingProxy.ts).
import { afterEach, describe, expect, it, vi } from "vitest";
import pg from "pg";
import { CorqError, createCorq } from "../src/index.js";
import { ConnectFailed, neverCommitted } from "../src/errors.js";
import { useCorq } from "./helpers/corq.js";
import { startTerminatingProxy } from "./helpers/terminatingProxy.js";

const open = useCorq();
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

/** A real pool whose first `failures` connects fail with `error`; counts every connect. */
function flakyPool(url: string, failures: number, error: () => Error) {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on("error", () => undefined);
  const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
  const counter = { connects: 0 };
  Object.assign(pool, {
    connect: async () => {
      counter.connects++;
      if (counter.connects <= failures) throw error();
      return connect();
    },
  });
  return { pool, counter };
}

const refused = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
const sqlState = (code: string) => () => Object.assign(new Error(`server said ${code}`), { code });

/** The backoff delays the retry loop asks for (it is the only caller of setTimeout with Math.random's value in it). */
function recordBackoff(random: number) {
  vi.spyOn(Math, "random").mockReturnValue(random);
  const delays: number[] = [];
  const original = globalThis.setTimeout;
  vi.spyOn(globalThis, "setTimeout").mockImplementation(((fn: () => void, ms?: number) => {
    if (ms !== undefined && ms > 0 && ms <= 1000) delays.push(ms);
    return original(fn, 0); // no need to wait for real
  }) as typeof setTimeout);
  return delays;
}

describe("connecting", () => {
  it("retries the connect step: 50 ms doubling, jittered down to half, then runs the statement once", async () => {
    const { url, raw } = await open();
    const { pool, counter } = flakyPool(url, 5, refused);
    let statements = 0;
    const corq = createCorq({ db: pool, onStatement: () => void statements++ });
    try {
      const delays = recordBackoff(0.999);
      await corq.append("s", [{ name: "E", data: {} }]);
      expect(counter.connects).toBe(6);
      // each wait is between half its cap and its cap (here: just under the cap)
      expect(delays.map((d) => Math.round(d))).toEqual([50, 100, 200, 400, 800]);
      expect(statements).toBe(6); // each attempt is counted as it is sent (a Worker's subrequests)
      const { rows } = await raw.query("SELECT count(*)::int AS n FROM corq.events");
      expect(rows[0].n).toBe(1);
    } finally {
      await corq.close();
      await pool.end();
    }
  });

  it("gives up when the window (retries.withinMs) ends, with database_unavailable, having stored nothing", async () => {
    const { url, raw } = await open();
    const { pool, counter } = flakyPool(url, Number.POSITIVE_INFINITY, sqlState("53300")); // too many connections
    const corq = createCorq({ db: pool, retries: { withinMs: 400 } });
    try {
      const started = Date.now();
      const error = await corq.append("s", [{ name: "E", data: {} }]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorqError);
      expect(error).toMatchObject({ code: "database_unavailable", status: 503 });
      expect(Date.now() - started).toBeLessThan(400 + 300);
      expect(counter.connects).toBeGreaterThan(2);
      expect((await raw.query("SELECT count(*)::int AS n FROM corq.events")).rows[0].n).toBe(0);
    } finally {
      await corq.close();
      await pool.end();
    }
  });

  it("retries: { withinMs: 0 } sends once", async () => {
    const { url } = await open();
    const { pool, counter } = flakyPool(url, 1, refused);
    const corq = createCorq({ db: pool, retries: { withinMs: 0 } });
    try {
      await expect(corq.append("s", [{ name: "E", data: {} }])).rejects.toMatchObject({ code: "database_unavailable" });
      expect(counter.connects).toBe(1);
    } finally {
      await corq.close();
      await pool.end();
    }
  });
  it.each([
    ["refused credentials", "28P01"],
    ["a missing database", "3D000"],
  ])("fails at once on %s (no retry)", async (_, code) => {
    const { url } = await open();
    const { pool, counter } = flakyPool(url, 100, sqlState(code));
    const corq = createCorq({ db: pool });
    try {
      const delays = recordBackoff(0.5);
      await expect(corq.append("s", [{ name: "E", data: {} }])).rejects.toMatchObject({
        code: "database_unavailable",
      });
      expect(counter.connects).toBe(1);
      expect(delays).toEqual([]);
    } finally {
      await corq.close();
      await pool.end();
    }
  });

  it("an append terminated while it waited (57P01: it did not commit) is sent again and stored once", async () => {
    const { url, raw } = await open();
    const { pool, counter } = flakyPool(url, 0, refused);
    const corq = createCorq({ db: pool });
    await corq.append("s", [{ name: "E", data: { by: "first" } }]);
    // another transaction holds the stream's row: the next append waits on it, mid-statement
    const holder = await raw.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT * FROM corq.streams WHERE stream = 's' FOR UPDATE");
      const connectsBefore = counter.connects;
      const cut = corq.append("s", [{ name: "E", data: { by: "cut" } }]);
      let waiting: number | undefined;
      for (let i = 0; i < 100 && waiting === undefined; i++) {
        const { rows } = await raw.query(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        waiting = rows[0]?.pid;
        if (waiting === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(waiting).toBeDefined();
      await raw.query("SELECT pg_terminate_backend($1)", [waiting]);
      await holder.query("COMMIT");
      expect(await cut).toMatchObject({ stream: "s", version: 1 });
      expect(counter.connects - connectsBefore).toBe(2); // the first send, and the one after the 57P01
      const { rows } = await raw.query("SELECT data->>'by' AS by FROM corq.events ORDER BY position");
      expect(rows.map((r) => r.by)).toEqual(["first", "cut"]);
    } finally {
      holder.release();
      await corq.close();
      await pool.end();
    }
  });
});

describe("a connection cut while the statement was out (it ran; its answer was lost)", () => {
  async function throughProxy() {
    const opened = await open({ subscriptions: [{ name: "sub", handle: async () => undefined }] });
    const proxy = await startTerminatingProxy(opened.url);
    closers.push(() => proxy.close());
    const corq = createCorq({
      databaseUrl: proxy.url,
      subscriptions: [{ name: "sub", handle: async () => undefined }],
    });
    closers.push(() => corq.close());
    return { ...opened, proxy, through: corq };
  }

  it("an append is not sent again: database_unavailable, and the event is stored once", async () => {
    const { raw, proxy, through } = await throughProxy();
    proxy.cutAnswers(/claim\.version/);
    const error = await through.append("s", [{ name: "E", data: {} }]).catch((e: unknown) => e);
    expect(proxy.terminated()).toBe(1);
    expect(error).toMatchObject({ code: "database_unavailable" });
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.events WHERE stream = 's'")).rows[0].n).toBe(1);
  });

  it("an advance is sent again (it moves on from where the first left off): every event enqueued once", async () => {
    const { corq, raw, proxy, through } = await throughProxy();
    await corq.append("s", [
      { name: "E", data: {} },
      { name: "E", data: {} },
    ]);
    proxy.cutAnswers(/\bmoved AS \(/);
    await through.advance();
    expect(proxy.terminated()).toBe(1);
    const { rows } = await raw.query(
      "SELECT count(*)::int AS n, count(DISTINCT position)::int AS d FROM corq.queue WHERE subscription_id = (SELECT id FROM corq.subscriptions WHERE name = 'sub')",
    );
    expect(rows[0]).toEqual({ n: 2, d: 2 });
  });
});

/** A subscription "claimed" recording what it handles, and a second Corq that consumes it through a terminating proxy. */
async function claimedBehindProxy() {
  const delivered: string[] = [];
  const subscriptions = [
    {
      name: "claimed",
      handle: async (events: { position: number }[], ctx: { key: string }) => {
        for (const event of events) delivered.push(`${ctx.key}:${event.position}`);
      },
    },
  ];
  const { corq, url } = await open({ subscriptions });
  const proxy = await startTerminatingProxy(url);
  closers.push(() => proxy.close());
  const consumer = createCorq({ databaseUrl: proxy.url, subscriptions });
  closers.push(() => consumer.close());
  return { corq, consumer, proxy, delivered };
}

describe("a consumer's claim whose connection is terminated (57P01)", () => {
  it.each([
    ["consume()", (corq: ReturnType<typeof createCorq>) => corq.consume("claimed").then((r) => (r ? 1 : 0))],
    ["drain()", (corq: ReturnType<typeof createCorq>) => corq.drain("claimed").then((r) => r.batches)],
  ])("%s: the claim is sent again on a new connection and the batch is delivered at once", async (_, consume) => {
    const { corq, consumer, proxy, delivered } = await claimedBehindProxy();
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    proxy.terminateStatements(/\bgranted AS \(/);
    const started = Date.now();
    expect(await consume(consumer)).toBe(1);
    expect(proxy.terminated()).toBe(1);
    expect(Date.now() - started).toBeLessThan(3000); // not a lease (30 s)
    expect(delivered).toEqual(["k:1"]);
  });
});

describe("a drain's claim of two keys whose connection is terminated (57P01)", () => {
  it("is sent again once and both keys' batches are delivered at once, each once", async () => {
    const { corq, consumer, proxy, delivered } = await claimedBehindProxy();
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.append("j", [{ name: "E", data: {} }]);
    await corq.advance();
    proxy.terminateStatements(/\bgranted AS \(/);
    const started = Date.now();
    expect(await consumer.drain("claimed", { keysPerClaim: 2 })).toMatchObject({ batches: 2, events: 2 });
    expect(proxy.terminated()).toBe(1);
    expect(Date.now() - started).toBeLessThan(3000); // not a lease (30 s)
    expect([...delivered].sort()).toEqual(["j:2", "k:1"]);
  });
});

describe("neverCommitted: the errors after which any statement, an append too, is sent again", () => {
  const pgError = (code: string, message = "x") => Object.assign(new Error(message), { code });
  it.each([
    ["57P01 admin_shutdown (terminated while it ran)", pgError("57P01"), true],
    ["57P03 cannot_connect_now", pgError("57P03"), true],
    ["53300 too_many_connections", pgError("53300"), true],
    ["40P01 deadlock (rolled back)", pgError("40P01"), true],
    ["40001 serialization failure", pgError("40001"), true],
    ["a failed connect (ConnectFailed)", new ConnectFailed(pgError("ECONNRESET", "read ECONNRESET")), true],
    [
      "Neon: couldn't connect to compute",
      new Error("Server error (HTTP status 503): couldn't connect to compute node"),
      true,
    ],
    ["Neon HTTP 429", new Error("Server error (HTTP status 429): x"), true],
    ["wrapped as database_unavailable", new CorqError("database_unavailable", "x", { cause: pgError("57P01") }), true],
    ["ECONNRESET while the statement was out", pgError("ECONNRESET", "read ECONNRESET"), false],
    ["Connection terminated unexpectedly", new Error("Connection terminated unexpectedly"), false],
    ["08006 connection_failure", pgError("08006"), false],
    ["Neon HTTP 502", new Error("Server error (HTTP status 502): bad gateway"), false],
    ["23505 unique_violation", pgError("23505"), false],
  ])("%s → %s", (_, error, expected) => {
    expect(neverCommitted(error)).toBe(expected);
  });
});
