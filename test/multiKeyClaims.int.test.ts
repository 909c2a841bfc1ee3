// A drain that claims several keys per statement (keysPerClaim): each key its own lease and
// batch, the handlers at once, the outcomes settled together — and still per key: one key's
// failure, lost lease or slowness never touches another key's outcome.
import { describe, expect, it } from "vitest";
import type { StoredEvent } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";
import { until, within } from "./helpers/until.js";

const open = useCorq();

/** Handlers that wait, per key, until the test opens their gate. */
function gates() {
  const waiting = new Map<string, () => void>();
  const started: string[] = [];
  return {
    started,
    async hold(key: string) {
      started.push(key);
      await new Promise<void>((resolve) => waiting.set(key, resolve));
    },
    open(key: string) {
      waiting.get(key)?.();
      waiting.delete(key);
    },
  };
}

describe("a claim of several keys", () => {
  it("gives each key its own lease token and batch, and runs their handlers at once", async () => {
    const gate = gates();
    const { corq, raw } = await open({
      subscriptions: [{ name: "s", batchSize: 2, handle: (_e, ctx) => gate.hold(ctx.key) }],
    });
    for (const stream of ["a", "b", "c", "d", "e"])
      await corq.append(
        stream,
        Array.from({ length: 3 }, () => ({ name: "E", data: {} })),
      );
    await corq.advance();
    const draining = corq.drain("s", { keysPerClaim: 4, maxBatches: 4 });
    await until(() => gate.started.length === 4, { message: "four handlers never ran at once" });
    expect(gate.started.sort()).toEqual(["a", "b", "c", "d"]); // oldest first (ties by key)
    const { rows } = await raw.query(
      "SELECT key, lease_token FROM corq.keys WHERE lease_token IS NOT NULL ORDER BY key",
    );
    expect(rows.map((r) => r.key)).toEqual(["a", "b", "c", "d"]);
    expect(new Set(rows.map((r) => r.lease_token)).size).toBe(4);
    for (const key of ["a", "b", "c", "d"]) gate.open(key);
    expect(await draining).toMatchObject({ batches: 4, events: 8 });
    const keys = await corq.keys("s");
    expect(keys.map((k) => [k.key, k.pending])).toEqual([
      ["a", 1],
      ["b", 1],
      ["c", 1],
      ["d", 1],
      ["e", 3],
    ]);
    // each ack removed its own key's rows only
    const { rows: queued } = await raw.query(
      "SELECT key, count(*)::int AS n FROM corq.queue GROUP BY key ORDER BY key",
    );
    expect(queued.map((r) => [r.key, r.n])).toEqual([
      ["a", 1],
      ["b", 1],
      ["c", 1],
      ["d", 1],
      ["e", 3],
    ]);
  });

  it("a failing key dies alone: the keys claimed with it are acked", async () => {
    const handled: string[] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          maxAttempts: 2,
          backoff: { initialMs: 0, maxMs: 0, factor: 1 },
          handle: (events: StoredEvent[], ctx) => {
            if (ctx.key === "poison") throw new Error("poison");
            for (const e of events) handled.push(`${ctx.key}:${e.version}`);
          },
        },
      ],
    });
    for (const stream of ["a", "b", "poison", "c"])
      await corq.append(stream, [
        { name: "E", data: {} },
        { name: "E", data: {} },
      ]);
    await corq.advance();
    await corq.drain("s", { keysPerClaim: 4 });
    expect(handled.sort()).toEqual(["a:0", "a:1", "b:0", "b:1", "c:0", "c:1"]);
    const dead = await corq.deadLetters({ subscription: "s" });
    expect(dead.map((d) => [d.key, d.attempts])).toEqual([["poison", 2]]);
    expect(await corq.subscription("s")).toMatchObject({ pending: 2, keys: { dead: 1, ready: 0, leased: 0 } });
    const outcomes = (await corq.activity({ subscription: "s" })).map((b) => `${b.key}:${b.outcome}`).sort();
    expect(outcomes).toEqual(["a:acked", "b:acked", "c:acked", "poison:dead", "poison:failed"]);
  });

  it("one key's lost lease never touches another key's ack: the stale key is refused, the other acked", async () => {
    const gate = gates(); // the drain's handlers
    const rivalGate = gates(); // the rival's
    const definition = (held: ReturnType<typeof gates>) => ({
      name: "s",
      handle: (_events: StoredEvent[], ctx: { key: string }) => held.hold(ctx.key),
    });
    const { corq, raw, another } = await open({ subscriptions: [definition(gate)] });
    for (const stream of ["a", "b"]) await corq.append(stream, [{ name: "E", data: {} }]);
    await corq.advance();
    const draining = corq.drain("s", { keysPerClaim: 2, maxBatches: 2 });
    await until(() => gate.started.length === 2, { message: "both keys never ran at once" });
    // a's lease runs out; another consumer takes it over and is still at work on it when the
    // drain settles both keys: a's settlement carries a stale token under a live lease
    await raw.query("UPDATE corq.keys SET lease_until = now(), available_at = now() WHERE key = 'a'");
    const rival = another({ subscriptions: [definition(rivalGate)], poolSize: 1 });
    const rivalConsume = rival.consume("s");
    await until(() => rivalGate.started.length === 1, { message: "the rival never took a over" });
    gate.open("a");
    gate.open("b");
    await within(draining, { message: "the drain never settled" });
    const leases = await raw.query(
      "SELECT key, pending, lease_token IS NOT NULL AS leased FROM corq.keys ORDER BY key",
    );
    expect(leases.rows).toEqual([
      { key: "a", pending: 1, leased: true }, // still the rival's
      { key: "b", pending: 0, leased: false },
    ]);
    rivalGate.open("a");
    expect(await rivalConsume).toMatchObject({ key: "a", outcome: "acked" });
    const { rows } = await raw.query("SELECT key, pending, acked::int, attempts FROM corq.keys ORDER BY key");
    expect(rows).toEqual([
      { key: "a", pending: 0, acked: 1, attempts: 0 },
      { key: "b", pending: 0, acked: 1, attempts: 0 },
    ]);
  });

  it("an expired lease nobody took over is refused for its key only", async () => {
    const gate = gates();
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: (_e, ctx) => gate.hold(ctx.key) }] });
    for (const stream of ["a", "b", "c"]) await corq.append(stream, [{ name: "E", data: {} }]);
    await corq.advance();
    const draining = corq.drain("s", { keysPerClaim: 3, maxBatches: 3 });
    await until(() => gate.started.length === 3, { message: "three keys never ran at once" });
    await raw.query("UPDATE corq.keys SET lease_until = now() WHERE key = 'b'");
    for (const key of ["a", "b", "c"]) gate.open(key);
    expect(await draining).toMatchObject({ batches: 3 });
    const { rows } = await raw.query("SELECT key, pending FROM corq.keys ORDER BY key");
    expect(rows).toEqual([
      { key: "a", pending: 0 },
      { key: "b", pending: 1 },
      { key: "c", pending: 0 },
    ]);
  });

  it("a slow key does not hold back the acks of the keys that finish beside it", async () => {
    const gate = gates();
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 1,
          handle: async (_e, ctx) => {
            if (ctx.key === "slow") await gate.hold(ctx.key);
          },
        },
      ],
    });
    await corq.append("slow", [{ name: "E", data: {} }]);
    await corq.advance(); // "slow" has waited longest: claimed first
    for (const stream of ["a", "b", "c"])
      await corq.append(
        stream,
        Array.from({ length: 5 }, () => ({ name: "E", data: {} })),
      );
    await corq.advance();
    const draining = corq.drain("s", { keysPerClaim: 4 });
    // while "slow" still runs, the others are acked batch after batch, to the end
    await until(
      async () => {
        const { rows } = await raw.query("SELECT sum(acked)::int AS acked FROM corq.keys WHERE key <> 'slow'");
        return rows[0].acked === 15;
      },
      { message: "the fast keys were not acked while the slow one ran" },
    );
    const { rows } = await raw.query(
      "SELECT acked::int, lease_token IS NOT NULL AS leased FROM corq.keys WHERE key = 'slow'",
    );
    expect(rows).toEqual([{ acked: 0, leased: true }]);
    gate.open("slow");
    expect(await draining).toMatchObject({ batches: 16, events: 16 });
  });

  it("keeps per-key order and never runs a key twice at once, 4 drains × 8 keys per claim over 60 keys", async () => {
    const running = new Set<string>();
    let overlaps = 0;
    const last = new Map<string, number>();
    let outOfOrder = 0;
    let handled = 0;
    const definition = {
      name: "s",
      key: "data.k",
      batchSize: 3,
      handle: async (events: StoredEvent[], ctx: { key: string }) => {
        if (running.has(ctx.key)) overlaps++;
        running.add(ctx.key);
        for (const e of events) {
          const n = (e.data as { n: number }).n;
          if (n <= (last.get(ctx.key) ?? -1)) outOfOrder++;
          last.set(ctx.key, n);
          handled++;
        }
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
        running.delete(ctx.key);
      },
    };
    const { corq, another } = await open({ subscriptions: [definition] });
    const consumers = [0, 1, 2, 3].map(() => another({ subscriptions: [definition], poolSize: 1 }));
    const total = 60 * 7;
    let appended = 0;
    const appending = (async () => {
      for (let round = 0; round < 7; round++) {
        await corq.append(
          `r${round}`,
          Array.from({ length: 60 }, (_, k) => ({ name: "E", data: { k: `k${k}`, n: round } })),
        );
        appended += 60;
        await corq.advance();
      }
    })();
    await within(
      Promise.all([
        appending,
        ...consumers.map(async (c) => {
          while (handled < total) if ((await c.drain("s", { keysPerClaim: 8 })).batches === 0) await corq.advance();
        }),
      ]),
      { timeoutMs: 25_000, message: "the drains never handled every event" },
    );
    expect({ overlaps, outOfOrder, handled, appended }).toEqual({
      overlaps: 0,
      outOfOrder: 0,
      handled: total,
      appended: total,
    });
  });
});
