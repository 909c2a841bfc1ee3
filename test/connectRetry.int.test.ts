// Getting a pooled connection is retried (src/db/executor.ts connectWithRetry): exponential
// backoff with full jitter — 100 ms doubling, capped at 2 s, 6 attempts, about 3 s in all —
// and only that step, so no statement ever runs twice (docs/guarantees.md). The pool is a
// real node-postgres pool on the test database whose connect step fails on demand.
import { afterEach, describe, expect, it, vi } from "vitest";
import pg from "pg";
import { CorqError, createCorq } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();
afterEach(() => vi.restoreAllMocks());

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
    if (ms !== undefined && ms > 0 && ms <= 2000) delays.push(ms);
    return original(fn, 0); // no need to wait for real
  }) as typeof setTimeout);
  return delays;
}

describe("connecting", () => {
  it("retries the connect step with full jitter, 100 ms doubling, 6 attempts, then runs the statement once", async () => {
    const { url, raw } = await open();
    const { pool, counter } = flakyPool(url, 5, refused);
    let statements = 0;
    const corq = createCorq({ db: pool, onStatement: () => void statements++ });
    try {
      const delays = recordBackoff(0.999);
      await corq.append("s", [{ name: "E", data: {} }]);
      expect(counter.connects).toBe(6);
      // jitter × cap: caps 100, 200, 400, 800, 1,600 ms — 3.1 s at most before the 6th attempt
      expect(delays.map((d) => Math.round(d / 0.999))).toEqual([100, 200, 400, 800, 1600]);
      expect(statements).toBe(1);
      const { rows } = await raw.query("SELECT count(*)::int AS n FROM corq.events");
      expect(rows[0].n).toBe(1);
    } finally {
      await corq.close();
      await pool.end();
    }
  });

  it("gives up after the 6th failed connect with database_unavailable, having sent nothing", async () => {
    const { url, raw } = await open();
    const { pool, counter } = flakyPool(url, 100, sqlState("53300")); // too many connections
    const corq = createCorq({ db: pool });
    try {
      recordBackoff(0.5);
      const error = await corq.append("s", [{ name: "E", data: {} }]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorqError);
      expect(error).toMatchObject({ code: "database_unavailable", status: 503 });
      expect(counter.connects).toBe(6);
      expect((await raw.query("SELECT count(*)::int AS n FROM corq.events")).rows[0].n).toBe(0);
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

  it("never runs a statement twice: one cut off on an established connection fails and is not sent again", async () => {
    const { url, raw } = await open();
    const { pool, counter } = flakyPool(url, 0, refused);
    pool.on("error", () => undefined);
    const corq = createCorq({ db: pool });
    await corq.append("s", [{ name: "E", data: { by: "first" } }]);
    // another transaction holds the stream's row: the next append waits on it, mid-statement
    const holder = await raw.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT * FROM corq.streams WHERE stream = 's' FOR UPDATE");
      const connectsBefore = counter.connects;
      const cut = corq.append("s", [{ name: "E", data: { by: "cut" } }]).catch((e: unknown) => e);
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
      expect(await cut).toMatchObject({ code: "database_unavailable" });
      await holder.query("COMMIT");
      expect(counter.connects - connectsBefore).toBe(1); // one connect, one send: nothing retried
      await new Promise((resolve) => setTimeout(resolve, 200)); // a retry, had there been one, would land now
      const { rows } = await raw.query("SELECT data->>'by' AS by FROM corq.events ORDER BY position");
      expect(rows.map((r) => r.by)).toEqual(["first"]);
    } finally {
      holder.release();
      await corq.close();
      await pool.end();
    }
  });
});
