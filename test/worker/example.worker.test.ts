// The example app (example/) in the real Worker, as `npm start` runs it — but with no cron:
// what gets written after an append comes from the append's own kick (an advance and a
// consumer dispatch in the background), and `POST /consume` with `corq-budget-ms`.
import { describe, expect, it } from "vitest";
import { createCorq, type EventInput } from "../../src/index.js";
import { roomFullStream } from "../../example/roomOccupancy.js";
import { welcomeStream } from "../../example/greeter.js";
import { eventually, useStack } from "../helpers/stack.js";

const { state, api } = useStack(); // no cronIntervalMs: the scheduled handler never fires

describe("the example app on the Worker", () => {
  it("writes the room's state, its RoomFull and each welcome after the appends, with no cron: the append's kick", async () => {
    const visitors = ["visitor-ada", "visitor-bob", `visitor-${"l".repeat(192)}`]; // the last one: 200 characters
    for (const [i, stream] of visitors.entries()) {
      const appended = await api("POST", `/streams/${stream}/events`, {
        body: {
          events: [
            { name: "Registered", data: { name: `V${i}` } },
            { name: "Arrived", data: { roomId: "Room 4" } }, // a room id no stream name could hold as it is
          ],
          expectedVersion: -1,
        },
      });
      expect(appended.status).toBe(201);
    }
    const full = await roomFullStream("Room 4", 1);
    await eventually(
      async () => {
        const { rows } = await state.db.query("SELECT occupants, times_full FROM example.rooms WHERE room = 'Room 4'");
        expect(rows).toEqual([{ occupants: 3, times_full: 1 }]);
        expect((await api("GET", `/streams/${full}`)).json.events).toMatchObject([
          { name: "RoomFull", data: { roomId: "Room 4", capacity: 3 } },
        ]);
        for (const visitor of visitors)
          expect((await api("GET", `/streams/${await welcomeStream(visitor)}`)).json.events).toMatchObject([
            { name: "Welcomed", data: { visitor } },
          ]);
        const directory = await state.db.query("SELECT name, status FROM example.visitors ORDER BY name");
        expect(directory.rows).toEqual(["V0", "V1", "V2"].map((name) => ({ name, status: "in-room" })));
      },
      { timeoutMs: 30_000 },
    );
    expect((await api("GET", "/dead-letters")).json.deadLetters).toEqual([]);
  });

  it("POST /consume drains keys for corq-budget-ms, and handles one batch without it", async () => {
    await api("POST", "/subscriptions/visitor-directory/pause");
    // straight into the database: an append over HTTP would kick consumers of its own
    const corq = createCorq({ databaseUrl: state.stack.databaseUrl });
    try {
      const registered: EventInput = { name: "Registered", data: { name: "B" } };
      for (let v = 0; v < 5; v++) await corq.append(`visitor-budget-${v}`, [registered]);
    } finally {
      await corq.close();
    }
    expect((await api("POST", "/advance")).status).toBe(200);
    // resumed behind the API's back: a resume over HTTP dispatches consumers, which would take
    // the keys before the test's own calls
    await state.db.query("UPDATE corq.subscriptions SET paused = false WHERE name = 'visitor-directory'");

    const one = await api("POST", "/consume/visitor-directory");
    expect(one).toMatchObject({ status: 200, json: { events: 1, outcome: "acked" } });
    expect(one.json).not.toHaveProperty("batches");
    const budgeted = await api("POST", "/consume/visitor-directory", { headers: { "corq-budget-ms": "20000" } });
    expect(budgeted).toMatchObject({ status: 200, json: { outcome: "acked", batches: 4, eventsTotal: 4 } });
    expect((await api("POST", "/consume/visitor-directory", { headers: { "corq-budget-ms": "20000" } })).status).toBe(
      204,
    );
    for (const value of ["-1", "1.5", "soon", ""])
      expect(
        (await api("POST", "/consume/visitor-directory", { headers: { "corq-budget-ms": value } })).status,
        value,
      ).toBe(400);
  });
});
