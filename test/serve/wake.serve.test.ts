// `npm run serve` is woken, not polling: with the safety net set to an hour, what an append's
// NOTIFY (or an API write) wakes is handled at once, an append that did not NOTIFY waits for
// the next wake-up, an advance() by a library with notify: true wakes it for what that advance
// enqueued, and an idle process sends no statements at all.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCorq, type Corq } from "../../src/index.js";
import { useRecordingServe } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";
import { sleep } from "../helpers/corq.js";
import { useReceiver } from "../helpers/receiver.js";

const TOKEN = "serve-test-admin-token-0123456789abcdef";
const state = useRecordingServe({
  CORQ_SAFETY_NET_MS: "3600000",
  CORQ_ADMIN_TOKEN: TOKEN,
  CORQ_PUSH_ALLOW_PRIVATE: "true",
});
const hook = useReceiver();
const corqs = {} as { quiet: Corq; loud: Corq };

beforeAll(() => {
  corqs.quiet = createCorq({ databaseUrl: state.url });
  corqs.loud = createCorq({ databaseUrl: state.url, notify: true });
});

afterAll(async () => {
  await corqs.quiet?.close();
  await corqs.loud?.close();
});

const api = (method: string, path: string, body?: unknown) =>
  fetch(`${state.serve.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const handled = async (stream: string) =>
  (await state.raw.query("SELECT count(*)::int AS n FROM serve_handled WHERE key = $1", [stream])).rows[0].n;

const handledSoon = (stream: string) =>
  eventually(async () => expect(await handled(stream)).toBe(1), { timeoutMs: 10_000, intervalMs: 20 });

describe("serve: woken by NOTIFY, not polling", () => {
  it("handles an append over HTTP at once: the append's NOTIFY wakes the consumers", async () => {
    const response = await api("POST", "/streams/http-1/events", { events: [{ name: "E", data: {} }] });
    expect(response.status).toBe(201);
    await handledSoon("http-1");
  });

  it("an append from the library wakes it with notify: true; without, it waits for the next wake-up", async () => {
    await corqs.quiet.append("quiet-1", [{ name: "E", data: {} }]);
    await sleep(1500);
    expect(await handled("quiet-1")).toBe(0); // nothing polls
    await corqs.loud.append("loud-1", [{ name: "E", data: {} }]);
    await handledSoon("loud-1");
    await handledSoon("quiet-1"); // the advance the NOTIFY woke took it along
  });

  it("an API write wakes it too: a resumed subscription is consumed at once", async () => {
    expect((await api("POST", "/subscriptions/recorded/pause")).status).toBe(200);
    await corqs.loud.append("paused-1", [{ name: "E", data: {} }]);
    await sleep(500);
    expect(await handled("paused-1")).toBe(0);
    expect((await api("POST", "/subscriptions/recorded/resume")).status).toBe(200);
    await handledSoon("paused-1");
  });

  it("sends no statements while idle", async () => {
    await sleep(1000); // the last test's wake-ups have settled
    const { rows } = await state.raw.query("SELECT now() AS since");
    await sleep(3000);
    const busy = await state.raw.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = 'corq-serve' AND query_start > $1`,
      [rows[0].since],
    );
    expect(busy.rows[0].n).toBe(0);
    // and it is the serve process that was watched: its connections are there
    const connections = await state.raw.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'corq-serve'",
    );
    expect(connections.rows[0].n).toBeGreaterThanOrEqual(2);
  });

  it("an advance() by a library with notify: true wakes it for what that advance enqueued (a push subscription's)", async () => {
    const created = await api("PUT", "/subscriptions/pushed", {
      events: ["Pushed"],
      from: "now",
      deliver: { url: hook.receiver.url },
    });
    expect(created.status).toBe(201);
    hook.secret = ((await created.json()) as { secret: string }).secret;
    await sleep(1500); // the wake-ups of that write have settled (its advance, the horizon's re-checks)
    await corqs.quiet.append("pushed-1", [{ name: "Pushed", data: {} }]);
    await sleep(1000);
    expect(hook.receiver.deliveries).toHaveLength(0); // nobody was told
    // the library enqueues it (a push subscription: every advancer takes those): serve hears "ready"
    expect(await corqs.loud.advance()).toMatchObject({ pushed: 1 });
    await eventually(async () => expect(hook.receiver.deliveries.map((d) => d.key)).toEqual(["pushed-1"]), {
      timeoutMs: 5000,
      intervalMs: 20,
    });
  });
});
