// Push delivery from workerd where private destinations are not allowed (as deployed): the
// Worker refuses loopback by the URL's text, at PUT and when delivering.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCorq } from "../../src/index.js";
import { startReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

const { state, api } = useStack({ vars: { CORQ_PUSH_ALLOW_PRIVATE: "false" } });
let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => (receiver = await startReceiver(() => undefined)));
afterAll(() => receiver.close());

describe("push subscriptions without CORQ_PUSH_ALLOW_PRIVATE", () => {
  it("refuses loopback in all four spellings at PUT (400) and when delivering", async () => {
    const port = new URL(receiver.url).port;
    const urls = [
      `http://127.0.0.1:${port}/`,
      `http://localhost:${port}/`,
      `http://2130706433:${port}/`,
      `http://0x7f.1:${port}/`,
    ];
    for (const url of urls) {
      const refused = await api("PUT", "/subscriptions/probe", { body: { deliver: { url } } });
      expect(refused.status, url).toBe(400);
      expect(refused.json.detail, url).toContain("is not a public address");
    }
    // made where private networks are allowed (a Node instance on the same database): the
    // Worker refuses them when delivering
    const allowing = createCorq({ databaseUrl: state.stack.databaseUrl, pushAllowPrivate: true });
    try {
      for (const [i, url] of urls.entries())
        await allowing.putSubscription(`probe-${i}`, { from: "now", maxAttempts: 1, deliver: { url } });
    } finally {
      await allowing.close();
    }
    expect((await api("POST", "/streams/k/events", { body: { events: [{ name: "E", data: {} }] } })).status).toBe(201);
    const dead = await eventually(async () => {
      const { json } = await api("GET", "/dead-letters");
      const probes = json.deadLetters.filter((d: { subscription: string }) => d.subscription.startsWith("probe-"));
      expect(probes).toHaveLength(4);
      return probes;
    });
    for (const d of dead) {
      expect(d.lastError).toMatch(
        /^Error: destination refused: .+ is not a public address \(CORQ_PUSH_ALLOW_PRIVATE\)$/,
      );
    }
    expect(receiver.deliveries).toEqual([]);
  });

  it("refuses loopback as an alert's URL at PUT (400, nothing written) and when sending one", async () => {
    const port = new URL(receiver.url).port;
    for (const url of [`http://127.0.0.1:${port}/`, `http://localhost:${port}/`, `http://0x7f.1:${port}/`]) {
      const refused = await api("PUT", "/alerts/probe", { body: { url, on: ["key.dead"] } });
      expect(refused.status, url).toBe(400);
      expect(refused.type).toContain("application/problem+json");
      expect(refused.json).toMatchObject({
        errors: [{ path: "url", message: expect.stringContaining("is not a public address") }],
      });
    }
    expect((await api("GET", "/alerts")).json).toEqual({ alerts: [] });
    // made where private networks are allowed: the Worker refuses it when sending
    const allowing = createCorq({ databaseUrl: state.stack.databaseUrl, pushAllowPrivate: true });
    try {
      await allowing.putAlert("probe", { url: `http://127.0.0.1:${port}/`, on: ["horizon.held"], heldOverMs: 1 });
    } finally {
      await allowing.close();
    }
    const held = await state.db.connect();
    try {
      await held.query("BEGIN");
      await held.query("SELECT pg_current_xact_id()");
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect((await api("POST", "/alerts/check")).json).toMatchObject({ sent: 0, retrying: 1 });
    } finally {
      await held.query("ROLLBACK");
      held.release();
    }
    const [probe] = (await api("GET", "/alerts")).json.alerts;
    expect(probe.lastSend).toMatchObject({
      type: "horizon.held",
      sentAt: null,
      retrying: true,
      error: expect.stringMatching(/^destination refused: .+ is not a public address \(CORQ_PUSH_ALLOW_PRIVATE\)$/),
    });
    expect(receiver.deliveries).toEqual([]);
  });
});
