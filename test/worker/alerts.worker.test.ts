// Alerts over HTTP against the real stack — the Worker in workerd, its pass started by the cron
// through SELF; and `npm run serve`, its pass run by the process's loop every second
// (vitest.config.ts runs this file on both): a dead key's alert arrives signed, once; put,
// replace, list, delete; bad input is 400 problem+json and changes nothing; admin only; the CLI;
// the dashboard's list with each alert's last send.
import { describe, expect, it } from "vitest";
import { run } from "../../cli/run.js";
import { sleep } from "../helpers/corq.js";
import { logIn } from "../helpers/dashboardForm.js";
import { useReceiver } from "../helpers/receiver.js";
import { eventually, runtime, useStack } from "../helpers/stack.js";

// the local stack allows private destinations (CORQ_PUSH_ALLOW_PRIVATE): the receiver is on 127.0.0.1
const { state, api } = useStack();
const hook = useReceiver();

async function corq(args: string[], token = state.stack.adminToken) {
  let out = "";
  let err = "";
  const code = await run(args, {
    env: { CORQ_URL: state.stack.url, CORQ_TOKEN: token },
    out: { write: (text: string) => (out += text) },
    err: { write: (text: string) => (err += text) },
  });
  return { code, out, err };
}

const html = async (path: string, cookie: string) => {
  const response = await fetch(`${state.stack.url}${path}`, { headers: { cookie }, redirect: "manual" });
  return { status: response.status, body: await response.text() };
};

