// CORQ_ROLE splits `npm run serve` in two: an API process (HTTP API and dashboard, no
// consumers) and worker processes (advancer and consumers, no HTTP). An append over HTTP to the
// API process is handled by a worker, woken by the API's NOTIFY, not by its safety net.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createTestDatabase } from "../helpers/database.js";
import { startServeProcess, type ServeProcess } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";

const TOKEN = "serve-test-admin-token-0123456789abcdef";
const state = {} as { api: ServeProcess; worker: ServeProcess; raw: pg.Pool; drop: () => Promise<void> };

beforeAll(async () => {
  const database = await createTestDatabase(inject("postgresUrl"));
  state.drop = database.drop;
  state.raw = new pg.Pool({ connectionString: database.url, max: 2 });
  const start = (role: string) =>
    startServeProcess({
      databaseUrl: database.url,
      entry: "test/serve/recordingServe.ts",
      // an hour's safety net: only a NOTIFY can wake the worker in time
      env: { CORQ_ADMIN_TOKEN: TOKEN, CORQ_ROLE: role, CORQ_SAFETY_NET_MS: "3600000" },
    });
  state.worker = await start("worker");
  state.api = await start("api");
}, 90_000);

afterAll(async () => {
  expect([await state.api?.stop(), await state.worker?.stop()]).toEqual([0, 0]);
  await state.raw?.end();
  await state.drop?.();
});

describe("serve roles: an API process and a worker", () => {
  it("the worker serves no HTTP; the API process answers", async () => {
    expect(state.worker.url).toBe("");
    expect((await fetch(`${state.api.url}/health`)).status).toBe(200);
  });

  it("appends over HTTP to the API process are handled by the worker, at once", async () => {
    for (const stream of ["role-1", "role-2", "role-3"]) {
      const response = await fetch(`${state.api.url}/streams/${stream}/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ events: [{ name: "E", data: {} }] }),
      });
      expect(response.status).toBe(201);
    }
    await eventually(
      async () => {
        const { rows } = await state.raw.query(
          "SELECT key, pid FROM serve_handled WHERE key LIKE 'role-%' ORDER BY key",
        );
        expect(rows).toEqual(["role-1", "role-2", "role-3"].map((key) => ({ key, pid: state.worker.child.pid })));
      },
      { timeoutMs: 10_000, intervalMs: 20 },
    );
  });
});
