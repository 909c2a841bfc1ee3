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

  it("with a stream filter, each of two subscriptions gets only the events of its prefixes; a bad filter is a 400 and writes nothing", async () => {
    const secret = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
    hook.secret = secret;
    const deliver = { url: hook.receiver.url, secret };
    const orders = await api("PUT", "/subscriptions/orders-hook", {
      body: { streams: ["orders-", "refunds-"], from: "now", deliver },
    });
    expect(orders).toMatchObject({ status: 201, json: { streams: ["orders-", "refunds-"], key: "stream" } });
    const visits = await api("PUT", "/subscriptions/visits-hook", {
      body: { events: ["Arrived"], key: "data.room", streams: ["visitor-", "team_a-"], from: "now", deliver },
    });
    expect(visits).toMatchObject({ status: 201, json: { streams: ["visitor-", "team_a-"] } });

    // `_` is a stream-name character, not a wildcard: team_a- does not take teamXa-5
    for (const stream of ["orders-1", "refunds-2", "visitor-h3", "team_a-4", "teamXa-5", "ordersX-6"]) {
      const appended = await api("POST", `/streams/${stream}/events`, {
        body: { events: [{ name: "Arrived", data: { room: `r-${stream}` } }] },
      });
      expect(appended.status).toBe(201);
    }
    const got = (name: string) =>
      hook.receiver.deliveries
        .filter((d) => d.subscription === name)
        .map((d) => `${d.key} ${d.events.map((e) => e.stream).join(",")}`)
        .sort();
    await eventually(async () => {
      for (const name of ["orders-hook", "visits-hook"])
        expect((await api("GET", `/subscriptions/${name}`)).json, name).toMatchObject({ lag: 0, pending: 0 });
      expect(got("orders-hook")).toEqual(["orders-1 orders-1", "refunds-2 refunds-2"]);
      expect(got("visits-hook")).toEqual(["r-team_a-4 team_a-4", "r-visitor-h3 visitor-h3"]);
    });
    expect(
      hook.receiver.deliveries.filter((d) => d.subscription.endsWith("-hook")).every((d) => d.signatureValid),
    ).toBe(true);
    const listed = (await api("GET", "/subscriptions")).json.subscriptions as { name: string; streams: unknown }[];
    expect(listed.filter((s) => s.name.endsWith("-hook")).map((s) => [s.name, s.streams])).toEqual([
      ["orders-hook", ["orders-", "refunds-"]],
      ["visits-hook", ["visitor-", "team_a-"]],
    ]);

    for (const streams of [
      [],
      [""],
      ["orders-*"],
      ["100%"],
      "orders-",
      Array.from({ length: 101 }, (_, i) => `p${i}`),
    ]) {
      const refused = await api("PUT", "/subscriptions/bad-filter", { body: { streams, deliver } });
      expect(refused.status, JSON.stringify(streams)).toBe(400);
      expect(refused.type).toContain("application/problem+json");
      expect(refused.json).toMatchObject({
        type: "urn:corq:problem:invalid_config",
        detail: expect.stringMatching(/streams/),
      });
    }
    // an update with a bad filter changes nothing either
    expect((await api("PUT", "/subscriptions/orders-hook", { body: { streams: ["x%"], deliver } })).status).toBe(400);
    expect((await api("GET", "/subscriptions/orders-hook")).json.streams).toEqual(["orders-", "refunds-"]);
    const { rows } = await state.db.query(
      "SELECT count(*)::int AS n FROM corq.subscriptions WHERE name = 'bad-filter'",
    );
    expect(rows[0].n).toBe(0);
    for (const name of ["orders-hook", "visits-hook"])
      expect((await api("DELETE", `/subscriptions/${name}`)).status).toBe(204);
  });

  it("a receiver's 429 with Retry-After postpones the key from workerd: no attempt counted, the same attempt comes again", async () => {
    const created = await api("PUT", "/subscriptions/busy-receiver", {
      body: { events: ["Busy"], from: "now", deliver: { url: hook.receiver.url, timeoutMs: 5000 } },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    hook.receiver.reset();
    let answered = 0;
    // the first answer: come back in a second; then an ack
    hook.receiver.behave(() => (answered++ === 0 ? { status: 429, headers: { "retry-after": "1" } } : {}));
    await api("POST", "/streams/busy-1/events", { body: { events: [{ name: "Busy", data: {} }] } });
    await eventually(async () => expect(hook.receiver.deliveries.length).toBe(1));
    // (the receiver saw the delivery before the consumer settled it)
    await eventually(async () => {
      const page = await api("GET", "/subscriptions/busy-receiver/keys");
      expect(page.json.keys[0]).toMatchObject({ key: "busy-1", status: "backoff", attempts: 0 });
      expect(page.json.keys[0].reason).toMatch(/^postponed until .*HTTP 429, Retry-After 1 s/);
    });
    // a second later a consume (a kick's, the cron's, this one) delivers it again, as attempt 1
    await eventually(
      async () => {
        await api("POST", "/consume/busy-receiver");
        expect(hook.receiver.deliveries.map((d) => d.attempt)).toEqual([1, 1]);
      },
      { timeoutMs: 10_000 },
    );
    expect(hook.receiver.deliveries[1]!.receivedAt - hook.receiver.deliveries[0]!.receivedAt).toBeGreaterThanOrEqual(
      900,
    );
  });
});
