// The test kit's unit-test half (corqueue/testing), through its public entry only, as a user
// imports it: the event builders' defaults and overrides, and a handler context that records
// what the handler sent (ctx.run, ctx.tx) and appended (ctx.corq), with canned results.
import { describe, expect, expectTypeOf, it } from "vitest";
import { sql } from "drizzle-orm";
import { integer, pgSchema, text } from "drizzle-orm/pg-core";
import { CorqError, type HandlerContext, type TransactionalHandlerContext } from "../src/index.js";
import {
  deliveredEvent,
  deliveredEvents,
  handlerContext,
  TEST_EPOCH,
  type RecordedStatement,
} from "../src/testing/index.js";

describe("deliveredEvents", () => {
  it("numbers one key's batch like corq: seq 1, 2, 3, ascending positions, versions per stream, one clock", () => {
    const events = deliveredEvents("room-1", [
      { name: "Arrived", data: { roomId: "1" } },
      { name: "Arrived", stream: "visitor-bob" },
      { name: "Departed" },
      { name: "Departed", stream: "visitor-bob" },
    ]);
    expect(events).toEqual([
      {
        position: 1,
        stream: "room-1",
        version: 0,
        name: "Arrived",
        data: { roomId: "1" },
        meta: {},
        createdAt: TEST_EPOCH,
        seq: 1,
        replay: false,
      },
      expect.objectContaining({ position: 2, stream: "visitor-bob", version: 0, seq: 2, data: {} }),
      expect.objectContaining({ position: 3, stream: "room-1", version: 1, seq: 3 }),
      expect.objectContaining({ position: 4, stream: "visitor-bob", version: 1, seq: 4 }),
    ]);
    expect(events.map((e) => e.createdAt)).toEqual([
      "2026-01-01T00:00:00.000Z",
      "2026-01-01T00:00:01.000Z",
      "2026-01-01T00:00:02.000Z",
      "2026-01-01T00:00:03.000Z",
    ]);
  });

  it("takes every default from the options, and every field from the event", () => {
    const events = deliveredEvents("a", [{ name: "X" }, { name: "Y", seq: 99, replay: true, meta: { m: 1 } }], {
      stream: "visitor-a",
      firstSeq: 7,
      firstPosition: 100,
      firstVersion: 4,
      startAt: new Date("2030-05-05T10:00:00Z"),
      stepMs: 10,
    });
    expect(events).toEqual([
      expect.objectContaining({
        stream: "visitor-a",
        seq: 7,
        position: 100,
        version: 4,
        createdAt: "2030-05-05T10:00:00.000Z",
      }),
      expect.objectContaining({
        seq: 99,
        position: 101,
        version: 5,
        replay: true,
        meta: { m: 1 },
        createdAt: "2030-05-05T10:00:00.010Z",
      }),
    ]);
    expect(deliveredEvents("k", [])).toEqual([]);
  });

  it("builds one event with the same defaults", () => {
    expect(deliveredEvent({ name: "Registered", data: { name: "ada" } })).toEqual({
      position: 1,
      stream: "test-stream",
      version: 0,
      name: "Registered",
      data: { name: "ada" },
      meta: {},
      createdAt: TEST_EPOCH,
      seq: 1,
      replay: false,
    });
    expect(deliveredEvent({ name: "N", stream: "s", seq: 3, createdAt: "x" })).toMatchObject({
      stream: "s",
      seq: 3,
      createdAt: "x",
    });
  });
});

const app = pgSchema("app");
const rooms = app.table("rooms", { room: text("room").primaryKey(), occupants: integer("occupants").notNull() });

