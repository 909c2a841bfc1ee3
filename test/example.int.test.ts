// The example app (example/) as a user copies it, on real Postgres: redelivery, events of one
// visitor out of version order with several visitors in a room, a room with more than 10,000
// events, odd room ids and long visitor streams, strangers' events, and two consumers running
// one room at once. The handlers are called through corq (consume) where delivery is what is
// tested, and directly where the test needs an order or an overlap corq never produces.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import type pg from "pg";
import { drizzle } from "drizzle-orm/node-postgres";
import type { SQL } from "drizzle-orm";
import { drain, useCorq } from "./helpers/corq.js";
import { createExecutor } from "../src/db/executor.js";
import { streamName } from "../src/config.js";
import type {
  Corq,
  DeliveredEvent,
  EventInput,
  HandlerContext,
  StoredEvent,
  SubscriptionDefinition,
} from "../src/index.js";
import { exampleSchema, ROOM_CAPACITY, visitorSubscriptions, type VisitorEvents } from "../example/visitors.js";
import { roomFullStream } from "../example/roomOccupancy.js";
import { welcomeStream } from "../example/greeter.js";
import { present } from "./helpers/present.js";

const open = useCorq();
/**
 * One of the example's subscriptions, its handler called directly with events as stored: the
 * example's handlers are idempotent by (stream, version) and read no seq.
 */
const byName = (name: string) =>
  visitorSubscriptions.find((s) => s.name === name)! as Omit<SubscriptionDefinition, "handle"> & {
    handle: (events: StoredEvent[], ctx: HandlerContext) => ReturnType<SubscriptionDefinition["handle"]>;
  };
const retryAtOnce = { backoff: { initialMs: 0, maxMs: 0, factor: 1 }, maxAttempts: 10 };

async function openExample(subscriptions: SubscriptionDefinition[] = visitorSubscriptions, more = {}) {
  const opened = await open({ subscriptions, ...more });
  const db = drizzle(opened.raw);
  for (const statement of exampleSchema) await db.execute(statement);
  return opened;
}

const registered = (name: string): EventInput => ({ name: "Registered", data: { name } });
const arrived = (roomId: string): EventInput => ({ name: "Arrived", data: { roomId } });
const departed = (roomId: string): EventInput => ({ name: "Departed", data: { roomId } });

async function drainAll(corq: Corq) {
  for (const name of ["greeter", "room-occupancy", "visitor-directory"]) await drain(corq, name, { maxBatches: 5000 });
}

async function room(raw: pg.Pool, id: string) {
  const { rows } = await raw.query(
    `SELECT r.occupants, r.times_full AS "timesFull",
            coalesce(array_agg(v.visitor ORDER BY v.visitor) FILTER (WHERE v.inside), '{}') AS inside
       FROM example.rooms r LEFT JOIN example.room_visitors v ON v.room = r.room
      WHERE r.room = $1 GROUP BY r.room`,
    [id],
  );
  return rows[0] ?? null;
}

/** Every event of a stream, as stored (the handler tests deliver these in orders of their own). */
const storedEvents = async (corq: Corq, streams: string[]) =>
  (await Promise.all(streams.map((s) => corq.readStream(s, { limit: 10_000 })))).flat();

/** What a handler gets from corq, for calling it directly: its key and corq's connection. */
function contextFor(corq: Corq, raw: pg.Pool, subscription: string, key: string): HandlerContext {
  const executor = createExecutor(raw);
  return {
    subscription,
    incarnation: "test",
    key,
    attempt: 1,
    signal: new AbortController().signal,
    corq,
    run: <T>(query: SQL) => executor.run<T>(query),
  };
}

