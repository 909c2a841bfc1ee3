// Pins the round-trip budget (docs/architecture.md, "Round trips are the cost model"): on Workers every
// statement is a network round trip to Neon, so these counts must not silently grow.
import { describe, expect, it } from "vitest";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();

function counter() {
  const statements: string[] = [];
  return {
    statements,
    onStatement: (text: string) => void statements.push(text),
    take() {
      return statements.splice(0).length;
    },
  };
}

describe("round trips per operation", () => {
  it("append = 1, advance = 1 + 1 per subscription (stream or JSON path) + 1 re-check, claim+fetch = 1, ack = 1, fail = 1", async () => {
    const count = counter();
    let fail = false;
    const { corq } = await open({
      onStatement: count.onStatement,
      subscriptions: [
        {
          name: "by-stream",
          handle: () => {
            if (fail) throw new Error("x");
          },
        },
        { name: "by-room", key: "data.roomId", handle: () => undefined },
      ],
    });
    count.take();
    await corq.append(
      "v1",
      Array.from({ length: 100 }, () => ({ name: "Arrived", data: { roomId: "1" } })),
    );
    expect(count.take()).toBe(1);
    await corq.advance();
    expect(count.take()).toBe(4); // sync+list+kick, one per subscription, the re-check for kicks that came meanwhile
    expect(await corq.consume("by-stream")).toMatchObject({ events: 100, outcome: "acked" });
    expect(count.take()).toBe(2); // claim+fetch, ack
    await corq.append("v1", [{ name: "Arrived", data: { roomId: "1" } }]);
    await corq.advance();
    count.take();
    fail = true;
    expect(await corq.consume("by-stream")).toMatchObject({ outcome: "retry" });
    expect(count.take()).toBe(2); // claim+fetch, fail
    expect(await corq.consume("by-stream")).toBeNull();
    expect(count.take()).toBe(1); // nothing ready: one statement
  });

  it("drain with keysPerClaim 1 acks each batch in the statement that claims the next: one statement per batch (+1 to record them)", async () => {
    const count = counter();
    const { corq } = await open({
      onStatement: count.onStatement,
      subscriptions: [{ name: "d", handle: () => undefined }],
    });
    for (let i = 0; i < 5; i++)
      await corq.append(`s${i}`, [
        { name: "E", data: {} },
        { name: "E", data: {} },
      ]);
    await corq.advance();
    count.take();
    expect(await corq.drain("d", { keysPerClaim: 1 })).toMatchObject({ batches: 5, events: 10 });
    expect(count.take()).toBe(7); // claim, then 5 × ack+claim (the last finds nothing), then the 5 batches recorded at once
    expect(await corq.subscription("d")).toMatchObject({ pending: 0, keys: { ready: 0, leased: 0 } });
    const recorded = await corq.activity({ subscription: "d" });
    expect(recorded.map((b) => b.events)).toEqual([2, 2, 2, 2, 2]);
    for (const b of recorded) expect(Date.parse(b.finishedAt)).toBeGreaterThanOrEqual(Date.parse(b.startedAt));
  });

  it("drain claims up to keysPerClaim keys per statement and settles them (acks and failures) in the statement that claims the next", async () => {
    const count = counter();
    const { corq } = await open({
      onStatement: count.onStatement,
      subscriptions: [
        {
          name: "m",
          maxAttempts: 1,
          handle: (events) => {
            if (events.some((e) => (e.data as { poison?: boolean }).poison)) throw new Error("poison");
          },
        },
      ],
    });
    for (let i = 0; i < 20; i++)
      await corq.append(`s${i}`, [
        { name: "E", data: { poison: i === 7 } },
        { name: "E", data: {} },
      ]);
    await corq.advance();
    count.take();
    expect(await corq.drain("m", { keysPerClaim: 8 })).toMatchObject({ batches: 20, events: 40 });
    // claim 8, settle 8 + claim 8, settle 8 + claim 4 (fewer than asked: none left), settle 4 + claim
    // nothing, then the 19 acked batches recorded at once (the failure was recorded by its settle)
    expect(count.take()).toBe(5);
    expect(await corq.subscription("m")).toMatchObject({ pending: 2, keys: { ready: 0, leased: 0, dead: 1 } });
    const recorded = await corq.activity({ subscription: "m" });
    expect(recorded.filter((b) => b.outcome === "acked").map((b) => b.events)).toEqual(new Array(19).fill(2));
    expect(recorded.filter((b) => b.outcome !== "acked")).toMatchObject([{ key: "s7", outcome: "dead", events: 2 }]);
  });

  it("drain goes on with a key that still has events after its batch (one hot key): two statements per batch", async () => {
    const count = counter();
    const sizes: number[] = [];
    const { corq } = await open({
      onStatement: count.onStatement,
      subscriptions: [{ name: "hot", batchSize: 4, handle: (events) => void sizes.push(events.length) }],
    });
    await corq.append(
      "k",
      Array.from({ length: 12 }, () => ({ name: "E", data: {} })),
    );
    await corq.advance();
    count.take();
    expect(await corq.drain("hot", { budgetMs: 10_000 })).toMatchObject({ batches: 3, events: 12 });
    expect(sizes).toEqual([4, 4, 4]);
    // claim, then per batch ack+claim (it cannot claim the key it acked) + claim, the last
    // ack+claim finds the key empty; the 3 batches recorded at once
    expect(count.take()).toBe(1 + 2 + 2 + 1 + 1);
    expect(await corq.subscription("hot")).toMatchObject({ pending: 0 });
  });

  it("a function key costs one read and one write per round", async () => {
    const count = counter();
    const { corq } = await open({
      onStatement: count.onStatement,
      subscriptions: [{ name: "fn", key: (e) => e.stream, handle: () => undefined }],
    });
    await corq.append("v1", [{ name: "Arrived", data: {} }]);
    count.take();
    expect(await corq.advance()).toEqual({ fn: 1 });
    expect(count.take()).toBe(3); // sync+list+kick, read, write (a function key is not coalesced: no re-check)
  });
});
