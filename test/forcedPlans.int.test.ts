// Order must come from ORDER BY, never from the plan the planner happens to pick. The usual
// plans walk a primary key, so a statement that forgot its ORDER BY still passes every other
// test. Here a consumer's connection has index scans turned off (a sequential scan returns
// rows in heap order), and the queue is churned until its heap order differs from log order.
import { describe, expect, it } from "vitest";
import pg from "pg";
import { createCorq, type StoredEvent, type SubscriptionDefinition } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";
import { within } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const arrived = (round: number) => ({ name: "Arrived", data: { room: "a", round } });

/** A pool whose sessions cannot use an index: every table is read by a sequential scan. */
function sequentialScansOnly(url: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: 1,
    options: "-c enable_indexscan=off -c enable_indexonlyscan=off -c enable_bitmapscan=off",
  });
  pool.on("error", () => undefined); // the test database is dropped WITH (FORCE) afterwards
  return pool;
}

describe("with index scans off", () => {
  it("a claim hands out the key's oldest events, in log order, whatever the queue's heap order", async () => {
    const handled: number[] = [];
    const rooms: SubscriptionDefinition = {
      name: "rooms",
      events: ["Arrived"],
      key: "data.room",
      batchSize: 5,
      handle: (events: StoredEvent[]) => void handled.push(...events.map((e) => e.position)),
    };
    const filler: SubscriptionDefinition = {
      name: "filler",
      events: ["Filler"],
      batchSize: 1000,
      handle: () => undefined,
    };
    const { corq, raw, url, another } = await open({ subscriptions: [rooms, filler] });

    // churn: each round queues one event of key "a" and 20 filler rows behind it, so a's rows
    // are spread over the heap with filler between them; the filler is consumed (deleted) and
    // VACUUM frees its space; a's later events then fill the holes before a's earlier ones
    const expected: number[] = [];
    // first, two events of "a" whose log order (tx, position) is not position order: an outbox
    // transaction takes its id, another client appends and commits, then the outbox appends
    const outbox = await raw.connect();
    try {
      await outbox.query("BEGIN");
      await outbox.query("SELECT pg_current_xact_id()");
      const second = await corq.append("other", [arrived(-1)]);
      const first = await corq.append("outbox", [arrived(-2)], { tx: outbox });
      await outbox.query("COMMIT");
      const outboxPosition = present(first.positions[0], "the outbox append's position");
      const otherPosition = present(second.positions[0], "the other append's position");
      expect(outboxPosition).toBeGreaterThan(otherPosition);
      expected.push(outboxPosition, otherPosition);
    } finally {
      await outbox.query("ROLLBACK").catch(() => undefined);
      outbox.release();
    }
    for (let round = 0; round < 40; round++) {
      const fill = Array.from({ length: 20 }, (_, i) => ({ name: "Filler", data: { i } }));
      const { positions } = await corq.append("a", [arrived(round), ...fill]);
      expected.push(present(positions[0], "the round's arrival position"));
      await corq.advance();
    }
    expect((await corq.drain("filler")).events).toBe(800);
    await raw.query("VACUUM corq.queue");
    const later = another({ subscriptions: [rooms, filler] }); // a fresh connection: no cached insert target
    for (let round = 0; round < 40; round++) {
      const { positions } = await later.append("a", [arrived(40 + round)]);
      expected.push(present(positions[0], "the round's arrival position"));
    }
    await later.advance();
    const { rows } = await raw.query("SELECT position FROM corq.queue ORDER BY ctid");
    const heapOrder = rows.map((r) => Number(r.position));
    expect(heapOrder.slice(0, 7), "the churn did not put later events before earlier ones in the heap").not.toEqual(
      expected.slice(0, 7),
    );

    const pool = sequentialScansOnly(url);
    const consumer = createCorq({ db: pool, subscriptions: [rooms, filler] });
    try {
      const { rows: plan } = await pool.query("SHOW enable_indexscan");
      expect(plan[0].enable_indexscan).toBe("off");
      expect(await consumer.consume("rooms")).toMatchObject({ key: "a", events: 5, outcome: "acked" });
      expect(handled, "the first batch is not the key's five oldest events, in log order").toEqual(
        expected.slice(0, 5),
      );
      const consumeAll = async () => {
        let batches = 0;
        while (batches < 100 && (await consumer.consume("rooms")) !== null) batches++;
        return batches;
      };
      // a batch that skipped events acks past them: the key's pending count then never reaches
      // zero and the consumer keeps claiming an empty batch
      expect(await within(consumeAll(), { timeoutMs: 10_000, message: "the consumer never ran out of batches" })).toBe(
        16,
      );
    } finally {
      await consumer.close();
      await pool.end();
    }
    expect(handled).toEqual(expected);
  });
});