describe("alerts over HTTP", () => {
  it("PUT creates an alert (201, its secret once); a key that dies is one signed alert, sent by the cron or serve's loop", async () => {
    const created = await api("PUT", "/alerts/ops", { body: { url: hook.receiver.url, on: ["key.dead"] } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      name: "ops",
      url: hook.receiver.url,
      on: ["key.dead"],
      minIntervalMs: 600_000,
      sent: 0,
      lastSend: null,
      secret: expect.stringMatching(/^whsec_/),
    });
    hook.secret = created.json.secret;

    // a push subscription whose receiver is down (nothing listens on port 9): its key dies at the first try
    const doomed = { events: ["Doomed"], from: "now", maxAttempts: 1, deliver: { url: "http://127.0.0.1:9/closed" } };
    expect((await api("PUT", "/subscriptions/doomed", { body: doomed })).status).toBe(201);
    expect(
      (await api("POST", "/streams/doomed-1/events", { body: { events: [{ name: "Doomed", data: {} }] } })).status,
    ).toBe(201);
    const dead = await eventually(async () => {
      const { json } = await api("GET", "/dead-letters?subscription=doomed");
      expect(json.deadLetters).toHaveLength(1);
      return json.deadLetters[0];
    });

    // the Worker: the cron starts a pass (POST /alerts/check through SELF); serve: its loop, every second
    if (runtime === "worker") await state.stack.runCron();
    const delivery = await eventually(async () => {
      expect(hook.receiver.deliveries).toHaveLength(1);
      return hook.receiver.deliveries[0];
    });
    expect(delivery?.signatureValid).toBe(true);
    expect(delivery?.body).toEqual({
      type: "key.dead",
      subscription: "doomed",
      key: "doomed-1",
      position: dead.position,
      error: dead.lastError,
      at: dead.deadAt,
    });

    // once: the passes after it send nothing more
    if (runtime === "worker") {
      await state.stack.runCron();
      await state.stack.runCron();
    } else await sleep(2500);
    expect(await api("POST", "/alerts/check")).toMatchObject({
      status: 200,
      json: { sent: 0, retrying: 0, failed: 0 },
    });
    expect(hook.receiver.deliveries).toHaveLength(1);
    const listed = await api("GET", "/alerts");
    expect(listed.json.alerts).toEqual([
      expect.objectContaining({
        name: "ops",
        sent: 1,
        failed: 0,
        lastSend: {
          type: "key.dead",
          subscription: "doomed",
          key: "doomed-1",
          at: dead.deadAt,
          sentAt: expect.any(String),
          attempts: 1,
          error: null,
          retrying: false,
        },
      }),
    ]);
    expect(listed.json.alerts[0].secret).toBeUndefined();
  });

  it("PUT again replaces it (200, no secret); DELETE is 204, then 404", async () => {
    const replaced = await api("PUT", "/alerts/ops", {
      body: { url: hook.receiver.url, on: ["key.dead", "subscription.lag"], lagOver: 50, minIntervalMs: 60_000 },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.json).toMatchObject({ name: "ops", on: ["key.dead", "subscription.lag"], lagOver: 50, sent: 1 });
    expect(replaced.json.secret).toBeUndefined();
    expect((await api("PUT", "/alerts/spare", { body: { url: hook.receiver.url, on: ["horizon.held"] } })).status).toBe(
      201,
    );
    expect((await api("GET", "/alerts")).json.alerts.map((a: { name: string }) => a.name)).toEqual(["ops", "spare"]);
    expect((await api("DELETE", "/alerts/spare")).status).toBe(204);
    const gone = await api("DELETE", "/alerts/spare");
    expect(gone.status).toBe(404);
    expect(gone.type).toContain("application/problem+json");
    expect(gone.json).toMatchObject({ type: "urn:corq:problem:unknown_alert" });
    expect((await api("GET", "/alerts")).json.alerts.map((a: { name: string }) => a.name)).toEqual(["ops"]);
  });

  it("bad input is 400 problem+json (415 for a body that is not JSON) and changes nothing", async () => {
    const before = (await api("GET", "/alerts")).json;
    const url = hook.receiver.url;
    const bodies: [unknown, string][] = [
      [{ url, on: ["key.died"] }, "on.0"],
      [{ url, on: [] }, "on"],
      [{ url }, "on"],
      [{ url, on: ["subscription.lag"], lagOver: 0 }, "lagOver"],
      [{ url, on: ["horizon.held"], heldOverMs: 0 }, "heldOverMs"],
      [{ url, on: ["key.dead"], minIntervalMs: 0 }, "minIntervalMs"],
      [{ url, on: ["key.dead"], minIntervalMs: 1.5 }, "minIntervalMs"],
      [{ url, on: ["key.dead"], lagOver: 5 }, "lagOver"],
      [{ url: "file:///etc/passwd", on: ["key.dead"] }, "url"],
      [{ url, on: ["key.dead"], every: "minute" }, ""],
      ["[]", ""],
      ["{", ""],
    ];
    for (const [body, path] of bodies) {
      const refused = await api("PUT", "/alerts/ops", { body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.type).toContain("application/problem+json");
      if (path) expect(refused.json.errors.map((e: { path: string }) => e.path)).toContain(path);
    }
    const badName = await api("PUT", "/alerts/not%20a%20name", { body: { url, on: ["key.dead"] } });
    expect(badName).toMatchObject({ status: 400, json: { errors: [{ path: "name" }] } });
    const notJson = await api("PUT", "/alerts/ops", { body: "on=key.dead", headers: { "content-type": "text/plain" } });
    expect(notJson.status).toBe(415);
    expect((await api("GET", "/alerts")).json).toEqual(before);
  });

  it("admin only: read, operate and append tokens get 403 (the CLI exit 4), no token 401", async () => {
    const before = (await api("GET", "/alerts")).json;
    for (const scope of ["read", "operate", "append"]) {
      const token = (await api("POST", "/tokens", { body: { name: `alerts ${scope}`, scopes: [scope] } })).json.token;
      for (const [method, path, body] of [
        ["GET", "/alerts", undefined],
        ["PUT", "/alerts/ops", { url: hook.receiver.url, on: ["advance.failed"] }],
        ["DELETE", "/alerts/ops", undefined],
        ["POST", "/alerts/check", undefined],
      ] as const) {
        const refused = await api(method, path, { token, body });
        expect(refused.status, `${scope} ${method} ${path}`).toBe(403);
        expect(refused.json).toMatchObject({ type: "urn:corq:problem:forbidden" });
      }
      expect((await corq(["alerts", "list"], token)).code).toBe(4);
    }
    expect((await api("GET", "/alerts", { token: null })).status).toBe(401);
    expect((await api("GET", "/alerts")).json).toEqual(before);
  });

  it("corq alerts put | list | delete", async () => {
    const put = await corq([
      "alerts",
      "put",
      "cli-made",
      `${hook.receiver.url}?token=abc`,
      "--on",
      "key.dead,horizon.held",
      "--held-over",
      "120000",
      "--min-interval",
      "30000",
    ]);
    expect(put).toMatchObject({ code: 0, err: "" });
    expect(put.out).toMatch(/^alert cli-made created; signing secret: whsec_\S+\nshown only now\n$/);
    const again = await corq(["alerts", "put", "cli-made", hook.receiver.url, "--on", "key.dead"]);
    expect(again.out).toContain("alert cli-made replaced");
    const list = await corq(["alerts", "list"]);
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/^name\s+on\s+url\s+sent\s+failed\s+last send\n/);
    expect(list.out).toMatch(/\ncli-made\s+key\.dead\s+http:\/\/127\.0\.0\.1:\d+\/hook\s+0\s+0\n/);
    expect(list.out).toMatch(
      /\nops\s+key\.dead, subscription\.lag > 50\s+\S+\s+1\s+0\s+key\.dead doomed\/doomed-1 sent /,
    );
    const json = JSON.parse((await corq(["alerts", "list", "--json"])).out);
    expect(json.alerts.map((a: { name: string }) => a.name)).toEqual(["cli-made", "ops"]);

    for (const args of [
      ["alerts", "put", "x", hook.receiver.url],
      ["alerts", "put", "x", "--on", "key.dead"],
      ["alerts", "list", "--on", "key.dead"],
      ["alerts", "fire"],
      ["stats", "--on", "key.dead"],
      ["alerts", "put", "x", hook.receiver.url, "--on", "key.dead", "--min-interval", "0"],
    ]) {
      const refused = await corq(args);
      expect({ args, code: refused.code, out: refused.out }).toEqual({ args, code: 2, out: "" });
    }
    const bad = await corq(["alerts", "put", "x", hook.receiver.url, "--on", "key.died"]);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain("on.0");

    expect(await corq(["alerts", "delete", "cli-made"])).toEqual({ code: 0, out: "deleted alert cli-made\n", err: "" });
    expect((await corq(["alerts", "delete", "cli-made"])).code).toBe(5);
  });

  it("the dashboard lists each alert with its last send; below admin (read and operate), receivers are scheme and host only", async () => {
    // a relay's URL (Zapier, Pipedream, n8n) carries its capability in the path
    const origin = new URL(hook.receiver.url).origin;
    const relay = `${origin}/hooks/catch/4711/capability-s3cret/?token=abc`;
    await api("PUT", "/alerts/with-token", { body: { url: relay, on: ["key.dead"] } });
    const receivers = (body: string) =>
      [...body.matchAll(/data-label="Receiver">([^<]*)</g)].map((m) => (m[1] ?? "").replaceAll("&amp;", "&"));

    const admin = await html("/ui/alerts", await logIn(state.stack.url, state.stack.adminToken));
    expect(admin.status).toBe(200);
    expect(admin.body).toContain('data-alert="ops"');
    expect(admin.body).toContain("key.dead, subscription.lag over 50 events");
    expect(admin.body).toMatch(/<b>key\.dead<\/b> doomed \/ doomed-1<br\/?>.*sent.*<time datetime="[^"]+Z">/s);
    expect(receivers(admin.body)).toEqual([hook.receiver.url, relay]);

    for (const scope of ["read", "operate"]) {
      const token = (await api("POST", "/tokens", { body: { name: `alerts ${scope}`, scopes: [scope] } })).json.token;
      const page = await html("/ui/alerts", await logIn(state.stack.url, token));
      expect(page.status).toBe(200);
      expect(page.body).toContain('data-alert="with-token"');
      expect({ scope, receivers: receivers(page.body) }).toEqual({ scope, receivers: [origin, origin] });
      for (const secret of ["capability-s3cret", "token=abc", "/hooks/catch"]) expect(page.body).not.toContain(secret);
    }
    await api("DELETE", "/alerts/with-token");
  });
});
