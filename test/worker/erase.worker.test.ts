// DELETE /streams/:stream through the real app (the Worker in workerd, and `npm run serve` in
// the serve project): the stream's events leave the log and a push subscription's queue (a
// JSON-path key holding events of two streams), nothing of them is delivered afterwards, the
// tombstone keeps the version; refusals (unknown stream, bad name, no token, a read token)
// change nothing; the name percent-encoded in the path.
import { describe, expect, it } from "vitest";
import { useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

const { state, api } = useStack({ vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" } });
const hook = useReceiver();

const append = (stream: string, rooms: string[]) =>
  api("POST", `/streams/${encodeURIComponent(stream)}/events`, {
    body: { events: rooms.map((room) => ({ name: "Erasable", data: { room } })) },
  });

const count = async (sql: string, params: unknown[] = []) => (await state.db.query(sql, params)).rows[0].n as number;

describe("DELETE /streams/:stream", () => {
  it("erases the stream from the log and the queues; only the other stream's events are delivered", async () => {
    const created = await api("PUT", "/subscriptions/rooms", {
      body: { events: ["Erasable"], key: "data.room", deliver: { url: hook.receiver.url } },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    // paused: the events wait in the queue (r1 holds events of both streams)
    expect((await api("POST", "/subscriptions/rooms/pause")).status).toBe(200);
    const stream = "tenant:a@b+c=d"; // percent-encoded in the path
    expect((await append(stream, ["r1", "r2"])).status).toBe(201);
    expect((await append("bob", ["r1"])).status).toBe(201);
    await api("POST", "/advance");
    await eventually(async () => expect((await api("GET", "/subscriptions/rooms")).json.pending).toBe(3));

    const erased = await api("DELETE", `/streams/${encodeURIComponent(stream)}`);
    expect(erased).toMatchObject({ status: 200, json: { erased: 2 } });
    expect(await count("SELECT count(*)::int AS n FROM corq.events WHERE stream = $1", [stream])).toBe(0);
    expect((await api("GET", "/subscriptions/rooms")).json).toMatchObject({ pending: 1 });
    expect((await api("GET", `/streams/${encodeURIComponent(stream)}`)).json).toEqual({
      stream,
      events: [],
      erased: true,
      version: 1,
    });
    // a stream never erased reads as before
    expect(Object.keys((await api("GET", "/streams/bob")).json)).toEqual(["stream", "events"]);

    expect((await api("POST", "/subscriptions/rooms/resume")).status).toBe(200);
    await eventually(async () => expect((await api("GET", "/subscriptions/rooms")).json.pending).toBe(0));
    const delivered = hook.receiver.deliveries.flatMap((d) => d.events.map((e) => [d.key, e.stream, e.seq]));
    expect(delivered).toEqual([["r1", "bob", 2]]); // seq 1 of r1 was the erased event: a gap

    // the version stays: an append continues after it, and is listed
    const again = await api("POST", `/streams/${encodeURIComponent(stream)}/events`, {
      body: { events: [{ name: "Other", data: {} }], expectedVersion: 1 },
    });
    expect(again).toMatchObject({ status: 201, json: { version: 2 } });
    expect((await api("GET", `/streams/${encodeURIComponent(stream)}`)).json).toMatchObject({
      erased: true,
      version: 2,
      events: [{ version: 2, name: "Other" }],
    });
    // erasing again takes what came since; then nothing
    expect(await api("DELETE", `/streams/${encodeURIComponent(stream)}`)).toMatchObject({ json: { erased: 1 } });
    expect(await api("DELETE", `/streams/${encodeURIComponent(stream)}`)).toMatchObject({
      status: 200,
      json: { erased: 0 },
    });
  });

  it("refuses an unknown stream, a bad name, no token and a read token with problem+json, changing nothing", async () => {
    expect((await append("kept", ["r9"])).status).toBe(201);
    const read = await api("POST", "/tokens", { body: { name: "reader", scopes: ["read"] } });
    expect(read.status).toBe(201);
    const snapshot = async () =>
      (await state.db.query("SELECT stream, version, erased_through, erased_events FROM corq.streams ORDER BY stream"))
        .rows;
    const events = () => count("SELECT count(*)::int AS n FROM corq.events");
    const before = { streams: await snapshot(), events: await events() };
    for (const [path, token, status] of [
      ["/streams/nobody", undefined, 404],
      ["/streams/a%20b", undefined, 400],
      [`/streams/${"x".repeat(201)}`, undefined, 400],
      ["/streams/%ED%A0%80", undefined, 400],
      ["/streams/kept", null, 401],
      ["/streams/kept", read.json.token, 403],
    ] as const) {
      const refused = await api("DELETE", path, { token });
      expect(refused.status, `${path} ${token === null ? "without a token" : ""}`).toBe(status);
      expect(refused.type).toContain("application/problem+json");
    }
    expect((await api("DELETE", "/streams/nobody")).json).toMatchObject({
      type: expect.stringContaining("unknown_stream"),
    });
    expect({ streams: await snapshot(), events: await events() }).toEqual(before);
  });
});
