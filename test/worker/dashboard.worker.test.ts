// The dashboard's HTTP surface in the real Worker on real Postgres: sessions, actions'
// redirects, response headers. (The pages themselves: test/browser.)
import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { logIn as logInAt, postForm } from "../helpers/dashboardForm.js";
import { useStack } from "../helpers/stack.js";

const { state, api } = useStack();

const post = (path: string, fields: Record<string, string>, cookie?: string) =>
  postForm(state.stack.url, path, fields, { cookie });
const logIn = (token = state.stack.adminToken) => logInAt(state.stack.url, token);

describe("dashboard actions", () => {
  it("come back to a path of this site only: a back link to another host is refused and nothing is done", async () => {
    const cookie = await logIn();
    const offsite = [
      "/.//evil.example",
      "/%2e//evil.example",
      "/..//evil.example",
      "//evil.example",
      "/\\evil.example",
      "/\t/evil.example",
      "https://evil.example/",
      "evil.example",
    ];
    for (const back of offsite) {
      const response = await post("/ui/actions/pause", { subscription: "greeter", back }, cookie);
      expect(response.status, back).toBe(400);
      expect(response.headers.get("location"), back).toBeNull();
      expect(await response.text()).toContain("back: must be a path on this site");
    }
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(false);

    const done = await post(
      "/ui/actions/pause",
      { subscription: "greeter", back: "/ui/dead-letters?subscription=greeter" },
      cookie,
    );
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/ui/dead-letters?subscription=greeter&done=pause&count=0&of=greeter");
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(true);
    await api("POST", "/subscriptions/greeter/resume");
  });
});

describe("dashboard sessions", () => {
  const page = (cookie: string) =>
    fetch(`${state.stack.url}/ui/dead-letters`, { headers: { cookie }, redirect: "manual" });

  it("logout ends that session only: its cookie, replayed, is refused; another session goes on", async () => {
    const first = await logIn();
    const second = await logIn();
    expect((await page(first)).status).toBe(200);
    const out = await post("/logout", {}, first);
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe("/login");

    const replayed = await page(first);
    expect(replayed.status).toBe(302);
    expect(replayed.headers.get("location")).toBe("/login");
    expect((await post("/ui/actions/pause", { subscription: "greeter", back: "/" }, first)).status).toBe(401);
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(false);
    expect((await page(second)).status).toBe(200);
  });
});

/** A GET with any Host header (fetch will not send a Host of its own choosing). */
function getWithHost(path: string, host: string): Promise<{ status: number; type: string; body: string }> {
  const { port } = new URL(state.stack.url);
  return new Promise((resolve, reject) => {
    request({ host: "127.0.0.1", port, path, headers: { host } }, (response) => {
      let body = "";
      response.on("data", (chunk) => (body += chunk));
      response.on("end", () =>
        resolve({ status: response.statusCode!, type: String(response.headers["content-type"]), body }),
      );
    })
      .on("error", reject)
      .end();
  });
}

describe("dashboard responses", () => {
  it("carry a content security policy, no framing, nosniff, no-store; the favicon is not a 401", async () => {
    const cookie = await logIn();
    const responses = {
      login: await fetch(`${state.stack.url}/login`, { redirect: "manual" }),
      overview: await fetch(`${state.stack.url}/`, { headers: { cookie } }),
      redirect: await fetch(`${state.stack.url}/`, { redirect: "manual" }),
      refusal: await fetch(`${state.stack.url}/ui/subscriptions/nope`, { headers: { cookie } }),
      action: await post("/ui/actions/pause", { subscription: "nope", back: "/" }, cookie),
    };
    for (const [name, response] of Object.entries(responses)) {
      const headers: Record<string, string> = {};
      response.headers.forEach((value, name) => {
        headers[name] = value;
      });
      expect(headers["content-security-policy"], name).toContain("frame-ancestors 'none'");
      expect(headers["content-security-policy"], name).toContain("default-src 'none'");
      expect(headers["content-security-policy"], name).toContain("script-src 'self'");
      expect(headers["x-frame-options"], name).toBe("DENY");
      expect(headers["x-content-type-options"], name).toBe("nosniff");
      expect(headers["cache-control"], name).toBe("no-store");
      expect(headers["strict-transport-security"], name).toBeUndefined(); // plain http here
    }
    expect(responses.overview.status).toBe(200);
    const css = await fetch(`${state.stack.url}/assets/corq.css`);
    expect(css.headers.get("x-content-type-options")).toBe("nosniff");
    expect(css.headers.get("cache-control")).toContain("max-age");

    const icon = await fetch(`${state.stack.url}/favicon.ico`);
    expect(icon.status).toBe(204);
    expect(icon.headers.get("content-security-policy")).toContain("default-src 'none'");
  });
});

