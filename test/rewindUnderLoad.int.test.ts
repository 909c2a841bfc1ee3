// Rewinds (of the whole subscription and of single keys, to random positions, in chunks of 16
// events) while producers append and several consumers drain. Per key, by seq (what a receiver deduplicates by):
//   order   seqs are first delivered in increasing order; a step back in the log happens only
//           at a replayed event (a rewind); between steps back the events are consecutive — a
//           replay ends exactly where the events after it begin (nothing skipped, nothing
//           interleaved);
//   lost    every appended event is delivered at least once;
//   double_claims  no key is handled by two consumers at once.
// Prints: rewind: keys=<n> events=<n> order=0 lost=0
import { describe, expect, it } from "vitest";
import type { Corq, DeliveredEvent, HandlerContext, SubscriptionDefinition } from "../src/index.js";
import { sleep, useCorq } from "./helpers/corq.js";
import { reportScenario, seededRandom } from "./helpers/chaos.js";
import { until } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const scale = Number(process.env.CORQ_CHAOS_SCALE ?? 1);
const KEYS = 12;
const VERSIONS = 60 * scale; // events per key
const CONSUMERS = 4;
const REWINDS = 20;

interface Delivery {
  version: number;
  seq: number;
  replay: boolean;
}

/** Checks one key's deliveries (in handling order) against its `versions` appended events. */
function checkKey(deliveries: Delivery[], versions: number) {
  let order = 0;
  const firsts: Delivery[] = [];
  let maxSeq = 0;
  for (const d of deliveries) {
    if (d.seq <= maxSeq) {
      // a redelivery (same seq again) is at-least-once; an older seq first seen now is disorder
      if (!firsts.some((f) => f.seq === d.seq)) order++;
      continue;
    }
    maxSeq = d.seq;
    firsts.push(d);
  }
  for (const [i, first] of firsts.entries()) {
    const before = firsts[i - 1]; // none before the first
    const expected = before === undefined ? 0 : before.version + 1;
    if (first.version === expected) continue;
    // only a replay may go back, and never forward past an event
    if (!(first.replay && first.version < expected)) order++;
  }
  const delivered = new Set(deliveries.map((d) => d.version));
  let lost = 0;
  for (let v = 0; v < versions; v++) if (!delivered.has(v)) lost++;
  return { order, lost };
}

