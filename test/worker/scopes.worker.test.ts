// Scoped tokens against the real Worker (workerd) on real Postgres: every endpoint × every
// scope (allowed → 2xx; refused → 403 problem+json and the database exactly as before), a
// producer limited to a stream prefix, revocation on the next request (dashboard sessions
// included), a secret never readable back, the dashboard read-only for `read`, and which
// refusals the auth throttle counts (401) and which it does not (403).
import { createHash } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { createCorq, type Corq } from "../../src/index.js";
import { sleep } from "../helpers/corq.js";
import { isDashboardRoute, PUBLIC_ROUTES, routeScopes } from "../helpers/routes.js";
import { logIn as logInAt, postForm } from "../helpers/dashboardForm.js";
import { present } from "../helpers/present.js";
import { roomFullStream } from "../../example/roomOccupancy.js";
import { welcomeStream } from "../../example/greeter.js";
import { eventually, useStack } from "../helpers/stack.js";

const LIMIT = 5;
const { state, api } = useStack({ vars: { CORQ_AUTH_FAILURE_LIMIT: String(LIMIT) } });

type Scope = "append" | "read" | "operate" | "admin";
/** A scoped token of each scope, and the bootstrap admin (CORQ_ADMIN_TOKEN). */
type Holder = Scope | "bootstrap";
const HOLDERS: Holder[] = ["append", "read", "operate", "admin", "bootstrap"];
// Who may do what, as docs/http-api.md says it (written out here, not computed by src/tokens.ts).
const allowedBy: Record<Scope, Holder[]> = {
  append: ["append", "admin", "bootstrap"],
  read: ["read", "operate", "admin", "bootstrap"],
  operate: ["operate", "admin", "bootstrap"],
  admin: ["admin", "bootstrap"],
};
const secrets = {} as Record<Holder, string>;

/** The library on the stack's database, for setting the scene without going through the API. */
async function withCorq<T>(use: (corq: Corq) => Promise<T>): Promise<T> {
  const corq = createCorq({ databaseUrl: state.stack.databaseUrl, pushAllowPrivate: true });
  try {
    return await use(corq);
  } finally {
    await corq.close();
  }
}

let appended = 0;
/** An event of the `matrix` subscription, appended and advanced without any kick: one ready key. */
const readyWork = () =>
  withCorq(async (corq) => {
    await corq.append(`matrix-work-${++appended}`, [{ name: "MatrixWork", data: {} }]);
    await corq.advance();
  });

/** Every table of corq and the example app, by content (a token's last use aside: the lookup may write it). */
async function snapshot(): Promise<Record<string, string>> {
  const { rows: tables } = await state.db.query(
    `SELECT table_schema, table_name FROM information_schema.tables
     WHERE table_schema IN ('corq', 'example') AND table_type = 'BASE TABLE' ORDER BY 1, 2`,
  );
  const contents: Record<string, string> = {};
  for (const { table_schema: schema, table_name: name } of tables) {
    const source =
      schema === "corq" && name === "tokens"
        ? "(SELECT id, name, scopes, stream_prefix, hash, created_at FROM corq.tokens)"
        : `"${schema}"."${name}"`;
    const { rows } = await state.db.query(
      `SELECT count(*)::int AS n, md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) AS h FROM ${source} x`,
    );
    contents[`${schema}.${name}`] = `${rows[0].n} ${rows[0].h}`;
  }
  expect(Object.keys(contents)).toContain("corq.events");
  return contents;
}

/** The database once background work (appends' kicks, dispatched consumers) has stopped changing it. */
const settled = () =>
  eventually(
    async () => {
      const before = await snapshot();
      await sleep(300);
      expect(await snapshot()).toEqual(before);
      return before;
    },
    { timeoutMs: 30_000 },
  );

function expectForbidden(response: { status: number; type: string; json: any }, what: string) {
  expect(response.status, what).toBe(403);
  expect(response.type, what).toContain("application/problem+json");
  expect(response.json, what).toMatchObject({
    type: "urn:corq:problem:forbidden",
    title: "Forbidden",
    status: 403,
    detail: expect.any(String),
  });
}

const matrixSubscription = {
  events: ["MatrixWork"],
  deliver: { url: "http://127.0.0.1:9/closed" }, // nothing listens: every delivery fails, the key dies
  maxAttempts: 1,
  backoff: { initialMs: 600_000, maxMs: 600_000, factor: 1 },
};

