import { describe, expect, it } from "vitest";
import type { StoredEvent, SubscriptionDefinition } from "../src/index.js";
import { drain, useCorq } from "./helpers/corq.js";
import { until, within } from "./helpers/until.js";
import { reportScenario, tally } from "./helpers/chaos.js";
import { present } from "./helpers/present.js";

const open = useCorq();

/** A subscription that records what it handled, per key, in handling order. */
function recorder(definition: Omit<SubscriptionDefinition, "handle">) {
  const handled: { key: string; positions: number[] }[] = [];
  return {
    handled,
    byKey() {
      const map = new Map<string, number[]>();
      for (const batch of handled) map.set(batch.key, [...(map.get(batch.key) ?? []), ...batch.positions]);
      return map;
    },
    subscription: {
      ...definition,
      handle: (events: StoredEvent[], ctx: { key: string }) => {
        handled.push({ key: ctx.key, positions: events.map((e) => e.position) });
      },
    } satisfies SubscriptionDefinition,
  };
}

describe("advance and consume", () => {
  it("delivers each key's events in log order, one batch of ONE key at a time", async () => {
    const rec = recorder({ name: "policy", batchSize: 2 });
    const { corq } = await open({ subscriptions: [rec.subscription] });
    const a = await corq.append("visitor-a", [
      { name: "Registered", data: {} },
      { name: "Arrived", data: {} },
      { name: "Departed", data: {} },
    ]);
    const b = await corq.append("visitor-b", [{ name: "Registered", data: {} }]);
    expect(await corq.advance()).toEqual({ policy: 4 });
    expect(await corq.advance()).toEqual({ policy: 0 });
    const first = await corq.consume("policy");
    expect(first).toEqual({ key: "visitor-a", events: 2, outcome: "acked" });
    expect(await drain(corq, "policy")).toBe(2);
    expect(await corq.consume("policy")).toBeNull();
    expect(rec.byKey()).toEqual(
      new Map([
        ["visitor-a", a.positions],
        ["visitor-b", b.positions],
      ]),
    );
    const stats = await corq.subscription("policy");
    expect(stats).toMatchObject({
      lag: 0,
      pending: 0,
      keys: { ready: 0, leased: 0, backoff: 0, dead: 0 },
      oldestPendingAgeMs: null,
    });
    const keys = await corq.keys("policy");
    expect(keys.map((k) => [k.key, k.status, k.lastPosition])).toEqual([
      ["visitor-a", "idle", a.positions[2]],
      ["visitor-b", "idle", b.positions[0]],
    ]);
  });

  it("fans out to every subscription by event-name filter, and replays the log for a late subscription", async () => {
    const all = recorder({ name: "all" });
    const arrivals = recorder({ name: "arrivals", events: ["Arrived"] });
    const { corq, another } = await open({ subscriptions: [all.subscription, arrivals.subscription] });
    await corq.append("v1", [
      { name: "Registered", data: {} },
      { name: "Arrived", data: {} },
    ]);
    await corq.append("v2", [
      { name: "Arrived", data: {} },
      { name: "Departed", data: {} },
    ]);
    expect(await corq.advance()).toEqual({ all: 4, arrivals: 2 });
    await drain(corq, "all");
    await drain(corq, "arrivals");
    expect(all.handled.flatMap((b) => b.positions)).toHaveLength(4);
    expect(arrivals.handled.flatMap((b) => b.positions)).toHaveLength(2);

    const late = recorder({ name: "late", from: "beginning" });
    const fresh = recorder({ name: "fresh", from: "now" });
    const laterCorq = another({ subscriptions: [late.subscription, fresh.subscription] });
    await laterCorq.migrate();
    await corq.append("v3", [{ name: "Arrived", data: {} }]);
    expect(await laterCorq.advance()).toEqual({ late: 5, fresh: 1 });
    await drain(laterCorq, "late");
    await drain(laterCorq, "fresh");
    expect(late.handled.flatMap((b) => b.positions)).toHaveLength(5);
    expect(fresh.byKey()).toEqual(new Map([["v3", [expect.any(Number)]]]));
  });

  it("computes the key from a JSON path, a meta path or a function, and skips events without one", async () => {
    const rooms = recorder({ name: "rooms", key: "data.roomId" });
    const tenants = recorder({ name: "tenants", key: "meta.tenant" });
    const fn = recorder({ name: "fn", key: (e) => (e.name === "Departed" ? null : `${e.stream}/${e.name}`) });
    const { corq } = await open({ subscriptions: [rooms.subscription, tenants.subscription, fn.subscription] });
    const p1 = (await corq.append("v1", [{ name: "Arrived", data: { roomId: "12" }, meta: { tenant: "acme" } }]))
      .positions[0];
    const p2 = (await corq.append("v2", [{ name: "Arrived", data: { roomId: 12 }, meta: { tenant: "acme" } }]))
      .positions[0];
    const p3 = (await corq.append("v3", [{ name: "Arrived", data: { roomId: "7" } }])).positions[0];
    await corq.append("v4", [{ name: "Departed", data: { roomId: null } }]);
    expect(await corq.advance()).toEqual({ rooms: 3, tenants: 2, fn: 3 });
    for (const name of ["rooms", "tenants", "fn"]) await drain(corq, name);
    // "12" and 12 have the same text form (Postgres ->>), so they share a key
    expect(rooms.byKey()).toEqual(
      new Map([
        ["12", [p1, p2]],
        ["7", [p3]],
      ]),
    );
    expect(tenants.byKey()).toEqual(new Map([["acme", [p1, p2]]]));
    expect(fn.byKey()).toEqual(
      new Map([
        ["v1/Arrived", [p1]],
        ["v2/Arrived", [p2]],
        ["v3/Arrived", [p3]],
      ]),
    );
    expect((await corq.subscription("rooms")).skipped).toBe(1);
    expect((await corq.subscription("tenants")).skipped).toBe(2);
    expect((await corq.subscription("fn")).skipped).toBe(1);
  });

  // the SQL advance (stream / JSON-path key) and the function-key advance (read in SQL, key
  // computed in JS, compare-and-set write) each read below the xmin horizon on their own
  for (const [label, key] of [
    ["a JSON-path key", "data.roomId"],
    ["a key function", (e: StoredEvent) => String((e.data as { roomId: string }).roomId)],
  ] as const) {
    it(`does not skip an event whose transaction commits late (held open with a lower position), with ${label}`, async () => {
      const rec = recorder({ name: "rooms", key });
      const { corq, raw } = await open({ subscriptions: [rec.subscription] });
      const slow = await raw.connect();
      let late: number;
      let early: number;
      let whileOpen: Record<string, number>;
      try {
        await slow.query("BEGIN");
        const held = await corq.append("v-slow", [{ name: "Arrived", data: { roomId: "1" } }], { tx: slow });
        late = present(held.positions[0], "the held append's position");
        early = present(
          (await corq.append("v-fast", [{ name: "Arrived", data: { roomId: "1" } }])).positions[0],
          "the fast append's position",
        );
        expect(late).toBeLessThan(early);
        // the later position is committed, but the advancer must not move past the open transaction
        whileOpen = await corq.advance();
        expect(whileOpen).toEqual({ rooms: 0 });
        await slow.query("COMMIT");
      } finally {
        // a failed expectation must not leave the transaction open: dropping the database would wait for it
        await slow.query("ROLLBACK").catch(() => undefined);
        slow.release();
      }
      expect(await corq.advance()).toEqual({ rooms: 2 });
      await drain(corq, "rooms");
      expect(rec.byKey().get("1")).toEqual([late, early]);
      const figures = tally(
        new Map([["1", [late, early]]]),
        [...rec.byKey()].flatMap(([k, ps]) => ps.map((position) => ({ key: k, position }))),
      );
      reportScenario({
        scenario: "long open transaction",
        ...figures,
        doubleClaims: 0,
        notes: { advanced_while_open: present(whileOpen.rooms, "the open-transaction advance's count") },
      });
      expect(figures).toMatchObject({ lost: 0, order: 0, dup: 0 });
    });
  }

  // The advance is one statement (SQL key) or a read and a compare-and-set write (key
  // function); either way a second advancer that overlaps the first must neither enqueue the
  // same events again nor fail. The subscription row is held locked here while both start.
  // With a SQL key the advancers are coalesced: the second finds the first at work and
  // returns at once (the first re-checks the kick it left). With a key function both run: the
  // second waits to read the watermark, and its compare-and-set loses nothing.
  for (const [label, key] of [
    ["a JSON-path key", "data.k"],
    ["a key function", (e: StoredEvent) => (e.data as { k: string }).k],
  ] as const) {
    it(`an advancer that overlaps another enqueues nothing twice and does not fail, with ${label}`, async () => {
      const coalesced = typeof key === "string";
      const rec = recorder({ name: "q", key });
      const { corq, another, raw } = await open({ subscriptions: [rec.subscription] });
      const second = another({ subscriptions: [rec.subscription] });
      await corq.append("s", [{ name: "E", data: { k: "a" } }]);
      await corq.advance();
      await corq.append("s", [
        { name: "E", data: { k: "a" } },
        { name: "E", data: { k: "a" } },
      ]);
      const lockWaiters = (n: number) =>
        until(
          async () =>
            (
              await raw.query(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
              )
            ).rows[0].n >= n,
          { message: `expected ${n} statements waiting on a lock` },
        );
      const locker = await raw.connect();
      let advances: Promise<Record<string, number>>[] = [];
      try {
        await locker.query("BEGIN");
        await locker.query("SELECT 1 FROM corq.subscriptions WHERE name = 'q' FOR UPDATE");
        advances = [corq.advance()];
        await lockWaiters(1);
        advances.push(second.advance({ coalesce: true }));
        if (coalesced)
          await within(present(advances[1], "the second advance"), {
            timeoutMs: 2000,
            message: "the second advancer returns at once",
          });
        else await lockWaiters(2);
      } finally {
        await locker.query("COMMIT");
        locker.release();
      }
      expect(await Promise.all(advances)).toEqual([{ q: 2 }, { q: 0 }]);
      const { rows } = await raw.query(
        "SELECT (SELECT count(*) FROM corq.queue)::int AS queued, (SELECT sum(pending) FROM corq.keys)::int AS pending",
      );
      expect(rows[0]).toEqual({ queued: 3, pending: 3 });
      expect((await corq.subscription("q")).advanceError).toBeNull();
    });
  }

  it("keeps the queue consistent when two advancers run at once", async () => {
    const rec = recorder({ name: "rooms", key: "data.roomId", batchSize: 1000 });
    const fn = recorder({ name: "fn", key: (e) => String((e.data as { n: number }).n % 7), batchSize: 1000 });
    const subscriptions = [rec.subscription, fn.subscription];
    const { corq, another, raw } = await open({ subscriptions, advanceBatchSize: 50 });
    const second = another({ subscriptions, advanceBatchSize: 50 });
    let expected = 0;
    for (let round = 0; round < 5; round++) {
      const appends = Array.from({ length: 10 }, (_, i) =>
        corq.append(
          `s-${i}`,
          Array.from({ length: 20 }, (_, n) => ({ name: "Tick", data: { roomId: String(n % 5), n } })),
        ),
      );
      const [, ...advanced] = await Promise.all([Promise.all(appends), corq.advance(), second.advance()]);
      // an advance that failed (say, it enqueued what the other one had) leaves its subscription out
      for (const result of advanced) expect(Object.keys(result).sort()).toEqual(["fn", "rooms"]);
      expected += 200;
    }
    await corq.advance();
    const { rows } = await raw.query(
      "SELECT s.name, count(*)::int AS n, count(DISTINCT q.position)::int AS distinct_positions FROM corq.queue q JOIN corq.subscriptions s ON s.id = q.subscription_id GROUP BY s.name ORDER BY s.name",
    );
    expect(rows).toEqual([
      { name: "fn", n: expected, distinct_positions: expected },
      { name: "rooms", n: expected, distinct_positions: expected },
    ]);
    const pending = await raw.query("SELECT sum(pending)::int AS p FROM corq.keys GROUP BY subscription_id");
    expect(pending.rows.map((r) => r.p)).toEqual([expected, expected]);
    const queued = rows.reduce((sum, r) => sum + r.n, 0);
    const distinct = rows.reduce((sum, r) => sum + r.distinct_positions, 0);
    // nothing is consumed here: order and double claims do not apply; a double enqueue is a dup
    reportScenario({
      scenario: "two advancers at once",
      events: 2 * expected,
      lost: 2 * expected - distinct,
      order: 0,
      doubleClaims: 0,
      dup: queued - distinct,
    });
  });
});