describe("rewind under load", () => {
  it("checks itself: a skipped event, a step back without replay and an old seq count", () => {
    const d = (version: number, seq: number, replay = false) => ({ version, seq, replay });
    expect(checkKey([d(0, 1), d(1, 2), d(2, 3), d(0, 4, true), d(1, 5, true), d(2, 6, true), d(3, 7)], 4)).toEqual({
      order: 0,
      lost: 0,
    });
    expect(checkKey([d(0, 1), d(2, 3)], 3)).toEqual({ order: 1, lost: 1 }); // 1 skipped
    expect(checkKey([d(0, 1), d(1, 2), d(0, 3)], 2)).toEqual({ order: 1, lost: 0 }); // back, not a replay
    expect(checkKey([d(0, 1), d(1, 3), d(1, 2)], 2)).toEqual({ order: 1, lost: 0 }); // seq 2 after 3
    expect(checkKey([d(0, 1), d(1, 2), d(1, 2)], 2)).toEqual({ order: 0, lost: 0 }); // a redelivery
    // a replay that ends before the events queued after it: 0 1 2 | 0 1 | 3 skips 2
    expect(checkKey([d(0, 1), d(1, 2), d(2, 3), d(0, 4, true), d(1, 5, true), d(3, 6)], 4).order).toBe(1);
  });

  it("rewinds while producers append and consumers drain: nothing lost, per-key order kept, one holder", async () => {
    const deliveries = new Map<string, Delivery[]>();
    const running = new Set<string>();
    let doubleClaims = 0;
    const rand = seededRandom(20261130);
    const subscription: SubscriptionDefinition = {
      name: "s",
      batchSize: 4,
      leaseMs: 30_000,
      handle: async (events: DeliveredEvent[], ctx: HandlerContext) => {
        if (running.has(ctx.key)) doubleClaims++;
        running.add(ctx.key);
        try {
          const list = deliveries.get(ctx.key) ?? [];
          deliveries.set(ctx.key, list);
          for (const e of events) list.push({ version: e.version, seq: e.seq, replay: e.replay });
          if (events.length > 2) await sleep(1); // some batches stay in flight across a rewind
        } finally {
          running.delete(ctx.key);
        }
      },
    };
    const { corq, another } = await open({ subscriptions: [subscription] });
    const consumers: Corq[] = Array.from({ length: CONSUMERS }, () => another({ subscriptions: [subscription] }));
    const producer = another({ subscriptions: [subscription] });
    // rewinds in chunks of 16 events (the advance's batch size): staged and requeued in many
    // statements, each committed, while advances, appends and claims run between them
    const rewinder = another({ subscriptions: [subscription], advanceBatchSize: 16 });

    const positions: number[] = [];
    let producing = true;
    const produce = async (k: number) => {
      for (let v = 0; v < VERSIONS; ) {
        const n = Math.min(VERSIONS - v, 1 + (v % 3));
        const events = Array.from({ length: n }, () => ({ name: "E", data: { k } }));
        const appended = await producer.append(`k${k}`, events);
        positions.push(...appended.positions);
        v += n;
      }
    };
    const advance = async () => {
      while (producing) {
        await corq.advance();
        await sleep(3);
      }
    };
    let consuming = true;
    const consume = async (c: Corq) => {
      while (consuming) if ((await c.drain("s", { budgetMs: 200 })).batches === 0) await sleep(3);
    };
    const rewinds: { to: number | "beginning"; key?: string; requeued: number }[] = [];
    const rewind = async () => {
      for (let i = 0; i < REWINDS; i++) {
        await sleep(5 + rand() * 20);
        const to =
          positions.length === 0 || rand() < 0.2
            ? "beginning"
            : present(positions[Math.floor(rand() * positions.length)], "a position to rewind to");
        const key = rand() < 0.5 ? `k${Math.floor(rand() * KEYS)}` : undefined;
        const { requeued } = await rewinder.rewind("s", { to, key });
        rewinds.push({ to, key, requeued });
      }
    };

    const consumersDone = Promise.all(consumers.map(consume));
    // rewinds start once some events are consumed, and go on while producers append
    const producers = Promise.all(Array.from({ length: KEYS }, (_, k) => produce(k)));
    const advancing = advance();
    await until(() => [...deliveries.values()].some((list) => list.length > 0), { message: "nothing was consumed" });
    await Promise.all([producers, rewind()]).finally(() => {
      producing = false;
    });
    await advancing;
    await corq.advance();
    await until(async () => (await corq.subscription("s")).pending === 0, {
      timeoutMs: 60_000,
      message: "the consumers never emptied the queue",
    });
    consuming = false;
    await consumersDone;

    let order = 0;
    let lost = 0;
    for (let k = 0; k < KEYS; k++) {
      const result = checkKey(deliveries.get(`k${k}`) ?? [], VERSIONS);
      order += result.order;
      lost += result.lost;
    }
    const events = KEYS * VERSIONS;
    const requeued = rewinds.reduce((sum, r) => sum + r.requeued, 0);
    console.log(`rewind: keys=${KEYS} events=${events} order=${order} lost=${lost}`);
    console.log(
      `  (${rewinds.length} rewinds, ${rewinds.filter((r) => r.key).length} of one key, ${requeued} events requeued; double_claims=${doubleClaims})`,
    );
    reportScenario({
      scenario: "rewind under load",
      events,
      lost,
      order,
      doubleClaims,
      // redeliveries of a seq already delivered (replays have seqs of their own: not counted)
      dup: [...deliveries.values()].reduce((sum, list) => sum + list.length - new Set(list.map((d) => d.seq)).size, 0),
      notes: { rewinds: rewinds.length, requeued },
    });
    expect(requeued, "the rewinds requeued nothing: the test would prove nothing").toBeGreaterThan(events / 2);
    expect({ order, lost, doubleClaims }).toEqual({ order: 0, lost: 0, doubleClaims: 0 });
  }, 120_000);
});