interface Endpoint {
  /** As the route is registered: `METHOD /pattern`. */
  route: string;
  scope: Scope;
  /** Sets the scene so that the request, if it went through, would change something; returns what the path needs. */
  prepare?: () => Promise<string | undefined>;
  path: (prepared: string | undefined) => string;
  body?: unknown;
  allowed: number[];
}

const endpoints: Endpoint[] = [
  {
    route: "POST /streams/:stream/events",
    scope: "append",
    path: () => "/streams/matrix-s/events",
    body: { events: [{ name: "MatrixNoted", data: {} }] },
    allowed: [201],
  },
  { route: "GET /streams/:stream", scope: "read", path: () => "/streams/matrix-s", allowed: [200] },
  {
    route: "DELETE /streams/:stream",
    scope: "admin",
    prepare: async () => {
      const stream = `matrix-erased-${++appended}`;
      await withCorq((corq) => corq.append(stream, [{ name: "MatrixNoted", data: {} }]));
      return stream;
    },
    path: (stream) => `/streams/${stream}`,
    allowed: [200],
  },
  { route: "GET /events", scope: "read", path: () => "/events?limit=5", allowed: [200] },
  { route: "GET /events/tail", scope: "read", path: () => "/events/tail?limit=5", allowed: [200] },
  { route: "GET /subscriptions", scope: "read", path: () => "/subscriptions", allowed: [200] },
  { route: "GET /subscriptions/:name", scope: "read", path: () => "/subscriptions/matrix", allowed: [200] },
  {
    route: "PUT /subscriptions/:name",
    scope: "admin",
    path: () => "/subscriptions/matrix-put",
    body: matrixSubscription,
    allowed: [200, 201],
  },
  {
    route: "DELETE /subscriptions/:name",
    scope: "admin",
    prepare: async () => {
      expect((await api("PUT", "/subscriptions/matrix-gone", { body: matrixSubscription })).status).toBeLessThan(300);
      return "matrix-gone";
    },
    path: (name) => `/subscriptions/${name}`,
    allowed: [204],
  },
  {
    route: "GET /subscriptions/:name/keys",
    scope: "read",
    path: () => "/subscriptions/matrix/keys",
    allowed: [200],
  },
  {
    route: "POST /subscriptions/:name/pause",
    scope: "operate",
    prepare: () => withCorq((corq) => corq.resume("matrix")).then(() => undefined),
    path: () => "/subscriptions/matrix/pause",
    allowed: [200],
  },
  {
    route: "POST /subscriptions/:name/resume",
    scope: "operate",
    prepare: () => withCorq((corq) => corq.pause("matrix")).then(() => undefined),
    path: () => "/subscriptions/matrix/resume",
    allowed: [200],
  },
  {
    route: "POST /subscriptions/:name/keys/:key/pause",
    scope: "operate",
    prepare: () =>
      withCorq((corq) => corq.resumeKey("matrix", "matrix key").catch(() => undefined)).then(() => undefined),
    path: () => `/subscriptions/matrix/keys/${encodeURIComponent("matrix key")}/pause`,
    allowed: [200],
  },
  {
    route: "POST /subscriptions/:name/keys/:key/resume",
    scope: "operate",
    prepare: () => withCorq((corq) => corq.pauseKey("matrix", "matrix key")).then(() => undefined),
    path: () => `/subscriptions/matrix/keys/${encodeURIComponent("matrix key")}/resume`,
    allowed: [200],
  },
  {
    route: "POST /subscriptions/:name/rewind",
    scope: "operate",
    prepare: () => readyWork().then(() => undefined),
    path: () => "/subscriptions/matrix/rewind",
    body: { to: "beginning" },
    allowed: [200],
  },
  {
    route: "POST /advance",
    scope: "admin",
    prepare: () =>
      withCorq((corq) => corq.append("matrix-lag", [{ name: "MatrixNoted", data: {} }])).then(() => undefined),
    path: () => "/advance",
    allowed: [200],
  },
  {
    route: "POST /dispatch",
    scope: "admin",
    prepare: () => readyWork().then(() => undefined),
    path: () => "/dispatch",
    allowed: [200],
  },
  {
    route: "POST /consume/:subscription",
    scope: "admin",
    prepare: () => readyWork().then(() => undefined),
    path: () => "/consume/matrix",
    allowed: [200, 204],
  },
  { route: "GET /dead-letters", scope: "read", path: () => "/dead-letters", allowed: [200] },
  {
    route: "POST /dead-letters/retry",
    scope: "operate",
    prepare: async () => {
      await readyWork();
      await withCorq((corq) => corq.consume("matrix")); // the delivery fails: the key is dead
      expect((await api("GET", "/subscriptions/matrix")).json.keys.dead).toBeGreaterThan(0);
      return undefined;
    },
    path: () => "/dead-letters/retry",
    body: { subscription: "matrix" },
    allowed: [200],
  },
  { route: "GET /stats", scope: "read", path: () => "/stats", allowed: [200] },
  { route: "GET /doctor", scope: "admin", path: () => "/doctor", allowed: [200] },
  { route: "GET /metrics", scope: "read", path: () => "/metrics", allowed: [200] },
  {
    route: "POST /tokens",
    scope: "admin",
    path: () => "/tokens",
    body: { name: "made in the matrix", scopes: ["read"] },
    allowed: [201],
  },
  { route: "GET /tokens", scope: "admin", path: () => "/tokens", allowed: [200] },
  {
    route: "DELETE /tokens/:id",
    scope: "admin",
    prepare: async () => (await api("POST", "/tokens", { body: { name: "doomed", scopes: ["read"] } })).json.id,
    path: (id) => `/tokens/${id}`,
    allowed: [204],
  },
  { route: "GET /retention", scope: "read", path: () => "/retention", allowed: [200] },
  {
    route: "PUT /retention",
    scope: "admin",
    path: () => "/retention",
    body: { maxAgeMs: 86_400_000, streams: ["matrix-retained-"] },
    allowed: [200],
  },
  {
    route: "POST /retention/run",
    scope: "admin",
    // an event every subscription has advanced past, older than the policy's millisecond: a pass removes it
    prepare: async () => {
      await withCorq(async (corq) => {
        await corq.setRetention({ maxAgeMs: 1, streams: ["matrix-retained-"] });
        await corq.append(`matrix-retained-${++appended}`, [{ name: "MatrixNoted", data: {} }]);
      });
      expect((await api("POST", "/advance")).status).toBe(200);
      return undefined;
    },
    path: () => "/retention/run",
    allowed: [200],
  },
  { route: "GET /alerts", scope: "admin", path: () => "/alerts", allowed: [200] },
  {
    route: "PUT /alerts/:name",
    scope: "admin",
    path: () => "/alerts/matrix-alert",
    body: { url: "https://alerts.example/hook", on: ["key.dead"] },
    allowed: [200, 201],
  },
  {
    route: "DELETE /alerts/:name",
    scope: "admin",
    prepare: async () => {
      const name = `matrix-doomed-${++appended}`;
      await withCorq((corq) => corq.putAlert(name, { url: "https://alerts.example/hook", on: ["key.dead"] }));
      return name;
    },
    path: (name) => `/alerts/${name}`,
    allowed: [204],
  },
  {
    route: "POST /alerts/check",
    scope: "admin",
    // an alert to evaluate: a pass moves its last-pass time (a refused one must not)
    prepare: () =>
      withCorq((corq) => corq.putAlert("matrix-watch", { url: "https://alerts.example/hook", on: ["key.dead"] })).then(
        () => undefined,
      ),
    path: () => "/alerts/check",
    allowed: [200],
  },
];

