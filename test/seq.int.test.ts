// seq: each queued event of a (subscription, key) gets the next number of that key's counter,
// 1, 2, 3 … in log order, never reused (a skipped dead letter leaves a gap); handlers get it
// with the subscription's incarnation, which a delete and re-create changes.
import { describe, expect, it } from "vitest";
import type { DeliveredEvent, HandlerContext } from "../src/index.js";
import { drain, useCorq } from "./helpers/corq.js";

const open = useCorq();
const event = (n: number) => ({ name: "E", data: { n } });

describe("seq", () => {
  it("numbers each key's events 1, 2, 3 … in log order, across advances and interleaved keys", async () => {
    const seen: { key: string; seq: number; n: number; replay: boolean }[] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 2,
          handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
            void seen.push(
              ...events.map((e) => ({ key: ctx.key, seq: e.seq, n: (e.data as { n: number }).n, replay: e.replay })),
            ),
        },
      ],
    });
    await corq.append("a", [event(1), event(2)]);
    await corq.append("b", [event(1)]);
    await corq.append("a", [event(3)]);
    await corq.advance();
    await corq.append("b", [event(2), event(3)]);
    await corq.append("a", [event(4)]);
    await drain(corq, "s");
    const of = (key: string) => seen.filter((s) => s.key === key);
    expect(of("a").map((s) => [s.n, s.seq])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
      [4, 4],
    ]);
    expect(of("b").map((s) => [s.n, s.seq])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect(seen.every((s) => s.replay === false)).toBe(true);
    expect(await corq.key("s", "a")).toMatchObject({ seq: 4, pending: 0 });
  });

  it("never reuses a seq: a skipped dead letter leaves a gap, a redelivery keeps its seq", async () => {
    const deliveries: [number, number, number][] = []; // [n, seq, attempt]
    let failOn = 2;
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          maxAttempts: 2,
          backoff: { initialMs: 1, maxMs: 1, factor: 1 },
          handle: (events: DeliveredEvent[], ctx: HandlerContext) => {
            for (const e of events) {
              const n = (e.data as { n: number }).n;
              deliveries.push([n, e.seq, ctx.attempt]);
              if (n === failOn) throw new Error("no");
            }
          },
        },
      ],
    });
    await corq.append("a", [event(1)]);
    await drain(corq, "s");
    await corq.append("a", [event(2), event(3)]);
    await corq.advance();
    for (let i = 0; i < 5 && (await corq.key("s", "a")).status !== "dead"; i++) {
      await corq.consume("s");
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await corq.key("s", "a")).toMatchObject({ status: "dead" });
    // the failed event came twice with the same seq
    expect(deliveries.filter(([n]) => n === 2).map(([, seq]) => seq)).toEqual([2, 2]);
    expect(await corq.releaseDeadLetters({ subscription: "s", key: "a", mode: "skip" })).toEqual({ released: 1 });
    failOn = 0;
    await corq.append("a", [event(4)]);
    await drain(corq, "s");
    const firsts = new Map<number, number>();
    for (const [n, seq] of deliveries) if (!firsts.has(n)) firsts.set(n, seq);
    // 2 was skipped: 3 and 4 keep the numbers they were queued with, seq 2 is never given again
    expect([...firsts]).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
      [4, 4],
    ]);
    expect(deliveries.filter(([n]) => n === 3)).toHaveLength(1);
  });

  it("gives handlers the subscription's incarnation, which a delete and re-create changes", async () => {
    const incarnations: string[] = [];
    const seqs: number[] = [];
    const definition = {
      name: "s",
      handle: (events: DeliveredEvent[], ctx: HandlerContext) => {
        incarnations.push(ctx.incarnation);
        seqs.push(...events.map((e) => e.seq));
      },
    };
    const { corq, another } = await open({ subscriptions: [definition] });
    await corq.append("a", [event(1), event(2)]);
    await drain(corq, "s");
    const first = (await corq.subscription("s")).incarnation;
    expect(first).toMatch(/^[0-9a-f-]{36}$/);
    // the code goes away (another instance without it deletes the orphan), then comes back
    await another({}).deleteSubscription("s");
    const again = another({ subscriptions: [definition] });
    await again.migrate();
    await drain(again, "s");
    const second = (await again.subscription("s")).incarnation;
    expect(second).not.toBe(first);
    expect(seqs).toEqual([1, 2, 1, 2]); // the new incarnation numbers from 1 again
    expect(incarnations).toEqual([first, second]);
  });
});
