// CORQ_PUBLIC_APPEND=true: anyone may append — and nothing else opens. The example app keeps
// its state in tables, so what a stranger appends cannot change it.
import { describe, expect, it } from "vitest";
import { eventually, useStack } from "../helpers/stack.js";

const { state, api } = useStack({ vars: { CORQ_PUBLIC_APPEND: "true" } });

describe("CORQ_PUBLIC_APPEND=true", () => {
  it("lets a request without a token append; every other endpoint still wants the token", async () => {
    const appended = await api("POST", "/streams/visitor-pub/events", {
      token: null,
      body: { events: [{ name: "Registered", data: { name: "Pub" } }] },
    });
    expect(appended).toMatchObject({ status: 201, json: { stream: "visitor-pub", version: 0 } });
    for (const [method, path, body] of [
      ["GET", "/streams/visitor-pub", undefined],
      ["GET", "/events", undefined],
      ["GET", "/stats", undefined],
      ["GET", "/subscriptions", undefined],
      ["PUT", "/subscriptions/hook", { deliver: { url: "http://127.0.0.1:9/hook" } }],
      ["POST", "/advance", undefined],
      ["POST", "/consume/greeter", undefined],
      ["GET", "/dead-letters", undefined],
      ["POST", "/dead-letters/retry", { subscription: "greeter" }],
    ] as const) {
      const response = await api(method, path, { token: null, body });
      expect(response.status, `${method} ${path}`).toBe(401);
      // the webhook wants a signature instead of the token
      expect(response.json.type).toBe(
        `urn:corq:problem:${path === "/dead-letters/retry" ? "missing_headers" : "unauthorized"}`,
      );
    }
    // still validated: a bad body is a 400 and writes nothing
    expect((await api("POST", "/streams/visitor-pub/events", { token: null, body: { events: [] } })).status).toBe(400);
    expect((await api("GET", "/streams/visitor-pub")).json.events).toHaveLength(1);
  });

  it("gives a stranger's appends no hold on the example's state", async () => {
    const append = (stream: string, events: unknown[]) =>
      api("POST", `/streams/${stream}/events`, { token: null, body: { events } });
    // the first version of the example read its state back from room-* streams
    expect(
      (await append("room-12", [{ name: "OccupancyChanged", data: { roomId: "12", occupants: 50 } }])).status,
    ).toBe(201);
    for (const v of ["x", "y"])
      expect((await append(`visitor-${v}`, [{ name: "Arrived", data: { roomId: "12" } }])).status).toBe(201);
    await eventually(async () => {
      const { rows } = await state.db.query("SELECT occupants FROM example.rooms WHERE room = '12'");
      expect(rows).toEqual([{ occupants: 2 }]);
    });
  });
});