beforeAll(async () => {
  secrets.bootstrap = state.stack.adminToken;
  for (const scope of ["append", "read", "operate", "admin"] as const) {
    const created = await api("POST", "/tokens", { body: { name: `matrix ${scope}`, scopes: [scope] } });
    expect(created.status).toBe(201);
    secrets[scope] = created.json.token;
  }
  expect((await api("PUT", "/subscriptions/matrix", { body: matrixSubscription })).status).toBe(201);
});

describe("every endpoint × every scope", () => {
  it("covers every route of the API, with the scope the route declares", () => {
    const declared = [...routeScopes()].filter(([route]) => !PUBLIC_ROUTES.has(route) && !isDashboardRoute(route));
    expect(Object.fromEntries(declared.map(([route, scopes]) => [route, scopes[0]]))).toEqual(
      Object.fromEntries(endpoints.map((e) => [e.route, e.scope])),
    );
  });

  for (const endpoint of endpoints) {
    const method = present(endpoint.route.split(" ")[0], `a method in route ${endpoint.route}`);
    const refused = HOLDERS.filter((holder) => !allowedBy[endpoint.scope].includes(holder));
    it(`${endpoint.route} (${endpoint.scope}): ${allowedBy[endpoint.scope].join(", ")} → ${endpoint.allowed.join("/")}; ${refused.join(", ")} → 403, nothing changed`, async () => {
      let prepared = await endpoint.prepare?.();
      const before = await settled();
      for (const holder of refused) {
        const response = await api(method, endpoint.path(prepared), { token: secrets[holder], body: endpoint.body });
        expectForbidden(response, `${holder} ${endpoint.route}`);
        expect(await snapshot(), `${holder} ${endpoint.route} changed the database`).toEqual(before);
      }
      for (const holder of allowedBy[endpoint.scope]) {
        if (holder !== allowedBy[endpoint.scope][0]) prepared = await endpoint.prepare?.();
        const response = await api(method, endpoint.path(prepared), { token: secrets[holder], body: endpoint.body });
        expect(
          endpoint.allowed,
          `${holder} ${endpoint.route}: ${response.status} ${JSON.stringify(response.json)}`,
        ).toContain(response.status);
      }
    });
  }
});

