// Retention through the real Worker: the deploy's policy from CORQ_RETENTION_*, read and set over
// HTTP (a PUT stands; bad bodies are 4xx problem+json and change nothing), the cron running a
// pass by itself, POST /retention/run, and a rewind below the horizon answered 409 retained_away.
import { describe, expect, it } from "vitest";
import { createClient } from "../../src/client.js";
import { eventually, useStack } from "../helpers/stack.js";

const DAY = 86_400_000;
const { state, api } = useStack({
  vars: { CORQ_RETENTION_MAX_AGE_MS: String(7 * DAY), CORQ_RETENTION_STREAMS: "retained-, audit-" },
});

const count = async (sql: string, params: unknown[] = []) =>
  (await state.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params)).rows[0]?.n;

describe("retention over HTTP", () => {
  it("starts from the deploy's option; a PUT stands; bad bodies are refused and change nothing", async () => {
    expect(await api("GET", "/retention")).toMatchObject({
      status: 200,
      json: { maxAgeMs: 7 * DAY, streams: ["retained-", "audit-"], horizon: null },
    });
    const put = await api("PUT", "/retention", { body: { maxAgeMs: DAY, streams: ["retained-"] } });
    expect(put).toMatchObject({ status: 200, json: { maxAgeMs: DAY, streams: ["retained-"], horizon: null } });
    // each request is an invocation of its own with the same option: the PUT stands
    expect((await api("GET", "/retention")).json).toEqual({ maxAgeMs: DAY, streams: ["retained-"], horizon: null });

    for (const body of [
      { maxAgeMs: 0 },
      { maxAgeMs: -5 },
      { maxAgeMs: 1.5 },
      { maxAgeMs: "1000" },
      {},
      { streams: ["retained-"] },
      { maxAgeMs: DAY, streams: [] },
      { maxAgeMs: DAY, streams: [""] },
      { maxAgeMs: DAY, streams: "retained-" },
      { maxAgeMs: DAY, keep: true },
      [],
      "{",
    ]) {
      const refused = await api("PUT", "/retention", { body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.type).toContain("application/problem+json");
      expect(refused.json).toMatchObject({ type: "urn:corq:problem:invalid_input", status: 400 });
    }
    const text = await api("PUT", "/retention", {
      body: '{"maxAgeMs":null}',
      headers: { "content-type": "text/plain" },
    });
    expect(text.status).toBe(415);
    expect((await api("PUT", "/retention", { body: { maxAgeMs: null }, token: null })).status).toBe(401);
    expect((await api("GET", "/retention")).json).toEqual({ maxAgeMs: DAY, streams: ["retained-"], horizon: null });
  });

  it("the cron removes what is old and advanced past; a rewind below the horizon is 409 retained_away", async () => {
    const appended = await api("POST", "/streams/retained-1/events", {
      body: {
        events: [
          { name: "Registered", data: { name: "R" } },
          { name: "Noted", data: {} },
        ],
      },
    });
    expect(appended.status).toBe(201);
    const positions = appended.json.positions as number[];
    const kept = await api("POST", "/streams/visitor-kept/events", {
      body: { events: [{ name: "Registered", data: { name: "K" } }] },
    });
    expect(kept.status).toBe(201);
    expect((await api("POST", "/advance")).status).toBe(200);
    await eventually(async () => expect(await count("corq.queue")).toBe(0));
    await state.db.query("UPDATE corq.events SET created_at = now() - interval '2 days'");

    await state.stack.runCron();
    const horizon = Math.max(...positions) + 1;
    await eventually(async () => expect((await api("GET", "/retention")).json).toMatchObject({ horizon }));
    expect(await count("corq.events WHERE stream = 'retained-1'")).toBe(0);
    expect(await count("corq.events WHERE stream = 'visitor-kept'")).toBe(1);
    expect(await api("POST", "/retention/run")).toMatchObject({
      status: 200,
      json: { deleted: 0, horizon, done: true },
    });
    // the typed client (corqueue/client) says the same
    const client = createClient({ url: state.stack.url, token: state.stack.adminToken });
    expect(await client.retention()).toEqual({ maxAgeMs: DAY, streams: ["retained-"], horizon });
    expect(await client.runRetention()).toEqual({ deleted: 0, horizon, done: true });
    expect(await client.setRetention({ maxAgeMs: DAY, streams: ["retained-"] })).toMatchObject({ horizon });

    const queued = await count("corq.queue");
    const refused = await api("POST", "/subscriptions/visitor-directory/rewind", { body: { to: positions[0] } });
    expect(refused).toMatchObject({
      status: 409,
      json: { type: "urn:corq:problem:retained_away", status: 409, horizon },
    });
    expect(refused.type).toContain("application/problem+json");
    expect(await count("corq.queue")).toBe(queued);
  });
});