describe("handlerContext", () => {
  it("is a handler's context with test defaults, and records ctx.run as rendered SQL and parameters", async () => {
    const ctx = handlerContext({ subscription: "occupancy", key: "room-1", attempt: 2 });
    expectTypeOf(ctx).toMatchTypeOf<HandlerContext>();
    expect(ctx).toMatchObject({
      subscription: "occupancy",
      key: "room-1",
      attempt: 2,
      incarnation: "test-incarnation",
    });
    expect(ctx.signal.aborted).toBe(false);
    expect(ctx.tx).toBeUndefined();
    expect(handlerContext()).toMatchObject({ subscription: "test-subscription", key: "test-key", attempt: 1 });

    const rows = await ctx.run(sql`UPDATE app.rooms SET occupants = occupants + ${1} WHERE room = ${"room-1"}`);
    await ctx.run(sql`SELECT ${[1, 2]}::int[] AS ids`);
    expect(rows).toEqual([]);
    expect(ctx.statements).toEqual<RecordedStatement[]>([
      { via: "run", sql: "UPDATE app.rooms SET occupants = occupants + $1 WHERE room = $2", params: [1, "room-1"] },
      // drizzle spreads an array into a list ($1, $2): what Postgres gets, which a test should see
      { via: "run", sql: "SELECT ($1, $2)::int[] AS ids", params: [1, 2] },
    ]);
  });

  it("answers each statement with the test's rows: a list in call order, or a function (which may throw)", async () => {
    const listed = handlerContext({ results: [[{ occupants: 3 }], [{ occupants: 4 }]] });
    expect(await listed.run(sql`SELECT 1`)).toEqual([{ occupants: 3 }]);
    expect(await listed.run(sql`SELECT 2`)).toEqual([{ occupants: 4 }]);
    expect(await listed.run(sql`SELECT 3`)).toEqual([]);

    const computed = handlerContext({
      results: (statement, index) => {
        if (statement.sql.startsWith("DELETE")) throw new Error("permission denied");
        return [{ index, first: statement.params[0] }];
      },
    });
    expect(await computed.run(sql`SELECT ${"a"}`)).toEqual([{ index: 0, first: "a" }]);
    await expect(computed.run(sql`DELETE FROM x`)).rejects.toThrow("permission denied");
    expect(computed.statements.map((s) => s.sql)).toEqual(["SELECT $1", "DELETE FROM x"]);
  });

  it("gives a transactional handler a drizzle ctx.tx whose statements are recorded beside ctx.run's, in order", async () => {
    const ctx = handlerContext({ transactional: true, results: [[], [["room-1", 5]], [], [], []] });
    expectTypeOf(ctx).toMatchTypeOf<TransactionalHandlerContext>();
    await ctx.tx.insert(rooms).values({ room: "room-1", occupants: 1 }).onConflictDoNothing();
    expect(await ctx.tx.select().from(rooms)).toEqual([{ room: "room-1", occupants: 5 }]);
    await ctx.tx.transaction(async (nested) => {
      await nested.execute(sql`UPDATE app.rooms SET occupants = ${0}`);
    });
    await ctx.run(sql`SELECT ${"last"}`);
    expect(ctx.statements).toEqual([
      {
        via: "tx",
        sql: 'insert into "app"."rooms" ("room", "occupants") values ($1, $2) on conflict do nothing',
        params: ["room-1", 1],
      },
      { via: "tx", sql: 'select "room", "occupants" from "app"."rooms"', params: [] },
      { via: "tx", sql: "savepoint corq_sp1", params: [] },
      { via: "tx", sql: "UPDATE app.rooms SET occupants = $1", params: [0] },
      { via: "tx", sql: "release savepoint corq_sp1", params: [] },
      { via: "run", sql: "SELECT $1", params: ["last"] },
    ]);
  });

  it("keeps what the handler appends through ctx.corq, with the real append's version check and validation", async () => {
    const ctx = handlerContext();
    const first = await ctx.corq.append("welcome-ada", [{ name: "Welcomed", data: { n: 1 } }], { expectedVersion: -1 });
    expect(first).toEqual({ stream: "welcome-ada", version: 0, positions: [1] });
    const again = ctx.corq.append("welcome-ada", [{ name: "Welcomed", data: { n: 2 } }], { expectedVersion: -1 });
    await expect(again).rejects.toMatchObject({ code: "version_conflict" });
    await expect(again).rejects.toBeInstanceOf(CorqError);
    await ctx.corq.append("welcome-ada", [{ name: "Again", data: null }]);
    await expect(ctx.corq.append("-bad name", [{ name: "E", data: {} }])).rejects.toMatchObject({
      code: "invalid_input",
    });
    expect(ctx.appended).toEqual([
      {
        stream: "welcome-ada",
        events: [{ name: "Welcomed", data: { n: 1 } }],
        expectedVersion: -1,
        result: { stream: "welcome-ada", version: 0, positions: [1] },
      },
      {
        stream: "welcome-ada",
        events: [{ name: "Again", data: null }],
        result: { stream: "welcome-ada", version: 1, positions: [2] },
      },
    ]);
    expect((await ctx.corq.readStream("welcome-ada")).map((e) => [e.version, e.name])).toEqual([
      [0, "Welcomed"],
      [1, "Again"],
    ]);
  });

  it("says how to supply a ctx.corq method the stand-in lacks, and uses the ones the test gives", async () => {
    const ctx = handlerContext({ corq: { subscription: async () => ({ name: "given" }) as never } });
    expect(() => ctx.corq.stats()).toThrow(
      /ctx\.corq\.stats is not part of the test kit's stand-in.*handlerContext\(\{ corq: \{ stats/,
    );
    expect(await ctx.corq.subscription("x")).toEqual({ name: "given" });
    await ctx.corq.append("s", [{ name: "E", data: {} }]);
    expect(ctx.appended).toHaveLength(1);
  });
});
