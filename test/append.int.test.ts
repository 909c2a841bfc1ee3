import { describe, expect, it } from "vitest";
import { drizzle } from "drizzle-orm/node-postgres";
import { sql } from "drizzle-orm";
import { CorqError } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const arrived = (roomId: string) => ({ name: "Arrived", data: { roomId } });

async function countEvents(raw: import("pg").Pool) {
  const { rows } = await raw.query("SELECT count(*)::int AS n FROM corq.events");
  return rows[0].n as number;
}

describe("append", () => {
  it("assigns versions from 0 and positions in input order", async () => {
    const { corq } = await open();
    const first = await corq.append("visitor-1", [{ name: "Registered", data: { name: "Ada" } }, arrived("12")]);
    expect(first.version).toBe(1);
    expect(first.positions).toHaveLength(2);
    expect(first.positions[1]).toBeGreaterThan(present(first.positions[0], "the first position"));
    const many = await corq.append(
      "visitor-1",
      Array.from({ length: 300 }, (_, i) => ({ name: "Tick", data: { i } })),
    );
    expect(many.version).toBe(301);
    const stream = await corq.readStream("visitor-1", { limit: 1000 });
    expect(stream.map((e) => e.version)).toEqual(Array.from({ length: 302 }, (_, i) => i));
    // positions follow input order (docs/architecture.md, invariant 5)
    const ticks = stream.slice(2);
    expect(ticks.map((e) => (e.data as { i: number }).i)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(ticks.map((e) => e.position)).toEqual([...ticks.map((e) => e.position)].sort((a, b) => a - b));
    expect(stream[0]).toMatchObject({ stream: "visitor-1", name: "Registered", data: { name: "Ada" }, meta: {} });
    const { createdAt } = present(stream[0], "the stream's first event");
    expect(new Date(createdAt).toISOString()).toBe(createdAt);
  });

  it("enforces expectedVersion: -1 (no stream), exact n, and rejects with nothing written", async () => {
    const { corq, raw } = await open();
    await corq.append("s", [arrived("1")], { expectedVersion: -1 });
    await expect(corq.append("s", [arrived("1")], { expectedVersion: -1 })).rejects.toMatchObject({
      code: "version_conflict",
      status: 409,
    });
    await corq.append("s", [arrived("1"), arrived("2")], { expectedVersion: 0 });
    const conflict = await corq.append("s", [arrived("3")], { expectedVersion: 1 }).catch((e) => e);
    expect(conflict).toBeInstanceOf(CorqError);
    expect(conflict.details).toMatchObject({ actualVersion: 2, expectedVersion: 1 });
    await expect(corq.append("nope", [arrived("1")], { expectedVersion: 0 })).rejects.toMatchObject({
      code: "version_conflict",
    });
    expect(await countEvents(raw)).toBe(3);
    const { rows } = await raw.query("SELECT stream, version FROM corq.streams ORDER BY stream");
    expect(rows).toEqual([{ stream: "s", version: 2 }]);
  });

  it("lets exactly one of many concurrent appends with the same expectedVersion win", async () => {
    const { corq, raw } = await open({ poolSize: 10 });
    await corq.append("race", [arrived("0")]);
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => corq.append("race", [arrived(String(i))], { expectedVersion: 0 })),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(rejected.every((r) => r.reason.code === "version_conflict")).toBe(true);
    expect(await countEvents(raw)).toBe(2);
  });

  it("serialises concurrent appends without expectedVersion: no version twice, none lost", async () => {
    const { corq } = await open({ poolSize: 10 });
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => corq.append("busy", [arrived(String(i)), arrived(String(i))])),
    );
    const events = await corq.readStream("busy");
    expect(events.map((e) => e.version)).toEqual(Array.from({ length: 80 }, (_, i) => i));
  });

  it("rejects invalid input with a typed error and writes nothing", async () => {
    const { corq, raw } = await open();
    const bad: [string, unknown, unknown?][] = [
      ["", [arrived("1")]],
      ["has space", [arrived("1")]],
      ["s", []],
      ["s", [{ name: "", data: {} }]],
      [
        "s",
        [
          { name: "Ok", data: {} },
          { name: "Bad", data: undefined },
        ],
      ],
      ["s", [{ name: "Ok", data: { f: () => 1 } }]],
      ["s", [{ name: "Ok", data: "nul\u0000byte" }]],
      ["s", [{ name: "Ok", data: { "lone\uD800": 1 } }]],
      ["s", [{ name: "Ok", data: ["x\uDC00"] }]],
      ["s", [{ name: "Ok", data: { n: Number.NaN } }]],
      // 5,000 levels deep: a 400, not a stack overflow (and no partial write before it)
      [
        "s",
        [arrived("1"), { name: "Ok", data: Array.from({ length: 5000 }).reduce<unknown>((inner) => ({ inner }), 1) }],
      ],
      ["s", [{ name: "Ok", data: {}, meta: "not an object" }]],
      ["s", [arrived("1")], { expectedVersion: -2 }],
      ["s", [arrived("1")], { expectedVersion: 1.5 }],
    ];
    for (const [stream, events, options] of bad) {
      const error = await corq.append(stream, events as never, options as never).catch((e) => e);
      expect(error, JSON.stringify([stream, options])).toBeInstanceOf(CorqError);
      expect(error.code).toBe("invalid_input");
      expect(error.status).toBe(400);
    }
    expect(await countEvents(raw)).toBe(0);
  });

  it("appends inside the caller's transaction (transactional outbox)", async () => {
    const { corq, raw } = await open();
    await raw.query("CREATE TABLE visitors (id text PRIMARY KEY)");
    const db = drizzle(raw);
    await db.transaction(async (tx) => {
      await tx.execute(sql`INSERT INTO visitors VALUES ('ada')`);
      await corq.append("visitor-ada", [{ name: "Registered", data: {} }], { tx });
    });
    await expect(
      db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO visitors VALUES ('bob')`);
        await corq.append("visitor-bob", [{ name: "Registered", data: {} }], { tx });
        throw new Error("business rule failed");
      }),
    ).rejects.toThrow("business rule failed");
    // a plain pg client in a transaction works too
    const client = await raw.connect();
    await client.query("BEGIN");
    await corq.append("visitor-cy", [{ name: "Registered", data: {} }], { tx: client });
    await client.query("ROLLBACK");
    client.release();
    const { rows } = await raw.query("SELECT stream FROM corq.events ORDER BY position");
    expect(rows.map((r) => r.stream)).toEqual(["visitor-ada"]);
    expect((await raw.query("SELECT id FROM visitors")).rows).toEqual([{ id: "ada" }]);
  });
});

describe("readLog", () => {
  it("pages the global log with a position cursor", async () => {
    const { corq } = await open();
    for (let i = 0; i < 25; i++) await corq.append(`v-${i % 3}`, [arrived(String(i))]);
    const seen: number[] = [];
    let after = 0;
    for (let pages = 0; ; pages++) {
      if (pages > 10) throw new Error("readLog never reached the end of 25 events in pages of 10");
      const page = await corq.readLog({ after, limit: 10 });
      if (page.next === null) break;
      seen.push(...page.events.map((e) => e.position));
      after = page.next;
    }
    expect(seen).toHaveLength(25);
    expect(new Set(seen).size).toBe(25);
    await expect(corq.readLog({ after: 999_999 })).rejects.toMatchObject({ code: "invalid_input" });
  });

  it("never shows an event while an older transaction could still commit before it, and never skips it", async () => {
    const { corq, raw } = await open();
    await corq.append("a", [arrived("0")]);
    const slow = await raw.connect();
    await slow.query("BEGIN");
    await slow.query("SELECT pg_current_xact_id()"); // takes its xid now: it is the older transaction
    await corq.append("b", [arrived("1")]); // commits first
    const before = await corq.readLog();
    expect(before.events.map((e) => e.stream)).toEqual(["a"]);
    await corq.append("c", [arrived("2")], { tx: slow });
    await slow.query("COMMIT");
    slow.release();
    const after = await corq.readLog({ after: before.next! });
    // log order is (tx, position): c's transaction is older, so it comes before b
    expect(after.events.map((e) => e.stream)).toEqual(["c", "b"]);
  });
});