describe("the example app", () => {
  it("counts occupants, announces a full room once, welcomes once, projects names and places; handlers get stream and version", async () => {
    const seen: StoredEvent[] = [];
    const watched = visitorSubscriptions.map((s) => ({
      ...s,
      handle(events: DeliveredEvent<VisitorEvents>[], ctx: HandlerContext<VisitorEvents>) {
        seen.push(...events);
        return s.handle(events, ctx);
      },
    }));
    const { corq, raw } = await openExample(watched);
    for (const v of ["ada", "bob", "cy", "dee"]) await corq.append(`visitor-${v}`, [registered(v), arrived("12")]);
    await corq.append("visitor-dee", [departed("12")]);
    await drainAll(corq);

    expect(await room(raw, "12")).toEqual({
      occupants: 3,
      timesFull: 1,
      inside: ["visitor-ada", "visitor-bob", "visitor-cy"],
    });
    const full = await corq.readStream(await roomFullStream("12", 1));
    expect(full).toMatchObject([
      {
        name: "RoomFull",
        data: { roomId: "12", capacity: ROOM_CAPACITY, time: 1 },
        meta: { causation: { stream: "visitor-cy", version: 1 } },
      },
    ]);
    expect(await corq.readStream(await roomFullStream("12", 2))).toEqual([]);
    const welcome = await corq.readStream(await welcomeStream("visitor-ada"));
    expect(welcome).toMatchObject([
      {
        name: "Welcomed",
        data: { visitor: "visitor-ada", name: "ada" },
        meta: { causation: { stream: "visitor-ada", version: 0 } },
      },
    ]);
    const { rows } = await raw.query("SELECT stream, name, room, status FROM example.visitors ORDER BY stream");
    expect(rows).toEqual([
      { stream: "visitor-ada", name: "ada", room: "12", status: "in-room" },
      { stream: "visitor-bob", name: "bob", room: "12", status: "in-room" },
      { stream: "visitor-cy", name: "cy", room: "12", status: "in-room" },
      { stream: "visitor-dee", name: "dee", room: null, status: "left" },
    ]);
    // what handlers deduplicate by, on every event they get
    expect(seen.length).toBeGreaterThan(10);
    for (const event of seen) {
      expect(typeof event.stream).toBe("string");
      expect(Number.isInteger(event.version) && event.version >= 0).toBe(true);
    }
  });

  it("changes nothing when a batch comes again after a crash before its ack, whole or from its head", async () => {
    // each key's first batch has its effects, then "crashes" (throws) before the ack: corq
    // delivers its head event again, then the rest
    const crashedOnce = new Set<string>();
    const crashing = visitorSubscriptions.map((s) => ({
      ...s,
      ...retryAtOnce,
      async handle(events: DeliveredEvent<VisitorEvents>[], ctx: HandlerContext<VisitorEvents>) {
        await s.handle(events, ctx);
        const id = `${s.name}/${ctx.key}`;
        if (!crashedOnce.has(id)) {
          crashedOnce.add(id);
          throw new Error("crashed after the handler, before the ack");
        }
      },
    }));
    const { corq, raw } = await openExample(crashing);
    for (const v of ["ada", "bob", "cy"]) await corq.append(`visitor-${v}`, [registered(v), arrived("12")]);
    await drainAll(corq);
    expect(crashedOnce.size).toBe(3 + 1 + 3); // every key of every subscription crashed once

    // and a whole batch handled twice (a lease that ran out after the handler's effects)
    const events = await storedEvents(corq, ["visitor-ada", "visitor-bob", "visitor-cy"]);
    const moves = events.filter((e) => e.name !== "Registered");
    await byName("room-occupancy").handle(moves, contextFor(corq, raw, "room-occupancy", "12"));
    for (const v of ["ada", "bob", "cy"]) {
      const own = events.filter((e) => e.stream === `visitor-${v}`);
      await byName("visitor-directory").handle(own, contextFor(corq, raw, "visitor-directory", `visitor-${v}`));
      await byName("greeter").handle(own.slice(0, 1), contextFor(corq, raw, "greeter", `visitor-${v}`));
      expect(await corq.readStream(await welcomeStream(`visitor-${v}`))).toHaveLength(1);
    }

    expect(await room(raw, "12")).toEqual({
      occupants: 3,
      timesFull: 1,
      inside: ["visitor-ada", "visitor-bob", "visitor-cy"],
    });
    expect(await corq.readStream(await roomFullStream("12", 1))).toHaveLength(1);
    expect(await corq.readStream(await roomFullStream("12", 2))).toEqual([]);
    const { rows } = await raw.query("SELECT name, status FROM example.visitors ORDER BY stream");
    expect(rows).toEqual(["ada", "bob", "cy"].map((name) => ({ name, status: "in-room" })));
    expect(await corq.deadLetters()).toEqual([]);
  });

  it("ends in the same state whatever the order and repetition of events, several visitors in a room (seeded)", async () => {
    const { corq, raw } = await openExample();
    let run = 0;
    // per visitor: the rooms it moves through, as Arrived / Departed of room "r"; the order
    // the handlers then get: any permutation with repeats, split into batches
    const visitorMoves = fc.array(fc.boolean(), { minLength: 1, maxLength: 6 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(visitorMoves, { minLength: 2, maxLength: 5 }),
        fc.infiniteStream(fc.nat()),
        async (visitors, randomness) => {
          const roomId = `r${++run}`;
          const streams = visitors.map((_, i) => `visitor-${run}-${i}`);
          for (const [i, moves] of visitors.entries())
            await corq.append(present(streams[i], `visitor ${i}'s stream`), [
              registered(`v${i}`),
              ...moves.map((a) => (a ? arrived(roomId) : departed(roomId))),
            ]);
          const events = await storedEvents(corq, streams);
          const random = randomness[Symbol.iterator]();
          const next = (n: number) => random.next().value % n;
          // a shuffled delivery with duplicates, in batches
          const delivered = [...events, ...events.filter(() => next(3) === 0)];
          for (let i = delivered.length - 1; i > 0; i--) {
            const j = next(i + 1);
            [delivered[i], delivered[j]] = [
              present(delivered[j], `delivered event ${j}`),
              present(delivered[i], `delivered event ${i}`),
            ];
          }
          const moves = delivered.filter((e) => e.name !== "Registered");
          for (let i = 0; i < moves.length; ) {
            const size = 1 + next(4);
            await byName("room-occupancy").handle(
              moves.slice(i, i + size),
              contextFor(corq, raw, "room-occupancy", roomId),
            );
            i += size;
          }
          for (const stream of streams) {
            const own = delivered.filter((e) => e.stream === stream);
            for (let i = 0; i < own.length; i += 2)
              await byName("visitor-directory").handle(
                own.slice(i, i + 2),
                contextFor(corq, raw, "visitor-directory", stream),
              );
          }

          // the truth: each visitor's newest move, by version
          const last = new Map<string, StoredEvent>();
          for (const e of events) if (e.name !== "Registered") last.set(e.stream, e);
          const inside = streams.filter((s) => last.get(s)?.name === "Arrived");
          const state = await room(raw, roomId);
          expect(state.occupants).toBe(inside.length);
          expect(state.inside).toEqual([...inside].sort());
          const { rows } = await raw.query(
            "SELECT stream, name, status FROM example.visitors WHERE stream = ANY($1) ORDER BY stream",
            [streams],
          );
          expect(rows).toEqual(
            streams
              .map((stream, i) => ({ stream, name: `v${i}`, status: inside.includes(stream) ? "in-room" : "left" }))
              .sort((a, b) => a.stream.localeCompare(b.stream)),
          );
        },
      ),
      { seed: 20261201, numRuns: 25 },
    );
  }, 120_000);

  it("keeps a room with more than 10,000 events flowing, each batch costing what the first one did", async () => {
    let statements = 0;
    let rowsRead = 0;
    const rooms = byName("room-occupancy");
    // the rows the handler's statements return: the room's one row, whatever its history
    const counted = {
      ...rooms,
      batchSize: 100,
      handle: (events: DeliveredEvent<VisitorEvents>[], ctx: HandlerContext<VisitorEvents>) =>
        rooms.handle(events, {
          ...ctx,
          run: async <T>(query: SQL) => {
            const rows = await ctx.run<T>(query);
            rowsRead += rows.length;
            return rows;
          },
        }),
    };
    const { corq, raw } = await openExample([counted], { onStatement: () => void statements++ });
    // 20 visitors × 504 moves in room "big", each ending outside: 10,080 events
    for (let v = 0; v < 20; v++)
      await corq.append(
        `visitor-${v}`,
        Array.from({ length: 504 }, (_, i) => (i % 2 === 0 ? arrived("big") : departed("big"))),
      );
    await corq.advance();
    const costs: string[] = [];
    for (;;) {
      const before = { statements, rowsRead };
      const result = await corq.consume("room-occupancy");
      if (result === null) break;
      expect(result.outcome).toBe("acked");
      costs.push(`${statements - before.statements} statements, ${rowsRead - before.rowsRead} rows`);
    }
    expect(costs.length).toBe(101);
    // claim, read the room, write it, ack: the same at the 10,001st event as at the first
    expect(new Set(costs)).toEqual(new Set([costs[0]]));
    expect(costs[0]).toBe("4 statements, 2 rows");
    expect(await room(raw, "big")).toMatchObject({ occupants: 0, timesFull: 0 });

    // and it still counts: three arrive, the room is full
    for (const v of [0, 1, 2]) await corq.append(`visitor-${v}`, [arrived("big")]);
    await drain(corq, "room-occupancy");
    expect(await room(raw, "big")).toMatchObject({ occupants: 3, timesFull: 1 });
    expect(await corq.deadLetters()).toEqual([]);
  }, 120_000);

  it("derives valid stream names from odd room ids and 200-character visitor streams; no key dies", async () => {
    const { corq, raw } = await openExample(visitorSubscriptions.map((s) => ({ ...s, maxAttempts: 1 })));
    const rooms = [
      "Room 4",
      "Salle été",
      "a/b?c#d%20",
      "=20", // looks like an escaped space: must not meet "Room 4"'s escaping
      " ",
      "-",
      "room-full-1-12",
      "x".repeat(512), // the longest key: 512 bytes
      "é".repeat(256),
      "🚪".repeat(128),
    ];
    const long = (i: number) => `visitor-${i}-${"x".repeat(200)}`.slice(0, 200); // a visitor stream of 200 characters
    for (const [r, roomId] of rooms.entries())
      for (let i = 0; i < 3; i++)
        await corq.append(r === 0 ? long(i) : `visitor-${r}-${i}`, [registered(`${r}.${i}`), arrived(roomId)]);
    await drainAll(corq);

    expect(await corq.deadLetters()).toEqual([]);
    const names = new Set<string>();
    for (const roomId of rooms) {
      expect(await room(raw, roomId), roomId).toMatchObject({ occupants: 3, timesFull: 1 });
      const stream = await roomFullStream(roomId, 1);
      expect(streamName.safeParse(stream).success, stream).toBe(true);
      expect(await corq.readStream(stream), roomId).toMatchObject([{ name: "RoomFull", data: { roomId } }]);
      names.add(stream);
    }
    expect(names.size).toBe(rooms.length);
    for (let i = 0; i < 3; i++) {
      expect(long(i)).toHaveLength(200);
      const welcome = await welcomeStream(long(i));
      expect(welcome).toMatch(/^welcome:[0-9a-f]{64}$/);
      expect(await corq.readStream(welcome)).toMatchObject([{ data: { visitor: long(i) } }]);
    }
    for (const s of ["greeter", "room-occupancy", "visitor-directory"])
      expect(await corq.subscription(s)).toMatchObject({ pending: 0, skipped: 0, keys: { dead: 0 } });
  });

  it("keeps its state out of streams: a stranger's room events change nothing, a stranger's stream of ours stalls no key", async () => {
    const { corq, raw } = await openExample(visitorSubscriptions.map((s) => ({ ...s, maxAttempts: 1 })));
    // what the first version of the example kept its state in, and the names of its outputs
    await corq.append("room-12", [{ name: "OccupancyChanged", data: { roomId: "12", occupants: 99 } }]);
    await corq.append(await roomFullStream("12", 1), [{ name: "RoomFull", data: { roomId: "12", forged: true } }]);
    await corq.append(await welcomeStream("visitor-eve"), [{ name: "Welcomed", data: { forged: true } }]);
    for (const v of ["eve", "fay", "gus"]) await corq.append(`visitor-${v}`, [registered(v), arrived("12")]);
    await drainAll(corq);

    expect(await corq.deadLetters()).toEqual([]);
    expect(await room(raw, "12")).toEqual({
      occupants: 3,
      timesFull: 1,
      inside: ["visitor-eve", "visitor-fay", "visitor-gus"],
    });
    // the outputs it found taken stay as they were (an output, not state: see docs/tour.md)
    expect(await corq.readStream(await roomFullStream("12", 1))).toMatchObject([{ data: { forged: true } }]);
    expect(await corq.readStream(await welcomeStream("visitor-fay"))).toMatchObject([{ data: { name: "fay" } }]);
  });

  it("takes visitor- streams only: another producer's Registered and Arrived welcome no one and fill no room", async () => {
    const { corq, raw } = await openExample();
    // what an append token limited to orders- could append, and what it made the example write
    for (const stream of ["orders-evil1", "orders-evil2", "orders-evil3", "visitorx-4"])
      await corq.append(stream, [registered("evil"), arrived("lobby-x")]);
    await corq.append("visitor-ada", [registered("ada"), arrived("lobby-x")]);
    await drainAll(corq);

    expect(await corq.readStream(await welcomeStream("orders-evil1"))).toEqual([]);
    expect(await corq.readStream(await roomFullStream("lobby-x", 1))).toEqual([]);
    expect(await room(raw, "lobby-x")).toEqual({ occupants: 1, timesFull: 0, inside: ["visitor-ada"] });
    expect(await corq.readStream(await welcomeStream("visitor-ada"))).toHaveLength(1);
    const { rows } = await raw.query("SELECT stream FROM example.visitors ORDER BY stream");
    expect(rows).toEqual([{ stream: "visitor-ada" }]);
    for (const s of ["greeter", "room-occupancy", "visitor-directory"])
      expect(await corq.subscription(s)).toMatchObject({ streams: ["visitor-"], lag: 0, skipped: 0 });
  });

  it("lets one of two consumers that ran a room at once apply its batch (an expired lease): no double count", async () => {
    const { corq, raw } = await openExample();
    for (const v of ["ada", "bob"]) await corq.append(`visitor-${v}`, [arrived("7")]);
    const events = await storedEvents(corq, ["visitor-ada", "visitor-bob"]);
    // both read the room before either writes
    let reads = 0;
    let bothRead: () => void = () => undefined;
    const barrier = new Promise<void>((resolve) => (bothRead = resolve));
    const overlapping = (): HandlerContext => {
      const ctx = contextFor(corq, raw, "room-occupancy", "7");
      let calls = 0;
      return {
        ...ctx,
        async run<T>(query: SQL) {
          if (calls++ === 1) {
            if (++reads === 2) bothRead();
            await barrier;
          }
          return ctx.run<T>(query);
        },
      };
    };
    const outcomes = await Promise.allSettled([
      byName("room-occupancy").handle(events, overlapping()),
      byName("room-occupancy").handle(events, overlapping()),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(["fulfilled", "rejected"]);
    const failed = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
    expect(String(failed.reason)).toMatch(/changed while this batch ran/);
    expect(await room(raw, "7")).toEqual({ occupants: 2, timesFull: 0, inside: ["visitor-ada", "visitor-bob"] });
    // the loser's batch comes again: recognised as applied
    await byName("room-occupancy").handle(events, contextFor(corq, raw, "room-occupancy", "7"));
    expect(await room(raw, "7")).toMatchObject({ occupants: 2 });
  });

  it("brings the first version's directory table up to date, idempotently, and goes on from it", async () => {
    const { corq, raw } = await open({ subscriptions: visitorSubscriptions });
    const appended = await corq.append("visitor-ada", [registered("Ada"), arrived("12")]);
    // the first version's table, with the row it wrote for those two events
    await raw.query(`CREATE SCHEMA example; CREATE TABLE example.visitors (
      stream text PRIMARY KEY, name text, room text, status text NOT NULL,
      last_position bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`);
    await raw.query(
      "INSERT INTO example.visitors (stream, name, room, status, last_position) VALUES ('visitor-ada', 'Ada', '12', 'in-room', $1)",
      [appended.positions[1]],
    );
    const db = drizzle(raw);
    for (let twice = 0; twice < 2; twice++) for (const statement of exampleSchema) await db.execute(statement);
    const { rows } = await raw.query(
      "SELECT name, name_version, room, status, moved_version, last_version FROM example.visitors",
    );
    expect(rows).toEqual([
      { name: "Ada", name_version: 1, room: "12", status: "in-room", moved_version: 1, last_version: 1 },
    ]);
    // a redelivery of what it had handled changes nothing; what comes next applies
    await corq.append("visitor-ada", [departed("12")]);
    const events = await storedEvents(corq, ["visitor-ada"]);
    await byName("visitor-directory").handle(events, contextFor(corq, raw, "visitor-directory", "visitor-ada"));
    const after = await raw.query("SELECT name, room, status, last_position FROM example.visitors");
    expect(after.rows).toEqual([
      {
        name: "Ada",
        room: null,
        status: "left",
        last_position: String(present(events[2], "visitor-ada's third event").position),
      },
    ]);
  });
});