describe("local stack (CORQ_LOCAL=true): DNS rebinding", () => {
  it("answers loopback Host names only; any other Host gets 421 problem+json", async () => {
    const { port } = new URL(state.stack.url);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) {
      expect((await getWithHost("/health", host)).status, host).toBe(200);
      expect((await getWithHost("/login", host)).status, host).toBe(200);
    }
    for (const host of [
      `evil.example:${port}`,
      "evil.example",
      `127.0.0.1.evil.example:${port}`,
      `localhost.evil.example:${port}`,
    ]) {
      for (const path of ["/health", "/login", "/stats"]) {
        const response = await getWithHost(path, host);
        expect(response.status, `${host} ${path}`).toBe(421);
        expect(response.type).toContain("application/problem+json");
        expect(JSON.parse(response.body)).toMatchObject({ status: 421, type: "urn:corq:problem:misdirected_request" });
      }
    }
  });
});

describe("dashboard pages: paging and times", () => {
  /** The page's HTML with a session (a redirect is not followed). */
  async function html(path: string, cookie: string) {
    const response = await fetch(`${state.stack.url}${path}`, { headers: { cookie }, redirect: "manual" });
    return { status: response.status, body: await response.text() };
  }
  const fromAttribute = (href: string) => href.replaceAll("&amp;", "&");
  const nextLink = (body: string, text: string) =>
    new RegExp(`<a href="([^"]+)" rel="next">${text}</a>`).exec(body)?.[1];

  it("pages the keys (50 a page) and the log tail (100 a page) by cursor, to the last page; a bad cursor is a 400 page", async () => {
    const cookie = await logIn();
    // a paused push subscription with 55 keys; 120 events in the log
    const put = await api("PUT", "/subscriptions/many-keys", {
      body: { events: ["Many"], key: "data.k", from: "now", deliver: { url: "http://127.0.0.1:9/" } },
    });
    expect(put.status).toBe(201);
    await api("POST", "/subscriptions/many-keys/pause");
    const events = Array.from({ length: 120 }, (_, i) => ({ name: "Many", data: { k: `k-${i % 55}` } }));
    expect((await api("POST", "/streams/many/events", { body: { events } })).status).toBe(201);
    await api("POST", "/advance");

    const keysSeen: string[] = [];
    const pageSizes: number[] = [];
    let path: string | undefined = "/ui/subscriptions/many-keys?status=ready";
    while (path !== undefined && pageSizes.length < 5) {
      const page = await html(path, cookie);
      expect(page.status, path).toBe(200);
      const keys = [...page.body.matchAll(/<tr data-key="([^"]+)"/g)].map((m) => m[1] ?? "");
      keysSeen.push(...keys);
      pageSizes.push(keys.length);
      const next = nextLink(page.body, "Next page");
      if (next !== undefined) expect(fromAttribute(next)).toContain("status=ready");
      path = next === undefined ? undefined : fromAttribute(next);
    }
    expect(pageSizes).toEqual([50, 5]);
    expect(new Set(keysSeen).size).toBe(55);

    const total = Number((await state.db.query("SELECT count(*) FROM corq.events")).rows[0].count);
    expect(total).toBeGreaterThan(100);
    const positions: number[] = [];
    path = "/ui/streams";
    while (path !== undefined && positions.length <= total) {
      const page = await html(path, cookie);
      expect(page.status, path).toBe(200);
      positions.push(
        ...[...page.body.matchAll(/data-label="Position">([\d,]+)</g)].map((m) => Number(m[1]?.replaceAll(",", ""))),
      );
      const next = nextLink(page.body, "Older events");
      path = next === undefined ? undefined : fromAttribute(next);
    }
    const { rows } = await state.db.query("SELECT position FROM corq.events ORDER BY position DESC");
    expect(positions).toEqual(rows.map((r: { position: string }) => Number(r.position)));

    for (const bad of [
      "/ui/streams?before=abc",
      "/ui/streams?before=0",
      `/ui/subscriptions/many-keys?after=${"x".repeat(1001)}`,
    ]) {
      const page = await html(bad, cookie);
      expect(page.status, bad).toBe(400);
      expect(page.body).toContain('role="alert"');
    }
  });

  it("names a subscription's stream filter on its page, and none where it takes every stream", async () => {
    const cookie = await logIn();
    const deliver = { url: "http://127.0.0.1:9/" };
    const filter = { streams: ["orders-", "refunds-"], from: "now", deliver };
    expect((await api("PUT", "/subscriptions/filtered", { body: filter })).status).toBe(201);
    expect((await api("PUT", "/subscriptions/unfiltered", { body: { from: "now", deliver } })).status).toBe(201);
    const filtered = await html("/ui/subscriptions/filtered", cookie);
    expect(filtered.status).toBe(200);
    expect(filtered.body).toMatch(/streams: <code>orders-, refunds-<\/code>/);
    const unfiltered = await html("/ui/subscriptions/unfiltered", cookie);
    expect(unfiltered.status).toBe(200);
    expect(unfiltered.body).toContain("events: <code>");
    expect(unfiltered.body).not.toContain("streams: <code>");
    for (const name of ["filtered", "unfiltered"])
      expect((await api("DELETE", `/subscriptions/${name}`)).status).toBe(204);
  });

  it("names a subscription's tenant, its weights and mismatches, and each key's tenant in a Tenant column; none of it without a tenant", async () => {
    const cookie = await logIn();
    const deliver = { url: "http://127.0.0.1:9/" };
    const common = { events: ["Tenanted"], key: "data.k", from: "now", deliver };
    const tenanted = {
      ...common,
      tenant: "data.t",
      tenantWeights: { acme: 3, beta: 2 },
      maxLeasedKeysPerTenant: 4,
      rateLimit: { events: 50, perMs: 1000, by: "tenant", burst: 10 },
    };
    expect((await api("PUT", "/subscriptions/tenanted", { body: tenanted })).status).toBe(201);
    expect((await api("PUT", "/subscriptions/untenanted", { body: common })).status).toBe(201);
    // paused: the keys stay as the advance made them (nothing listens at the receiver's port)
    for (const name of ["tenanted", "untenanted"]) await api("POST", `/subscriptions/${name}/pause`);
    const append = (events: { k: string; t?: string }[]) =>
      api("POST", "/streams/tenanted/events", { body: { events: events.map((data) => ({ name: "Tenanted", data })) } });
    expect((await append([{ k: "k-acme", t: "acme" }, { k: "k-beta", t: "beta" }, { k: "k-none" }])).status).toBe(201);
    await api("POST", "/advance");
    // k-acme keeps the tenant its first event gave it: this one is counted as a mismatch
    expect((await append([{ k: "k-acme", t: "beta" }])).status).toBe(201);
    await api("POST", "/advance");
    expect((await api("GET", "/subscriptions/tenanted")).json.tenantMismatched).toBe(1);

    const page = await html("/ui/subscriptions/tenanted", cookie);
    expect(page.status).toBe(200);
    expect(page.body).toMatch(/tenant: <code>data\.t<\/code>, tenant weights: <code>acme: 3, beta: 2<\/code>/);
    expect(page.body).toMatch(/<b>1<\/b>\s*<span>tenant mismatches<\/span>/);
    expect(page.body).toMatch(/<b>4<\/b>\s*<span>cap per tenant<\/span>/);
    expect(page.body).toMatch(
      /<b>\s*50 \/ 1,000 ms(<!-- -->)?\s*, burst 10\s*<\/b>\s*<span>rate limit by tenant<\/span>/,
    );
    // the limit as the receiver sees it, in the docs' words (docs/flow-control.md, "Rate limits")
    expect(page.body).toContain("deliveries start up to 10 at once, one every 20 ms after: at most 50 in any 1000 ms");
    expect(page.body).toContain("<th>Tenant</th>");
    const tenantOf = (key: string) =>
      new RegExp(`<tr data-key="${key}">.*?data-label="Tenant">(.*?)</td>`, "s").exec(page.body)?.[1];
    expect(tenantOf("k-acme")).toBe("acme");
    expect(tenantOf("k-beta")).toBe("beta");
    expect(tenantOf("k-none")).toContain("none named");

    const plain = await html("/ui/subscriptions/untenanted", cookie);
    expect(plain.status).toBe(200);
    expect(plain.body).toContain('<tr data-key="k-acme">');
    for (const absent of [
      "tenant: <code>",
      "tenant weights",
      "tenant mismatches",
      "cap per tenant",
      "rate limit by",
      "<th>Tenant</th>",
      'data-label="Tenant"',
    ])
      expect(plain.body).not.toContain(absent);
    for (const name of ["tenanted", "untenanted"])
      expect((await api("DELETE", `/subscriptions/${name}`)).status).toBe(204);
  });

  it("says the zone of every time it shows (UTC), absolute or as a tooltip", async () => {
    const cookie = await logIn();
    await api("POST", "/streams/zoned/events", { body: { events: [{ name: "Zoned", data: {} }] } });
    await state.db.query(
      `INSERT INTO corq.keys (subscription_id, key, pending, attempts, dead_at, last_error, failed_position)
       SELECT id, 'zoned-dead', 0, 5, now(), 'HTTP 503: {"error":"down"}', (SELECT max(position) FROM corq.events)
       FROM corq.subscriptions WHERE name = 'many-keys'
       ON CONFLICT DO NOTHING`,
    );
    for (const path of ["/ui/streams", "/ui/streams/zoned", "/ui/dead-letters", "/ui/timeline?minutes=15"]) {
      const { status, body } = await html(path, cookie);
      expect(status, path).toBe(200);
      const times = [...body.matchAll(/<time datetime="([^"]+)"([^>]*)>([^<]*)<\/time>/g)];
      expect(times.length, path).toBeGreaterThan(0);
      for (const [, datetime, attributes, text] of times) {
        expect(datetime, path).toMatch(/Z$/);
        expect(`${text}${attributes}`, path).toMatch(/\d\d:\d\d:\d\d(\.\d{3})? UTC/);
      }
    }
    const dead = await html("/ui/dead-letters", cookie);
    // the receiver's JSON answer, spaced between members (the units of JsonText)
    expect(dead.body.replace(/<[^>]+>/g, "")).toContain("HTTP 503: {&quot;error&quot;: &quot;down&quot;}");
  });
});
