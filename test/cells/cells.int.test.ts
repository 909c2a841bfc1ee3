// Cells (issue "Past one Postgres"): routing by tenant, a move's copy (versions, tombstones,
// idempotency keys, seqs), resuming and rolling back, and a stale router refused — on three
// separate clusters (test/helpers/cells.ts).
import { describe, expect, it } from "vitest";
import pg from "pg";
import { createCells, createCorq, type Cells, type DeliveredEvent } from "../../src/index.js";
import { slotOf } from "../../src/cells/slots.js";
import type { CorqRuntime } from "../../src/internal.js";
import { useThreeCells } from "../helpers/cells.js";

const three = useThreeCells();

const delivered: { subscription: string; key: string; stream: string; version: number; seq: number }[] = [];
const record = (subscription: string) => async (events: DeliveredEvent[], ctx: { key: string }) => {
  for (const event of events)
    delivered.push({ subscription, key: ctx.key, stream: event.stream, version: event.version, seq: event.seq });
};
const subscriptions = [
  { name: "byStream", key: "stream", handle: record("byStream") },
  { name: "byOrder", key: "data.order", handle: record("byOrder") },
];

async function drainAll(cells: Cells) {
  for (let round = 0; round < 50; round++) {
    await cells.advance();
    const done = await Promise.all(subscriptions.map((s) => cells.drain(s.name)));
    if (done.every((result) => result.batches === 0)) return;
  }
  throw new Error("cells never drained");
}

