// The example's handlers (example/) unit-tested with the test kit, as a user tests their own: no
// database — events from the builders, a context that records the statements sent and the
// events appended, and rows the test makes up. test/example.int.test.ts runs them on Postgres.
import { describe, expect, it } from "vitest";
import { greeter, welcomeStream } from "../example/greeter.js";
import { ROOM_CAPACITY, roomFullStream, roomOccupancy } from "../example/roomOccupancy.js";
import { visitorDirectory } from "../example/visitorDirectory.js";
import type { VisitorEvents } from "../example/events.js";
import { deliveredEvents, handlerContext } from "../src/testing/index.js";

describe("greeter (a policy)", () => {
  it("welcomes a visitor once, with the registration as its cause, also when the batch comes again", async () => {
    const events = deliveredEvents<VisitorEvents, "Registered">("visitor-ada", [
      { name: "Registered", data: { name: "ada" } },
      { name: "Registered", data: { name: "ada again" } },
    ]);
    const ctx = handlerContext({ subscription: "greeter", key: "visitor-ada" });
    await greeter.handle(events, ctx);
    await greeter.handle(events, { ...ctx, attempt: 2 }); // redelivered: the welcome stream exists
    expect(ctx.appended).toEqual([
      {
        stream: await welcomeStream("visitor-ada"),
        events: [
          {
            name: "Welcomed",
            data: { visitor: "visitor-ada", name: "ada" },
            meta: { causation: { stream: "visitor-ada", version: 0 } },
          },
        ],
        expectedVersion: -1,
        result: expect.objectContaining({ version: 0 }),
      },
    ]);
  });
});

describe("room-occupancy (a process manager)", () => {
  /** The room's row and its visitors' rows, as the handler's read statement returns them. */
  const roomRow = (room: { occupants: number; timesFull: number; revision: number } | null, visitors = []) => [
    { room, visitors },
  ];

  it("announces the room full on the arrival that fills it, then writes the room at the revision it read", async () => {
    const events = deliveredEvents<VisitorEvents, "Arrived" | "Departed">("12", [
      { name: "Arrived", stream: "visitor-cy", version: 1, data: { roomId: "12" } },
      { name: "Arrived", stream: "visitor-dee", version: 1, data: { roomId: "12" } },
    ]);
    const ctx = handlerContext({
      subscription: "room-occupancy",
      key: "12",
      results: [roomRow({ occupants: ROOM_CAPACITY - 1, timesFull: 0, revision: 7 }), [{ revision: 8 }]],
    });
    await roomOccupancy.handle(events, ctx);

    expect(ctx.appended).toMatchObject([
      {
        stream: await roomFullStream("12", 1),
        events: [
          {
            name: "RoomFull",
            data: { roomId: "12", capacity: ROOM_CAPACITY, time: 1 },
            meta: { causation: { stream: "visitor-cy", version: 1 } },
          },
        ],
        expectedVersion: -1,
      },
    ]);
    const [read, write] = ctx.statements;
    expect(read?.params).toEqual(["12", "12", JSON.stringify(["visitor-cy", "visitor-dee"])]);
    expect(write?.sql).toContain("INSERT INTO example.rooms");
    // room, occupants (one over capacity: the second arrival), times full, then the revision it read
    expect(write?.params.slice(0, 4)).toEqual(["12", ROOM_CAPACITY + 1, 1, 7]);
    expect(JSON.parse(String(write?.params[5]))).toEqual([
      { visitor: "visitor-cy", version: 1, inside: true },
      { visitor: "visitor-dee", version: 1, inside: true },
    ]);
  });

  it("fails the batch when another consumer wrote the room meanwhile (the compare-and-set wrote nothing)", async () => {
    const events = deliveredEvents<VisitorEvents, "Arrived" | "Departed">("12", [
      { name: "Arrived", stream: "visitor-ada", data: { roomId: "12" } },
    ]);
    const ctx = handlerContext({ key: "12", results: [roomRow(null), [{ revision: null }]] });
    await expect(roomOccupancy.handle(events, ctx)).rejects.toThrow(/room "12" changed while this batch ran/);
    expect(ctx.appended).toEqual([]);
  });
});

describe("visitor-directory (a projection)", () => {
  it("folds a batch into one upsert from the newest version of each field group", async () => {
    const events = deliveredEvents<VisitorEvents, "Registered" | "Arrived" | "Departed">("visitor-bob", [
      { name: "Registered", data: { name: "bob" } },
      { name: "Arrived", data: { roomId: "4" } },
      { name: "Departed", data: { roomId: "4" } },
    ]);
    const ctx = handlerContext({ subscription: "visitor-directory", key: "visitor-bob" });
    await visitorDirectory.handle(events, ctx);
    expect(ctx.statements).toHaveLength(1);
    expect(ctx.statements[0]?.sql).toMatch(/^\s*INSERT INTO example\.visitors AS v/);
    // stream, name, its version, room, status, the move's version, the last version and position
    expect(ctx.statements[0]?.params).toEqual(["visitor-bob", "bob", 0, null, "left", 2, 2, 3]);
  });
});