describe("a producer's append token", () => {
  it("appends only to streams starting with its prefix; reads nothing; prefix-limited appends still read with read", async () => {
    const producer = (
      await api("POST", "/tokens", { body: { name: "orders producer", scopes: ["append"], streamPrefix: "orders-" } })
    ).json;
    expect(producer).toMatchObject({ scopes: ["append"], streamPrefix: "orders-" });
    const append = (stream: string, token = producer.token) =>
      api("POST", `/streams/${stream}/events`, { token, body: { events: [{ name: "OrderPlaced", data: {} }] } });

    expect(await append("orders-1")).toMatchObject({ status: 201, json: { stream: "orders-1" } });
    const before = await settled();
    for (const stream of ["order-1", "xorders-1", "ORDERS-1", "orders", "matrix-s"]) {
      const refused = await append(stream);
      expectForbidden(refused, stream);
      expect(refused.json.detail).toContain('"orders-"');
    }
    expectForbidden(await api("GET", "/streams/orders-1", { token: producer.token }), "read with append");
    expect(await snapshot()).toEqual(before);
    const orderEvents = await state.db.query("SELECT stream FROM corq.events WHERE name = 'OrderPlaced'");
    expect(orderEvents.rows).toEqual([{ stream: "orders-1" }]);

    // with read too, it reads every stream: the prefix limits appends only
    const both = (
      await api("POST", "/tokens", {
        body: { name: "orders reader", scopes: ["append", "read"], streamPrefix: "orders-" },
      })
    ).json;
    expect((await api("GET", "/streams/matrix-s", { token: both.token })).status).toBe(200);
    expectForbidden(await append("matrix-s", both.token), "append outside with read");
    expect((await append("orders-2", both.token)).status).toBe(201);
    // and an unlimited append token appends anywhere
    expect((await append("anything-1", secrets.append)).status).toBe(201);
  });
});

describe("what a prefix-limited producer can cause", () => {
  it("an orders- producer's Registered and Arrived run none of the example's handlers: its subscriptions take visitor- streams only", async () => {
    const producer = (
      await api("POST", "/tokens", { body: { name: "orders only", scopes: ["append"], streamPrefix: "orders-" } })
    ).json;
    // what the review appended: a welcome and a full room came of it
    for (const stream of ["orders-evil1", "orders-evil2", "orders-evil3"]) {
      const appended = await api("POST", `/streams/${stream}/events`, {
        token: producer.token,
        body: {
          events: [
            { name: "Registered", data: { name: "evil" } },
            { name: "Arrived", data: { roomId: "lobby-x" } },
          ],
        },
      });
      expect(appended.status).toBe(201);
    }
    // a visitor's events after them: once they have had their effects, the handlers are past the others
    const visitor = await api("POST", "/streams/visitor-after-evil/events", {
      body: {
        events: [
          { name: "Registered", data: { name: "after" } },
          { name: "Arrived", data: { roomId: "room-after-evil" } },
        ],
      },
    });
    expect(visitor.status).toBe(201);
    await eventually(async () => {
      expect((await api("GET", `/streams/${await welcomeStream("visitor-after-evil")}`)).json.events).toHaveLength(1);
      const rooms = await state.db.query("SELECT room FROM example.rooms WHERE room = 'room-after-evil'");
      expect(rooms.rows).toHaveLength(1);
      const directory = await state.db.query("SELECT stream FROM example.visitors WHERE stream = 'visitor-after-evil'");
      expect(directory.rows).toHaveLength(1);
    });
    for (const stream of [await welcomeStream("orders-evil1"), await roomFullStream("lobby-x", 1)])
      expect((await api("GET", `/streams/${stream}`)).json.events, stream).toEqual([]);
    expect((await state.db.query("SELECT room FROM example.rooms WHERE room = 'lobby-x'")).rows).toEqual([]);
    expect((await state.db.query("SELECT stream FROM example.visitors WHERE stream LIKE 'orders-%'")).rows).toEqual([]);
    const listed = (await api("GET", "/subscriptions")).json.subscriptions as {
      name: string;
      kind: string;
      streams: unknown;
    }[];
    expect(listed.filter((s) => s.kind === "code").map((s) => [s.name, s.streams])).toEqual([
      ["greeter", ["visitor-"]],
      ["room-occupancy", ["visitor-"]],
      ["visitor-directory", ["visitor-"]],
    ]);
  });
});

