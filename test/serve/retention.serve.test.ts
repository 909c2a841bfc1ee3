// Retention in `npm run serve`: the policy from CORQ_RETENTION_*, passes run by the process's own
// loop (every CORQ_RETENTION_EVERY_MS), the routes as on Workers; a malformed policy refuses to start.
import { describe, expect, inject, it } from "vitest";
import { createTestDatabase } from "../helpers/database.js";
import { startServeProcess, useRecordingServe } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";

const TOKEN = "serve-test-admin-token-0123456789abcdef";
const DAY = 86_400_000;
const state = useRecordingServe({
  CORQ_ADMIN_TOKEN: TOKEN,
  CORQ_SAFETY_NET_MS: "200",
  CORQ_RETENTION_EVERY_MS: "1000",
  CORQ_RETENTION_MAX_AGE_MS: String(DAY),
  CORQ_RETENTION_STREAMS: "old-",
});

const api = async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${state.serve.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, json: await response.json() };
};

const streamEvents = async (stream: string) =>
  (await state.raw.query("SELECT count(*)::int AS n FROM corq.events WHERE stream = $1", [stream])).rows[0].n;

describe("serve: retention", () => {
  it("its loop removes what is old and handled; the routes answer as on Workers", async () => {
    expect(await api("GET", "/retention")).toEqual({
      status: 200,
      json: { maxAgeMs: DAY, streams: ["old-"], horizon: null },
    });
    const appended = await api("POST", "/streams/old-1/events", {
      events: [
        { name: "E", data: {} },
        { name: "E", data: {} },
      ],
    });
    expect(appended.status).toBe(201);
    expect((await api("POST", "/streams/young-1/events", { events: [{ name: "E", data: {} }] })).status).toBe(201);
    const positions = appended.json.positions as number[];
    await eventually(async () =>
      expect((await state.raw.query("SELECT count(*)::int AS n FROM serve_handled")).rows[0].n).toBe(3),
    );
    await state.raw.query("UPDATE corq.events SET created_at = now() - interval '2 days'");
    // nothing calls a pass: the process's own loop does
    const horizon = Math.max(...positions) + 1;
    await eventually(async () => expect((await api("GET", "/retention")).json.horizon).toBe(horizon), {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    expect(await streamEvents("old-1")).toBe(0);
    expect(await streamEvents("young-1")).toBe(1);
    expect(await api("POST", "/retention/run")).toEqual({ status: 200, json: { deleted: 0, horizon, done: true } });
    expect(await api("POST", "/subscriptions/recorded/rewind", { to: positions[0] })).toMatchObject({
      status: 409,
      json: { type: "urn:corq:problem:retained_away", horizon },
    });
  });

  it("refuses to start with a malformed retention policy", async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    try {
      const started = startServeProcess({
        databaseUrl: database.url,
        entry: "test/serve/recordingServe.ts",
        env: { CORQ_ADMIN_TOKEN: TOKEN, CORQ_RETENTION_MAX_AGE_MS: "7d" },
      });
      await expect(started).rejects.toThrow(/CORQ_RETENTION_MAX_AGE_MS/);
    } finally {
      await database.drop();
    }
  });
});
