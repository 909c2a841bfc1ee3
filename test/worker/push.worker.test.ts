// Push subscriptions through the Worker's API, delivering from workerd to a real hook.receiver.
import { describe, expect, it } from "vitest";
import { firstDeliveries, useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

// the receiver listens on 127.0.0.1: private destinations allowed, explicitly
const { state, api } = useStack({ vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" } });
const hook = useReceiver();

describe("push subscriptions over HTTP", () => {
  it("created with one call, receives appended events in order within seconds, signed", async () => {
    const created = await api("PUT", "/subscriptions/room-feed", {
      body: {
        events: ["Arrived", "Departed"],
        key: "data.roomId",
        from: "now",
        deliver: { url: hook.receiver.url, timeoutMs: 5000 },
        batchSize: 10,
      },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      name: "room-feed",
      kind: "push",
      key: "data.roomId",
      secret: expect.stringMatching(/^whsec_/),
    });
    hook.secret = created.json.secret;

    const expected: number[] = [];
    for (let v = 0; v < 5; v++) {
      const r = await api("POST", `/streams/visitor-p${v}/events`, {
        body: {
          events: [
            { name: "Arrived", data: { roomId: "lobby" } },
            { name: "Departed", data: { roomId: "lobby" } },
          ],
        },
      });
      expected.push(...r.json.positions);
    }
    await eventually(() => {
      expect(firstDeliveries(hook.receiver.deliveries).get("lobby")).toEqual(expected);
      return Promise.resolve();
    });
    expect(hook.receiver.deliveries.every((d) => d.signatureValid && d.subscription === "room-feed")).toBe(true);
    expect(hook.receiver.overlaps).toBe(0);
  });

  it("reads, updates and deletes; refuses bad configs and code subscription names", async () => {
    const got = await api("GET", "/subscriptions/room-feed");
    expect(got.json).toMatchObject({ name: "room-feed", deliver: { url: hook.receiver.url, timeoutMs: 5000 } });
    expect(got.json.secret).toBeUndefined();
    const updated = await api("PUT", "/subscriptions/room-feed", {
      body: { events: ["*"], deliver: { url: hook.receiver.url } },
    });
    expect(updated.status).toBe(200);
    expect(updated.json).toMatchObject({ events: ["*"], key: "stream" });
    expect(updated.json.secret).toBeUndefined();
    expect((await api("GET", "/subscriptions")).json.subscriptions.map((s: { name: string }) => s.name)).toContain(
      "room-feed",
    );

    for (const body of [
      { deliver: { url: "file:///etc/passwd" } },
      { deliver: { url: hook.receiver.url }, batchSize: "ten" },
      { events: ["*"] },
      // a key path is bounded (32 segments, 512 bytes): a 300,000-segment one stalled every advance
      { deliver: { url: hook.receiver.url }, key: ["data", ...Array(32).fill("a")].join(".") },
      { deliver: { url: hook.receiver.url }, key: `data.${"a".repeat(508)}` },
    ]) {
      const refused = await api("PUT", "/subscriptions/bad-hook", { body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.type).toContain("application/problem+json");
    }
    const long = await api("PUT", "/subscriptions/bad-hook", {
      body: { deliver: { url: hook.receiver.url }, key: ["data", ...Array(299_999).fill("a")].join(".") },
    });
    expect(long).toMatchObject({ status: 400, json: { detail: expect.stringMatching(/key: .*at most 32 segments/) } });
    expect((await api("GET", "/subscriptions/bad-hook")).status).toBe(404);
    expect((await api("PUT", "/subscriptions/greeter", { body: { deliver: { url: hook.receiver.url } } })).status).toBe(
      409,
    );
    expect((await api("DELETE", "/subscriptions/greeter")).status).toBe(409);
    expect(
      (await api("PUT", "/subscriptions/room-feed", { token: "wrong", body: { deliver: { url: hook.receiver.url } } }))
        .status,
    ).toBe(401);

    expect((await api("DELETE", "/subscriptions/room-feed")).status).toBe(204);
    expect((await api("GET", "/subscriptions/room-feed")).status).toBe(404);
    expect((await api("DELETE", "/subscriptions/room-feed")).status).toBe(404);
    const { rows } = await state.db.query(
      "SELECT count(*)::int AS n FROM corq.subscriptions WHERE name IN ('room-feed', 'bad-hook')",
    );
    expect(rows[0].n).toBe(0);
  });
});
