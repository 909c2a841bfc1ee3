// corq mounted at /corq in a user's own Worker (test/worker/fixtures/mountedWorker.ts: a Hono app
// with routes of its own), in workerd on real Postgres: the user's routes answer, and under the
// prefix everything of corq's works — the API, the dashboard (links, assets, forms, redirects,
// the cookie's Path), the client and the CLI — and its invocations of itself (the consumers a
// dispatch fans out, the cron's retention pass) reach /corq through SELF, not the user's root.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { run } from "../../cli/run.js";
import { createClient } from "../../src/client.js";
import { postForm, sessionCookie } from "../helpers/dashboardForm.js";
import { eventually, useStack } from "../helpers/stack.js";
import { app } from "./fixtures/mountedWorker.js";

const { state, api } = useStack({
  // two consumers at once: a dispatch with two subscriptions ready starts one through SELF
  vars: { CORQ_CONCURRENCY: "4" },
  worker: { entrypoint: fileURLToPath(new URL("./fixtures/mountedWorker.ts", import.meta.url)), app },
});

/** What the user's router was asked for so far (this isolate), "METHOD /path". */
const seen = async (): Promise<string[]> => (await fetch(`${state.stack.url}/seen`)).json();

/** corq's own invocations (a consumer, a dispatch, a retention pass) the user's router saw. */
const invocations = async () => (await seen()).filter((r) => /^POST .*\/(consume|dispatch|retention)\b/.test(r));

const get = (path: string, cookie?: string) =>
  fetch(`${state.stack.url}${path}`, { redirect: "manual", headers: cookie ? { cookie } : {} });

/** Every href, src and form action of a page (entities as the dashboard writes them). */
const urlsOf = (html: string) =>
  [...html.matchAll(/\s(href|src|action)="([^"]*)"/g)].map((m) => ({
    attribute: m[1],
    url: (m[2] ?? "").replaceAll("&amp;", "&"),
  }));

