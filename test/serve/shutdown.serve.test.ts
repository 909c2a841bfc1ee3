// SIGTERM stops `npm run serve` gracefully (CLARIFICATIONS, issue 13 there): it claims nothing
// new, in-flight batches get CORQ_SHUTDOWN_MS to finish; after that their handlers are
// aborted, and the lease of a batch whose handler gave up is released at once — another
// process picks the key up at once, not after the lease — but never while a handler still
// runs. The process exits 0.
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { createCorq, type Corq } from "../../src/index.js";
import { createTestDatabase } from "../helpers/database.js";
import { startServeProcess, type ServeProcess } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";

const KEYS = ["k1", "k2", "k3"];
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function setup() {
  const database = await createTestDatabase(inject("postgresUrl"));
  const raw = new pg.Pool({ connectionString: database.url, max: 2 });
  raw.on("error", () => undefined);
  const corq: Corq = createCorq({ databaseUrl: database.url, notify: true });
  cleanups.push(
    database.drop,
    () => raw.end(),
    () => corq.close(),
  );
  const serve = async (env: Record<string, string>) => {
    const started = await startServeProcess({ databaseUrl: database.url, entry: "test/serve/recordingServe.ts", env });
    cleanups.push(() => started.stop("SIGKILL"));
    return started;
  };
  const leased = async () =>
    (await raw.query("SELECT key FROM corq.keys WHERE lease_token IS NOT NULL ORDER BY key")).rows.map((r) => r.key);
  const handledBy = async (serve: ServeProcess) =>
    (
      await raw.query("SELECT key, position::int, finished_at FROM serve_handled WHERE pid = $1 ORDER BY id", [
        serve.child.pid,
      ])
    ).rows;
  return { raw, corq, serve, leased, handledBy };
}

describe("serve: graceful shutdown on SIGTERM", () => {
  it("lets in-flight batches finish and ack, claims nothing new, exits 0", async () => {
    const { corq, serve, leased, handledBy } = await setup();
    const first = await serve({ CORQ_TEST_HANDLER_MS: "1500", CORQ_CONCURRENCY: "4" });
    for (const key of KEYS) await corq.append(key, [{ name: "E", data: { n: 1 } }]);
    await eventually(async () => expect(await leased()).toEqual(KEYS), { intervalMs: 20 });

    const exited = first.stop("SIGTERM");
    // appended after the SIGTERM: the stopping process must not take these
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const key of KEYS) await corq.append(key, [{ name: "E", data: { n: 2 } }]);
    expect(await exited).toBe(0);
    expect(first.output()).toContain("SIGTERM: stopping");

    const done = await handledBy(first);
    expect(done.map((r) => r.key).sort()).toEqual(KEYS);
    expect(done.every((r) => r.finished_at !== null)).toBe(true);
    expect(await leased()).toEqual([]); // acked: nothing left leased

    // the second events are there for the next process
    const next = await serve({});
    await eventually(async () => expect((await handledBy(next)).map((r) => r.key).sort()).toEqual(KEYS));
  });

  it("aborts handlers still running after the bound and releases their leases: the next process takes the keys at once", async () => {
    const { raw, corq, serve, leased, handledBy } = await setup();
    const stopping = await serve({
      CORQ_TEST_HANDLER: "until-aborted",
      CORQ_SHUTDOWN_MS: "300",
      CORQ_CONCURRENCY: "4",
    });
    for (const key of KEYS) await corq.append(key, [{ name: "E", data: {} }]);
    await eventually(async () => expect((await handledBy(stopping)).length).toBe(KEYS.length), { intervalMs: 20 });
    // a second process, started while the first holds every key (30 s leases): nothing for it yet
    const next = await serve({});
    expect(await leased()).toEqual(KEYS);

    const signalled = Date.now();
    expect(await stopping.stop("SIGTERM")).toBe(0);
    await eventually(async () => expect((await handledBy(next)).map((r) => r.key).sort()).toEqual(KEYS), {
      intervalMs: 10,
    });
    // when the next process started each batch, measured from the end of the 300 ms bound
    const { rows } = await raw.query(
      "SELECT (extract(epoch FROM max(started_at)) * 1000)::float8 AS last FROM serve_handled WHERE pid = $1",
      [next.child.pid],
    );
    const pickupMs = rows[0].last - (signalled + 300);
    console.log(
      `serve shutdown: released keys picked up by the next process ${pickupMs.toFixed(0)} ms after the bound`,
    );
    expect(pickupMs).toBeLessThan(10_000); // far below the 30 s lease: released, not expired
    // released, not failed: the next process's batch was a first attempt again
    const attempts = await raw.query("SELECT max(attempts)::int AS n FROM corq.keys");
    expect(attempts.rows[0].n).toBe(0);
  });

  it("never releases the lease of a handler that is still running: it is left to expire", async () => {
    const { corq, serve, leased, handledBy } = await setup();
    const stubborn = await serve({
      CORQ_TEST_HANDLER: "ignore-abort",
      CORQ_SHUTDOWN_MS: "200",
      CORQ_SHUTDOWN_GRACE_MS: "300",
    });
    for (const key of KEYS) await corq.append(key, [{ name: "E", data: {} }]);
    await eventually(async () => expect((await handledBy(stubborn)).length).toBe(KEYS.length), { intervalMs: 20 });
    expect(await stubborn.stop("SIGTERM")).toBe(0);
    // one consumer holds all three keys (a multi-key claim) or several do: either way none is released
    expect(stubborn.output()).toMatch(/[1-3] consumer\(s\) with handlers still running were left/);
    expect(await leased()).toEqual(KEYS);
  });
});
