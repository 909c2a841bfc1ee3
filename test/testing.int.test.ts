// The test kit's database half (corqueue/testing), through its public entry only, on real
// Postgres: createTestDatabase gives a test a database of its own; runUntilIdle drives append →
// advance → consume until every subscription is idle, reports what ran (failures, dead letters,
// keys left in backoff), and throws, naming what is pending, when it cannot get there.
import { afterEach, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq, type Corq, type SubscriptionDefinition } from "../src/index.js";
import { createTestDatabase, runUntilIdle, type TestDatabase } from "../src/testing/index.js";

const opened: { corq: Corq; database: TestDatabase }[] = [];
afterEach(async () => {
  for (const { corq, database } of opened.splice(0)) {
    await corq.close();
    await database.drop();
  }
});

/** A corq on a database of its own, migrated: as a user's test would open one. */
async function open(subscriptions: SubscriptionDefinition[]) {
  // the suite's migrated template (test/setup/postgres.ts) saves the migration per test
  const database = await createTestDatabase(inject("postgresUrl"), { template: "corq_test_template" });
  const corq = createCorq({ databaseUrl: database.url, subscriptions });
  opened.push({ corq, database });
  await corq.migrate();
  return corq;
}

const noBackoff = { initialMs: 0, maxMs: 0, factor: 1 };

/** A handler that records what it got, per key, and fails the first batch of the keys in `failOnce`. */
function recording(failOnce: string[]) {
  const seen: Record<string, number[]> = {};
  const failed = new Set<string>();
  const handle: SubscriptionDefinition["handle"] = (events, ctx) => {
    if (failOnce.includes(ctx.key) && !failed.has(ctx.key)) {
      failed.add(ctx.key);
      throw new Error(`${ctx.key} fails once`);
    }
    seen[ctx.key] = [...(seen[ctx.key] ?? []), ...events.map((e) => e.seq)];
  };
  return { seen, handle };
}

describe("createTestDatabase", () => {
  it("creates an empty database of its own that corq migrates, and drops it", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { prefix: "kit_check" });
    expect(new URL(database.url).pathname).toMatch(/^\/kit_check_[0-9a-f]{12}$/);
    const corq = createCorq({ databaseUrl: database.url });
    expect((await corq.migrate()).applied.length).toBeGreaterThan(0);
    await corq.close();
    await database.drop();
    const admin = new pg.Client({ connectionString: inject("postgresUrl") });
    await admin.connect();
    const { rows } = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [
      new URL(database.url).pathname.slice(1),
    ]);
    await admin.end();
    expect(rows).toEqual([]);
  });
});