describe("corq mounted at /corq beside the user's routes", () => {
  it("answers the user's routes, and corq's only under the prefix", async () => {
    expect(await (await get("/")).text()).toBe("my app");
    expect((await get("/orders")).status).toBe(200);
    expect(await (await get("/corq/health")).json()).toEqual({ ok: true, db: "ok" });
    // the root is the user's: no corq there
    expect((await get("/health")).status).toBe(404);
    expect((await api("GET", "/stats")).status).toBe(404);
    expect((await api("GET", "/corq/stats")).status).toBe(200);
    const metrics = await api("GET", "/corq/metrics");
    expect(metrics.status).toBe(200);
    const unknown = await api("GET", "/corq/nope");
    expect(unknown.json).toMatchObject({ status: 404, detail: "no route for GET /corq/nope" });
    const openapi = await api("GET", "/corq/openapi.json");
    expect(openapi.json.servers).toEqual([{ url: "/corq" }]);
    // Hono's app.mount strips the prefix: corq says how to hand it the whole path
    const stripped = await api("GET", "/stripped/health");
    expect(stripped.status).toBe(404);
    expect(stripped.json.detail).toMatch(/^corq is mounted at \/corq: \/health is outside it/);
  });

  it("fans consumers out to /corq/consume and runs the cron's retention pass at /corq/retention/run", async () => {
    // appended while paused, then resumed behind corq's back: the cron dispatches (or the append's
    // background kick, if it ran after the resume) — either way a dispatcher with two subscriptions
    // ready consumes one itself and starts a consumer for the other through SELF
    const before = (await invocations()).length;
    for (const name of ["order-mail", "order-stock"])
      expect((await api("POST", `/corq/subscriptions/${name}/pause`)).status).toBe(200);
    const appended = await api("POST", "/corq/streams/order-1/events", {
      body: { events: [{ name: "OrderPlaced", data: { total: 1 } }] },
    });
    expect(appended.status).toBe(201);
    await state.db.query("UPDATE corq.subscriptions SET paused = false WHERE name IN ('order-mail', 'order-stock')");
    await state.stack.runCron();
    await eventually(async () => {
      for (const name of ["order-mail", "order-stock"])
        expect((await api("GET", `/corq/subscriptions/${name}`)).json, name).toMatchObject({ pending: 0, lag: 0 });
    });
    // both handlers ran: one in the dispatcher's invocation, the other in one it started through
    // SELF (a batch is recorded for the dashboard after its ack commits: waited for too)
    await eventually(async () => {
      const { rows } = await state.db.query(
        `SELECT s.name FROM corq.activity a JOIN corq.subscriptions s ON s.id = a.subscription_id
         WHERE a.outcome = 'acked' AND a.key = 'order-1' ORDER BY s.name`,
      );
      expect(rows.map((r) => r.name)).toEqual(["order-mail", "order-stock"]);
    });
    await eventually(async () => {
      const since = (await invocations()).slice(before);
      expect(since).toContainEqual(expect.stringMatching(/^POST \/corq\/consume\/order-(mail|stock)$/));
      expect(since).toContain("POST /corq/retention/run");
    });
    // and never one to the user's root
    for (const request of await invocations()) expect(request).toMatch(/^POST \/corq\//);
  });

  it("serves the dashboard under /corq: login, redirects, the cookie's Path, and every URL a page references", async () => {
    const login = await get("/corq");
    expect(login.status).toBe(302);
    expect(login.headers.get("location")).toBe("/corq/login");
    const loggedIn = await postForm(state.stack.url, "/corq/login", { token: state.stack.adminToken });
    expect(loggedIn.status).toBe(303);
    expect(loggedIn.headers.get("location")).toBe("/corq");
    expect(loggedIn.headers.get("set-cookie")).toMatch(/; Path=\/corq(;|$)/);
    const cookie = sessionCookie(loggedIn);

    // the pages a visitor reaches from the overview, and every URL on them
    const pages = ["/corq/login", "/corq", "/corq/ui/subscriptions/order-mail", "/corq/ui/streams/order-1"];
    const checked = new Set<string>();
    for (const page of pages) {
      // the login page only without a session (with one it sends the browser to the overview)
      const response = await get(page, page.endsWith("/login") ? undefined : cookie);
      expect(response.status, page).toBe(200);
      const urls = urlsOf(await response.text());
      expect(urls.length, page).toBeGreaterThan(2);
      for (const { attribute, url } of urls) {
        expect(url, `${attribute} on ${page}`).toMatch(/^\/corq(\/|$|\?)/);
        // form actions that POST are checked below; every other URL loads
        if (checked.has(url) || (attribute === "action" && /\/(logout|login|ui\/actions\/)/.test(url))) continue;
        checked.add(url);
        const loaded = await get(url, cookie);
        expect(loaded.status, `${url} (${attribute} on ${page})`).toBe(200);
      }
    }
    expect(checked).toContain("/corq/assets/corq.css");
    expect(checked).toContain("/corq/assets/corq.js");
    expect(checked).toContain("/corq/ui/dead-letters");

    // an action comes back under the prefix; a way back to the user's pages is refused
    const paused = await postForm(
      state.stack.url,
      "/corq/ui/actions/pause",
      { subscription: "order-mail", back: "/corq/ui/subscriptions/order-mail" },
      { cookie },
    );
    expect(paused.status).toBe(303);
    expect(paused.headers.get("location")).toBe("/corq/ui/subscriptions/order-mail?done=pause&count=0&of=order-mail");
    const resumed = await postForm(
      state.stack.url,
      "/corq/ui/actions/resume",
      { subscription: "order-mail" },
      { cookie },
    );
    expect(resumed.headers.get("location")).toBe("/corq?done=resume&count=0&of=order-mail");
    const outside = await postForm(
      state.stack.url,
      "/corq/ui/actions/pause",
      { subscription: "order-mail", back: "/orders" },
      { cookie },
    );
    expect(outside.status).toBe(400);
    expect(await outside.text()).toContain("back: must be a path on this site under /corq");
    expect((await api("GET", "/corq/subscriptions/order-mail")).json.paused).toBe(false);
    const search = await get("/corq/ui/streams?stream=order-1", cookie);
    expect(search.headers.get("location")).toBe("/corq/ui/streams/order-1");

    const loggedOut = await postForm(state.stack.url, "/corq/logout", {}, { cookie });
    expect(loggedOut.status).toBe(303);
    expect(loggedOut.headers.get("location")).toBe("/corq/login");
    expect(loggedOut.headers.get("set-cookie")).toMatch(/; Path=\/corq(;|$)/);
    expect((await get("/corq", cookie)).headers.get("location")).toBe("/corq/login");
  });

  it("is reached by the client and the CLI at http://…/corq", async () => {
    const client = createClient({ url: `${state.stack.url}/corq`, token: state.stack.adminToken });
    expect(await client.health()).toEqual({ ok: true, db: "ok" });
    await client.append("order-2", [{ name: "OrderPlaced", data: { total: 2 } }]);
    expect((await client.readStream("order-2")).events).toHaveLength(1);
    let out = "";
    const code = await run(["stats", "--json"], {
      env: { CORQ_URL: `${state.stack.url}/corq/`, CORQ_TOKEN: state.stack.adminToken },
      out: { write: (text: string) => (out += text) },
      err: { write: () => undefined },
    });
    expect(code).toBe(0);
    expect(JSON.parse(out).subscriptions.map((s: { name: string }) => s.name)).toEqual(
      expect.arrayContaining(["order-mail", "order-stock"]),
    );
  });
});