describe("token management", () => {
  it("shows the secret once: the listing has no secret and no hash, and nothing reads a token back", async () => {
    const created = await api("POST", "/tokens", { body: { name: "grafana", scopes: ["read"] } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      id: expect.any(String),
      name: "grafana",
      scopes: ["read"],
      streamPrefix: null,
      token: expect.stringMatching(/^corq_/),
    });
    const secret: string = created.json.token;
    const hash = createHash("sha256").update(secret).digest("hex");
    expect((await api("GET", "/stats", { token: secret })).status).toBe(200);

    const listing = await api("GET", "/tokens");
    const text = JSON.stringify(listing.json);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(secret.slice(5));
    expect(text).not.toContain(hash);
    const listed = listing.json.tokens.find((t: { id: string }) => t.id === created.json.id);
    expect(Object.keys(listed).sort()).toEqual(["createdAt", "id", "lastUsedAt", "name", "scopes", "streamPrefix"]);
    expect(listed.lastUsedAt).not.toBeNull(); // it was used just now
    for (const t of listing.json.tokens) expect(t).not.toHaveProperty("token");
    // no route gives one token, secret or not: the path has DELETE only (405 with Allow)
    const one = await api("GET", `/tokens/${created.json.id}`);
    expect(one.status).toBe(405);
    expect(JSON.stringify(one.json)).not.toContain(secret.slice(5));
  });

  it("refuses bad bodies and ids with 4xx problem+json and writes nothing", async () => {
    const count = async () => (await state.db.query("SELECT count(*)::int AS n FROM corq.tokens")).rows[0].n;
    const before = await count();
    for (const body of [
      {},
      { name: "x", scopes: [] },
      { name: "x", scopes: ["superuser"] },
      { name: "x", scopes: ["read"], streamPrefix: "orders-" },
      { name: "x", scopes: ["admin", "append"], streamPrefix: "orders-" },
      { name: "x", scopes: ["append"], stream_prefix: "orders-" },
      { name: "", scopes: ["read"] },
      "not json",
    ]) {
      const response = await api("POST", "/tokens", { body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.type).toContain("application/problem+json");
    }
    expect(await count()).toBe(before);
    expect(await api("DELETE", "/tokens/not-a-uuid")).toMatchObject({ status: 400 });
    expect(await api("DELETE", "/tokens/00000000-0000-4000-8000-000000000000")).toMatchObject({
      status: 404,
      json: { type: "urn:corq:problem:unknown_token" },
    });
  });
});

const from = (ip: string) => ({ "cf-connecting-ip": ip });
const post = (path: string, fields: Record<string, string>, options: { cookie?: string; ip?: string } = {}) =>
  postForm(state.stack.url, path, fields, { cookie: options.cookie, headers: options.ip ? from(options.ip) : {} });
const logIn = (token: string) => logInAt(state.stack.url, token);

const page = (path: string, cookie: string) =>
  fetch(`${state.stack.url}${path}`, { headers: { cookie }, redirect: "manual" });
const paused = async () => (await api("GET", "/subscriptions/matrix")).json.paused as boolean;

describe("revocation", () => {
  it("takes effect on the next request: the API answers 401, its dashboard sessions end, others go on", async () => {
    const doomed = (await api("POST", "/tokens", { body: { name: "leaked", scopes: ["operate"] } })).json;
    expect((await api("GET", "/stats", { token: doomed.token })).status).toBe(200);
    const session = await logIn(doomed.token);
    const otherSession = await logIn(secrets.operate);
    expect((await page("/", session)).status).toBe(200);

    expect((await api("DELETE", `/tokens/${doomed.id}`)).status).toBe(204);
    const refused = await api("GET", "/stats", { token: doomed.token, headers: from("203.0.113.70") });
    expect(refused).toMatchObject({ status: 401, json: { type: "urn:corq:problem:unauthorized" } });
    const ended = await page("/", session);
    expect(ended.status).toBe(302);
    expect(ended.headers.get("location")).toBe("/login");
    await withCorq((corq) => corq.resume("matrix"));
    expect((await post("/ui/actions/pause", { subscription: "matrix", back: "/" }, { cookie: session })).status).toBe(
      401,
    );
    expect(await paused()).toBe(false);
    const rows = await state.db.query("SELECT count(*)::int AS n FROM corq.dashboard_sessions WHERE token_id = $1", [
      doomed.id,
    ]);
    expect(rows.rows[0].n).toBe(0);
    expect((await page("/", otherSession)).status).toBe(200);
    expect((await api("GET", "/tokens")).json.tokens.map((t: { id: string }) => t.id)).not.toContain(doomed.id);
    expect(await api("DELETE", `/tokens/${doomed.id}`)).toMatchObject({ status: 404 });
  });
});

describe("the auth throttle", () => {
  it("does not count a 403 for a missing scope; counts a wrong or revoked token (401, then 429)", async () => {
    const client = from("203.0.113.80");
    for (let i = 0; i < 3 * LIMIT; i++)
      expectForbidden(await api("POST", "/advance", { token: secrets.read, headers: client }), `try ${i}`);
    expect((await api("GET", "/stats", { token: secrets.read, headers: client })).status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 1; i++) {
      const guess = `corq_${String(i).padStart(43, "A")}`; // shaped like a token: looked up, not found
      statuses.push((await api("GET", "/stats", { token: guess, headers: client })).status);
    }
    expect(statuses).toEqual([...Array(LIMIT).fill(401), 429]);
    expect((await api("GET", "/stats", { token: secrets.read, headers: client })).status).toBe(429);
  });
});

describe("the dashboard honours the login token's scope", () => {
  it("read: pages without a single action button; the actions are refused (403 page) and change nothing", async () => {
    await withCorq((corq) => corq.resume("matrix"));
    await readyWork();
    await withCorq((corq) => corq.consume("matrix")); // one dead key, so the dead-letter page has rows
    const cookie = await logIn(secrets.read);
    for (const path of ["/", "/ui/dead-letters", "/ui/dead-letters?subscription=matrix", "/ui/subscriptions/matrix"]) {
      const response = await page(path, cookie);
      expect(response.status, path).toBe(200);
      const html = await response.text();
      expect(html, path).toContain("matrix");
      expect(html, path).toContain("read-only");
      expect(html, path).not.toContain("/ui/actions/");
    }
    const before = await settled();
    for (const action of ["pause", "resume", "retry", "skip"]) {
      const response = await post(`/ui/actions/${action}`, { subscription: "matrix", back: "/" }, { cookie });
      expect(response.status, action).toBe(403);
      expect(response.headers.get("content-type"), action).toContain("text/html");
      expect(await response.text(), action).toContain("operate scope");
    }
    expect(await snapshot()).toEqual(before);
  });

  it("operate: the same pages with their buttons, and the actions work", async () => {
    const cookie = await logIn(secrets.operate);
    for (const path of ["/", "/ui/dead-letters?subscription=matrix", "/ui/subscriptions/matrix"]) {
      const html = await (await page(path, cookie)).text();
      expect(html, path).toContain("/ui/actions/");
      expect(html, path).not.toContain("read-only");
    }
    const done = await post("/ui/actions/pause", { subscription: "matrix", back: "/" }, { cookie });
    expect(done.status).toBe(303);
    expect(await paused()).toBe(true);
    await withCorq((corq) => corq.resume("matrix"));
    // the bootstrap admin's session too
    const admin = await logIn(state.stack.adminToken);
    expect(await (await page("/", admin)).text()).toContain("/ui/actions/");
  });

  it("an append token cannot log in (403, no cookie, not counted as a failed login)", async () => {
    for (let i = 0; i < 2 * LIMIT; i++) {
      const response = await post("/login", { token: secrets.append }, { ip: "203.0.113.90" });
      expect(response.status).toBe(403);
      expect(response.headers.get("set-cookie")).toBeNull();
      expect(await response.text()).toContain("read, operate or admin scope");
    }
    expect((await post("/login", { token: secrets.read }, { ip: "203.0.113.90" })).status).toBe(303);
  });
});