describe("runUntilIdle", () => {
  it("drives two keys to idle through a failure of one, and reports the batches and the failure", async () => {
    const { seen, handle } = recording(["a"]);
    const corq = await open([{ name: "orders", key: "stream", backoff: noBackoff, handle }]);
    await corq.append("a", [
      { name: "E", data: 1 },
      { name: "E", data: 2 },
    ]);
    await corq.append("b", [{ name: "E", data: 3 }]);

    const report = await runUntilIdle(corq);

    expect(seen).toEqual({ a: [1, 2], b: [1] });
    expect(report.failures).toEqual([
      { subscription: "orders", key: "a", events: 2, outcome: "retry", error: "Error: a fails once" },
    ]);
    // after a failure corq hands the key's head event over alone, then the rest
    const acked = (key: string) =>
      report.batches.filter((b) => b.key === key && b.outcome === "acked").reduce((n, b) => n + b.events, 0);
    expect([acked("a"), acked("b"), report.batches.length]).toEqual([2, 1, 4]);
    expect(report).toMatchObject({ deadLetters: [], waiting: [] });
    const stats = await corq.subscription("orders");
    expect(stats).toMatchObject({ lag: 0, pending: 0, keys: { ready: 0, leased: 0, backoff: 0, dead: 0 } });
  });

  it("follows what handlers append into the other subscriptions' queues", async () => {
    const welcomed: string[] = [];
    const corq = await open([
      {
        name: "greeter",
        events: ["Registered"],
        handle: async (events, ctx) => {
          for (const e of events) await ctx.corq.append(`welcome-${e.stream}`, [{ name: "Welcomed", data: e.stream }]);
        },
      },
      { name: "mailer", events: ["Welcomed"], handle: (events) => void welcomed.push(...events.map((e) => e.stream)) },
    ]);
    await corq.append("ada", [{ name: "Registered", data: {} }]);
    await corq.append("bob", [{ name: "Registered", data: {} }]);
    const report = await runUntilIdle(corq);
    expect(welcomed.sort()).toEqual(["welcome-ada", "welcome-bob"]);
    expect(report.failures).toEqual([]);
    expect(report.batches).toHaveLength(4);
  });

  it("leaves alone the subscriptions another instance defined (it has their handlers, this corq has not)", async () => {
    const theirs = recording([]);
    const corq = await open([{ name: "theirs", key: "stream", handle: theirs.handle }]);
    const { url } = (opened.at(-1) as { database: TestDatabase }).database;
    const ours = recording([]);
    const mine = createCorq({
      databaseUrl: url,
      subscriptions: [{ name: "mine", key: "stream", handle: ours.handle }],
    });
    opened.unshift({ corq: mine, database: { url, drop: async () => undefined } }); // closed before the drop
    await mine.migrate();
    await corq.append("a", [{ name: "E", data: 1 }]);
    const report = await runUntilIdle(mine);
    expect(ours.seen).toEqual({ a: [1] });
    expect(report.batches.map((b) => b.subscription)).toEqual(["mine"]);
    // what is theirs is still theirs to run, untouched
    expect((await runUntilIdle(corq)).failures).toEqual([]);
    expect(theirs.seen).toEqual({ a: [1] });
  });

  it("reports keys left in backoff, or waits for them with waitForBackoff", async () => {
    const slow = recording(["a"]);
    const corq = await open([
      { name: "slow", key: "stream", backoff: { initialMs: 600_000, maxMs: 600_000, factor: 1 }, handle: slow.handle },
    ]);
    await corq.append("a", [{ name: "E", data: 1 }]);
    await corq.append("b", [{ name: "E", data: 2 }]);
    const report = await runUntilIdle(corq);
    expect(slow.seen).toEqual({ b: [1] });
    expect(report.waiting).toEqual([
      {
        subscription: "slow",
        key: "a",
        availableAt: expect.any(String),
        attempts: 1,
        lastError: "Error: a fails once",
      },
    ]);

    const quick = recording(["a"]);
    const other = await open([
      { name: "quick", key: "stream", backoff: { initialMs: 200, maxMs: 200, factor: 1 }, handle: quick.handle },
    ]);
    await other.append("a", [{ name: "E", data: 1 }]);
    await other.append("b", [{ name: "E", data: 2 }]);
    const waited = await runUntilIdle(other, { waitForBackoff: true });
    expect(quick.seen).toEqual({ a: [1], b: [1] });
    expect(waited.waiting).toEqual([]);
    expect(waited.failures.map((f) => f.key)).toEqual(["a"]);
  });

  it("reports the keys that died, and the others finish", async () => {
    const handle: SubscriptionDefinition["handle"] = (_events, ctx) => {
      if (ctx.key === "a") throw new Error("never works");
    };
    const corq = await open([{ name: "fragile", key: "stream", maxAttempts: 2, backoff: noBackoff, handle }]);
    await corq.append("a", [{ name: "E", data: 1 }]);
    await corq.append("b", [{ name: "E", data: 2 }]);
    const report = await runUntilIdle(corq);
    expect(report.failures.map((f) => `${f.key}:${f.outcome}`)).toEqual(["a:retry", "a:dead"]);
    expect(report.deadLetters).toMatchObject([
      { subscription: "fragile", key: "a", attempts: 2, lastError: "Error: never works" },
    ]);
    expect(report.batches.filter((b) => b.outcome === "acked").map((b) => b.key)).toEqual(["b"]);
  });

  it("throws, naming the key, when a key never runs out of work (maxBatches)", async () => {
    // a handler that appends to the stream it handles: every batch makes the next one
    const corq = await open([
      {
        name: "echo",
        key: "stream",
        handle: async (events, ctx) => {
          if (ctx.key === "loop") await ctx.corq.append("loop", [{ name: "E", data: events.length }]);
        },
      },
    ]);
    await corq.append("loop", [{ name: "E", data: 0 }]);
    await corq.append("calm", [{ name: "E", data: 0 }]);
    const run = runUntilIdle(corq, { maxBatches: 12 });
    await expect(run).rejects.toThrow(/not idle — 12 batches ran \(maxBatches\)/);
    await expect(run).rejects.toThrow(/most batches: echo \/ loop ×11, echo \/ calm ×1/);
    await expect(run).rejects.toThrow(/"echo": lag 1, ready 0/);
  });

  it("throws, naming the leased key, when a handler does not return in timeoutMs", async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const corq = await open([
      {
        name: "stuck",
        key: "stream",
        handle: async (_events, ctx) => {
          if (ctx.key === "a") await held;
        },
      },
    ]);
    await corq.append("a", [{ name: "E", data: 1 }]);
    const run = runUntilIdle(corq, { timeoutMs: 500 });
    await expect(run).rejects.toThrow(/not idle — still running after 500 ms \(timeoutMs\)/);
    await expect(run).rejects.toThrow(/"stuck": lag 0, ready 0, leased 1, backoff 0\n {4}key "a" leased, 1 pending/);
    release();
  });
});
