// startServe({ basePath: "/corq" }): the Node runtime behind a proxy that forwards /corq/* whole.
// The API and dashboard answer under the prefix only, and an append under it wakes the consumers
// at once (the safety net is an hour here: nothing else would deliver it).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startServe, type RunningServe } from "../../src/node/serve.js";
import { createTestDatabase } from "../helpers/database.js";
import { postForm, sessionCookie } from "../helpers/dashboardForm.js";
import { eventually } from "../helpers/stack.js";

const TOKEN = "serve-mount-admin-token-0123456789abcdef";
const handled: string[] = [];
const state = {} as { serve: RunningServe; drop: () => Promise<void>; url: string };

beforeAll(async () => {
  const database = await createTestDatabase(inject("postgresUrl"));
  state.drop = database.drop;
  state.url = database.url;
  state.serve = await startServe({
    subscriptions: [
      {
        name: "order-mail",
        events: ["OrderPlaced"],
        key: "stream",
        async handle(events) {
          handled.push(...events.map((e) => e.stream));
        },
      },
    ],
    env: { DATABASE_URL: database.url, CORQ_ADMIN_TOKEN: TOKEN, CORQ_SAFETY_NET_MS: "3600000" },
    port: 0,
    basePath: "/corq",
    log: () => undefined,
  });
}, 60_000);

afterAll(async () => {
  await state.serve?.stop();
  await state.drop?.();
});

const call = (method: string, path: string, body?: unknown) =>
  fetch(`${state.serve.url}${path}`, {
    method,
    redirect: "manual",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe("serve under /corq", () => {
  it("answers under the prefix only", async () => {
    expect(await (await call("GET", "/corq/health")).json()).toEqual({ ok: true, db: "ok" });
    expect((await call("GET", "/corq/stats")).status).toBe(200);
    const outside = await call("GET", "/stats");
    expect(outside.status).toBe(404);
    expect((await outside.json()).detail).toMatch(/^corq is mounted at \/corq: \/stats is outside it/);
  });

  it("wakes its consumers on an append under the prefix", async () => {
    const appended = await call("POST", "/corq/streams/order-1/events", {
      events: [{ name: "OrderPlaced", data: {} }],
    });
    expect(appended.status).toBe(201);
    await eventually(async () => expect(handled).toEqual(["order-1"]), { timeoutMs: 10_000, intervalMs: 20 });
  });

  it("logs in to the dashboard under the prefix", async () => {
    const loggedIn = await postForm(state.serve.url, "/corq/login", { token: TOKEN });
    expect(loggedIn.status).toBe(303);
    expect(loggedIn.headers.get("location")).toBe("/corq");
    expect(loggedIn.headers.get("set-cookie")).toMatch(/; Path=\/corq(;|$)/);
    const page = await fetch(`${state.serve.url}/corq`, { headers: { cookie: sessionCookie(loggedIn) } });
    expect(page.status).toBe(200);
    const urls = [...(await page.text()).matchAll(/\s(?:href|src|action)="([^"]*)"/g)].map((m) => m[1]);
    expect(urls).toContain("/corq/ui/subscriptions/order-mail");
    for (const url of urls) expect(url).toMatch(/^\/corq(\/|$|\?)/);
  });

  it("refuses to start with a malformed basePath", async () => {
    await expect(
      startServe({
        subscriptions: [],
        env: { DATABASE_URL: state.url },
        port: 0,
        basePath: "/corq/",
        log: () => undefined,
      }),
    ).rejects.toThrow(/^basePath: must not end with "\/"/);
  });
});