describe("cells", () => {
  it("routes each tenant's streams to its slot's cell and reads them back there", async () => {
    const cells = createCells({ cells: await three.databases(), subscriptions });
    try {
      await cells.migrate();
      const { cells: counts } = await cells.directory();
      // three empty cells: the slots are spread
      expect(counts.map((c) => c.slots)).toEqual([342, 341, 341]);
      const tenants = Array.from({ length: 12 }, (_, i) => `t${i}`);
      for (const tenant of tenants)
        await cells.append(`${tenant}:a`, [{ name: "Made", data: { order: `${tenant}-1` } }]);
      for (const tenant of tenants) {
        const place = await cells.place(`${tenant}:a`);
        expect(place.slot).toBe(slotOf(tenant, 1024));
        // the event is in that cell's log and in no other
        for (const name of cells.names) {
          const events = await cells.cell(name).readStream(`${tenant}:a`);
          expect(events.length).toBe(name === place.cell ? 1 : 0);
        }
        expect((await cells.readStream(`${tenant}:a`)).map((e) => e.name)).toEqual(["Made"]);
      }
      expect(new Set(await Promise.all(tenants.map(async (t) => (await cells.place(`${t}:a`)).cell))).size).toBe(3);
      // the fence: a write for another epoch than the cell's, or a slot the cell does not hold, writes nothing
      const place = await cells.place("t0:a");
      const holder = cells.cell(place.cell) as unknown as CorqRuntime;
      const other = cells.cell(cells.names.find((n) => n !== place.cell) ?? "") as unknown as CorqRuntime;
      const event = [{ name: "Made", data: { order: "t0-2" } }];
      for (const [corq, epoch] of [
        [holder, place.epoch + 1],
        [holder, place.epoch - 1],
        [other, place.epoch],
      ] as const)
        await expect(corq.append("t0:a", event, { fence: { slot: place.slot, epoch } })).rejects.toMatchObject({
          code: "wrong_cell",
        });
      expect(await cells.readStream("t0:a")).toHaveLength(1);
      const log = await cells.readLog();
      expect(log.events.length).toBe(12);
      expect(Object.keys(log.next).sort()).toEqual(["one", "three", "two"]);
    } finally {
      await cells.close();
    }
  });

  it("moves a tenant with its versions, tombstones, idempotency keys and seqs; nothing is delivered twice", async () => {
    delivered.length = 0;
    const urls = await three.databases();
    const cells = createCells({ cells: urls, subscriptions });
    // a router that read the directory before the move (another process)
    const stale = createCells({ cells: urls, subscriptions });
    const staleReader = createCells({ cells: urls, subscriptions });
    try {
      await cells.migrate();
      const before = await cells.place("acme:order-1");
      await stale.place("acme:order-1");
      await staleReader.place("acme:order-1");
      const first = await cells.append("acme:order-1", [{ name: "Placed", data: { order: "o1" } }], {
        idempotencyKey: "k-1",
      });
      await cells.append("acme:order-1", [{ name: "Paid", data: { order: "o1" } }]);
      await cells.append("acme:gone", [{ name: "Secret", data: { order: "o2" } }]);
      await drainAll(cells);
      await cells.eraseStream("acme:gone");
      const seqsBefore = delivered.filter((d) => d.subscription === "byOrder" && d.key === "o1").map((d) => d.seq);
      expect(seqsBefore).toEqual([1, 2]);

      const to = cells.names.find((name) => name !== before.cell)!;
      const report = await cells.move({ tenant: "acme" }, { to });
      expect(report).toMatchObject({ slot: before.slot, from: before.cell, to, done: true, copied: 2 });
      expect(await cells.place("acme:order-1")).toMatchObject({ cell: to, epoch: before.epoch + 1 });
      expect((await cells.directory()).moves).toEqual([]);

      // the old cell keeps nothing of the slot; the new one has the stream with its versions
      expect(await cells.cell(before.cell).readStream("acme:order-1")).toEqual([]);
      expect((await cells.readStream("acme:order-1")).map((e) => [e.version, e.name])).toEqual([
        [0, "Placed"],
        [1, "Paid"],
      ]);
      // the tombstone: still erased, its version kept for expectedVersion
      const gone = await (cells.cell(to) as unknown as { streamPage(s: string): Promise<unknown> }).streamPage(
        "acme:gone",
      );
      expect(gone).toMatchObject({ erased: true, version: 0, events: [] });
      // the idempotency key answers what it answered, with the positions its events have now
      const replay = await cells.append("acme:order-1", [{ name: "Placed", data: { order: "o1" } }], {
        idempotencyKey: "k-1",
      });
      const moved = await cells.readStream("acme:order-1");
      expect(replay).toMatchObject({ replayed: true, version: first.version, positions: [moved[0]!.position] });

      // a stale reader reads the old cell, sees it no longer holds the slot, reads again where it went
      expect((await staleReader.readStream("acme:order-1")).map((e) => e.name)).toEqual(["Placed", "Paid"]);
      // the stale router's append is refused by the old cell, read again, lands in the new one
      await stale.append("acme:order-1", [{ name: "Shipped", data: { order: "o1" } }], { expectedVersion: 1 });
      await stale.append("acme:gone", [{ name: "Again", data: { order: "o2" } }], { expectedVersion: 0 });
      await drainAll(cells);
      const o1 = delivered.filter((d) => d.subscription === "byOrder" && d.key === "o1");
      expect(o1.map((d) => d.version)).toEqual([0, 1, 2]);
      // seqs go on above the old cell's: a receiver deduping by "seq <= last seen" keeps the new event
      expect(o1[2]!.seq).toBeGreaterThan(2);
      const byStream = delivered.filter((d) => d.subscription === "byStream");
      expect(byStream.map((d) => `${d.stream}@${d.version}`).sort()).toEqual(
        ["acme:gone@0", "acme:gone@1", "acme:order-1@0", "acme:order-1@1", "acme:order-1@2"].sort(),
      );
      expect(byStream.find((d) => d.stream === "acme:order-1" && d.version === 2)!.seq).toBeGreaterThan(2);
    } finally {
      await stale.close();
      await staleReader.close();
      await cells.close();
    }
  });

  it("a move waits for the slot's queued events; meanwhile its appends wait, then it resumes or rolls back", async () => {
    delivered.length = 0;
    const urls = await three.databases();
    const cells = createCells({ cells: urls, subscriptions, moveWaitMs: 200 });
    try {
      await cells.migrate();
      const place = await cells.place("zeta:1");
      const to = cells.names.find((name) => name !== place.cell)!;
      await cells.append("zeta:1", [{ name: "Made", data: { order: "z1" } }]);
      // not delivered yet: the move stops in its draining phase, fenced
      const stopped = await cells.move({ slot: place.slot }, { to, waitMs: 300 });
      expect(stopped).toMatchObject({ done: false, phase: "draining" });
      expect(stopped.waiting).toMatch(/byStream: 1 queued/);
      expect((await cells.directory()).moves).toMatchObject([
        { slot: place.slot, from: place.cell, to, phase: "draining" },
      ]);
      await expect(cells.append("zeta:1", [{ name: "Late", data: { order: "z1" } }])).rejects.toMatchObject({
        code: "slot_moving",
        status: 503,
      });
      // another tenant's appends go on
      const other = Array.from({ length: 50 }, (_, i) => `other${i}`).find((t) => slotOf(t, 1024) !== place.slot)!;
      await cells.append(`${other}:1`, [{ name: "Made", data: { order: "x" } }]);

      // rolled back: the slot's appends go on in its old cell
      expect(await cells.rollbackMove(place.slot)).toEqual({ rolledBack: true });
      await cells.append("zeta:1", [{ name: "Late", data: { order: "z1" } }]);
      expect(await cells.place("zeta:1")).toMatchObject({ cell: place.cell, epoch: place.epoch });

      // moved again, stopped again; once the events are delivered, called again it resumes and ends
      expect(await cells.move({ slot: place.slot }, { to, waitMs: 0 })).toMatchObject({ done: false });
      await drainAll(cells);
      expect(await cells.move({ slot: place.slot }, { to })).toMatchObject({ done: true, copied: 2 });
      await cells.append("zeta:1", [{ name: "After", data: { order: "z1" } }]);
      await drainAll(cells);
      const zeta = delivered.filter((d) => d.subscription === "byStream" && d.stream === "zeta:1");
      expect(zeta.map((d) => d.version)).toEqual([0, 1, 2]);
    } finally {
      await cells.close();
    }
  });

  it("a database in use becomes the first cell with every slot; named elsewhere, it is refused", async () => {
    const urls = await three.databases();
    const inUse = createCorq({ databaseUrl: urls.two });
    await inUse.migrate();
    await inUse.append("acme:order-1", [{ name: "Placed", data: { order: "acme-1" } }]);
    await inUse.close();
    const misnamed = createCells({ cells: urls, subscriptions });
    try {
      await expect(misnamed.migrate()).rejects.toMatchObject({
        code: "invalid_config",
        message: /cell "two" has events/,
      });
    } finally {
      await misnamed.close();
    }
    const cells = createCells({ cells: { two: urls.two, one: urls.one, three: urls.three }, subscriptions });
    try {
      await cells.migrate();
      expect((await cells.directory()).cells.map((c) => [c.name, c.slots])).toEqual([
        ["two", 1024],
        ["one", 0],
        ["three", 0],
      ]);
      expect((await cells.readStream("acme:order-1")).map((e) => e.name)).toEqual(["Placed"]);
      expect(await cells.append("acme:order-1", [{ name: "Paid", data: { order: "acme-1" } }])).toMatchObject({
        version: 1,
      });
    } finally {
      await cells.close();
    }
  });

  it("a mover without the code subscriptions waits for the events they have not advanced yet", async () => {
    delivered.length = 0;
    const urls = await three.databases();
    const cells = createCells({ cells: urls, subscriptions });
    // an operator's process (corq cells move): no code subscription of its own
    const mover = createCells({ cells: urls });
    try {
      await cells.migrate();
      const place = await cells.place("zeta:1");
      const to = cells.names.find((name) => name !== place.cell) ?? "";
      await cells.append("zeta:1", [{ name: "Made", data: { order: "z1" } }]);
      const stopped = await mover.move({ tenant: "zeta" }, { to, waitMs: 200 });
      expect(stopped).toMatchObject({ done: false, phase: "draining" });
      expect(stopped.waiting).toMatch(/byOrder: 0 queued, 1 not advanced yet.*byStream: 0 queued, 1 not advanced yet/);
      await drainAll(cells);
      expect(await mover.move({ tenant: "zeta" }, { to })).toMatchObject({ done: true, copied: 1 });
      await cells.append("zeta:1", [{ name: "After", data: { order: "z1" } }]);
      await drainAll(cells);
      expect(delivered.filter((d) => d.subscription === "byStream").map((d) => d.version)).toEqual([0, 1]);
      expect(delivered.filter((d) => d.subscription === "byOrder").map((d) => d.version)).toEqual([0, 1]);
    } finally {
      await mover.close();
      await cells.close();
    }
  });
});
