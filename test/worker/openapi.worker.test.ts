// Real answers of the Worker, validated against docs/openapi.json (JSON Schema 2020-12, ajv):
// every route of the document is called, each status answered must be documented for its
// route and the body must match. And the problem bodies' rules: `errors` an array of
// { path, message }, query fields named as sent, unknown event fields refused, 405 + Allow,
// a refused Origin as a urn:corq:problem type.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { useStack } from "../helpers/stack.js";

const { state, api } = useStack();

type Operation = { responses: Record<string, { content?: Record<string, { schema: object }> }> };
const document = JSON.parse(readFileSync(new URL("../../docs/openapi.json", import.meta.url), "utf8")) as {
  paths: Record<string, Record<string, Operation>>;
  components: object;
};
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

/** The documented route a request took: the path template and method. */
function templateOf(method: string, path: string): string {
  const bare = path.split("?")[0] ?? path;
  for (const template of Object.keys(document.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{\w+\}/g, "[^/]+")}$`);
    if (pattern.test(bare) && document.paths[template]?.[method.toLowerCase()]) return template;
  }
  throw new Error(`${method} ${bare}: not in docs/openapi.json`);
}

const seen = new Set<string>();

/** Calls the API and checks the answer against the document; returns it. */
async function call(method: string, path: string, init: Parameters<typeof api>[2] = {}) {
  const answer = await api(method, path, init);
  const template = templateOf(method, path);
  seen.add(`${method.toLowerCase()} ${template}`);
  const documented = document.paths[template]?.[method.toLowerCase()]?.responses[String(answer.status)];
  expect(documented, `${method} ${path} answered ${answer.status}, not documented`).toBeDefined();
  const content = documented?.content;
  if (!content) {
    expect(answer.json, `${method} ${path} ${answer.status} has no body`).toBeNull();
    return answer;
  }
  const type = answer.type.split(";")[0] ?? "";
  const schema = content[type]?.schema;
  expect(schema, `${method} ${path} ${answer.status}: ${type} not documented`).toBeDefined();
  if (!type.includes("json")) return answer; // GET /metrics' text: its documented type is enough here
  const validate = ajv.compile({ ...schema, components: document.components });
  const valid = validate(answer.json);
  expect(valid, `${method} ${path} ${answer.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
  return answer;
}

describe("answers against the OpenAPI document", () => {
  it("GET /openapi.json is public and is docs/openapi.json", async () => {
    const answer = await call("GET", "/openapi.json", { token: null });
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual(document);
  });

  it("every documented route answers as documented", async () => {
    expect((await call("GET", "/health", { token: null })).status).toBe(200);
    const events = [
      { name: "Registered", data: { name: "Ola" } },
      { name: "Arrived", data: { roomId: "9" }, meta: { via: "door" } },
    ];
    expect((await call("POST", "/streams/visitor-ola/events", { body: { events, expectedVersion: -1 } })).status).toBe(
      201,
    );
    expect((await call("POST", "/streams/visitor-ola/events", { body: { events, expectedVersion: -1 } })).status).toBe(
      409,
    );
    expect((await call("POST", "/streams/visitor-ola/events", { body: { events }, token: null })).status).toBe(401);
    expect(
      (await call("POST", "/streams/visitor-ola/events", { body: "x", headers: { "content-type": "text/plain" } }))
        .status,
    ).toBe(415);
    expect((await call("GET", "/streams/visitor-ola?from=0&limit=10")).status).toBe(200);
    expect((await call("POST", "/streams/erased-ola/events", { body: { events } })).status).toBe(201);
    expect((await call("DELETE", "/streams/erased-ola")).status).toBe(200);
    expect((await call("GET", "/streams/erased-ola")).json).toMatchObject({ erased: true, version: 1 });
    expect((await call("DELETE", "/streams/nobody")).status).toBe(404);
    expect((await call("GET", "/events?after=0&limit=5")).status).toBe(200);
    expect((await call("GET", "/events/tail?limit=2")).status).toBe(200);
    expect((await call("GET", "/events/tail?before=0")).status).toBe(400);
    expect((await call("GET", "/subscriptions")).status).toBe(200);
    const body = { events: ["Nothing"], from: "now", deliver: { url: "http://127.0.0.1:9/hook" } };
    expect((await call("PUT", "/subscriptions/feed", { body })).status).toBe(201);
    expect((await call("PUT", "/subscriptions/feed", { body: { ...body, batchSize: 5 } })).status).toBe(200);
    expect((await call("GET", "/subscriptions/feed")).status).toBe(200);
    expect((await call("GET", "/subscriptions/nope")).status).toBe(404);
    expect((await call("GET", "/subscriptions/greeter/keys?status=idle&limit=5")).status).toBe(200);
    expect((await call("POST", "/subscriptions/feed/pause")).status).toBe(200);
    expect((await call("POST", "/subscriptions/feed/resume")).status).toBe(200);
    const key = `/subscriptions/feed/keys/${encodeURIComponent("room 9/a")}`;
    expect((await call("POST", `${key}/pause`)).status).toBe(200);
    expect((await call("POST", `${key}/resume`)).status).toBe(200);
    expect((await call("POST", "/subscriptions/feed/keys/nobody/resume")).status).toBe(404);
    expect((await call("POST", "/subscriptions/feed/keys/a%00b/pause")).status).toBe(400);
    expect((await call("POST", "/subscriptions/feed/rewind", { body: { to: "beginning" } })).status).toBe(200);
    expect((await call("POST", "/subscriptions/feed/rewind", { body: { to: "soon" } })).status).toBe(400);
    expect((await call("POST", "/subscriptions/nope/rewind", { body: { to: "beginning" } })).status).toBe(404);
    expect((await call("GET", "/dead-letters?subscription=greeter&limit=5")).status).toBe(200);
    const release = { subscription: "greeter", mode: "skip" };
    expect((await call("POST", "/dead-letters/retry", { body: release })).status).toBe(200);
    expect((await call("POST", "/dead-letters/retry", { body: { subscription: "nope" } })).status).toBe(404);
    expect((await call("GET", "/stats")).status).toBe(200);
    expect((await call("GET", "/metrics")).status).toBe(200);
    // a transaction held open: the answer has a finding to check against the document
    const held = await state.db.connect();
    try {
      await held.query("BEGIN");
      await held.query("SELECT pg_current_xact_id()");
      const doctor = await call("GET", "/doctor?heldOverMs=0");
      expect(doctor.json.findings.map((f: { code: string }) => f.code)).toContain("horizon_held");
    } finally {
      await held.query("ROLLBACK");
      held.release();
    }
    expect((await call("GET", "/doctor?heldOverMs=soon")).status).toBe(400);
    expect((await call("POST", "/advance")).status).toBe(200);
    expect((await call("POST", "/dispatch")).status).toBe(200);
    expect([200, 204]).toContain((await call("POST", "/consume/visitor-directory")).status);
    expect((await call("POST", "/consume/feed", { headers: { "corq-budget-ms": "50" } })).status).toBe(204);
    expect((await call("DELETE", "/subscriptions/greeter")).status).toBe(409);
    expect((await call("DELETE", "/subscriptions/feed")).status).toBe(204);
    const created = await call("POST", "/tokens", { body: { name: "reader", scopes: ["read"] } });
    expect(created.status).toBe(201);
    expect((await call("GET", "/stats", { token: created.json.token })).status).toBe(200);
    expect((await call("POST", "/advance", { token: created.json.token })).status).toBe(403);
    expect((await call("GET", "/tokens")).status).toBe(200);
    expect((await call("DELETE", `/tokens/${created.json.id}`)).status).toBe(204);
    expect((await call("DELETE", `/tokens/${created.json.id}`)).status).toBe(404);
    expect((await call("GET", "/retention")).status).toBe(200);
    expect((await call("PUT", "/retention", { body: { maxAgeMs: 86_400_000, streams: ["none-"] } })).status).toBe(200);
    expect((await call("PUT", "/retention", { body: { maxAgeMs: 0 } })).status).toBe(400);
    expect((await call("POST", "/retention/run")).status).toBe(200);
    const alert = { url: "https://alerts.example/hook", on: ["key.dead", "subscription.lag"], lagOver: 10 };
    expect((await call("PUT", "/alerts/documented", { body: alert })).status).toBe(201);
    expect((await call("PUT", "/alerts/documented", { body: alert })).status).toBe(200);
    expect((await call("PUT", "/alerts/documented", { body: { ...alert, lagOver: 0 } })).status).toBe(400);
    expect((await call("GET", "/alerts")).status).toBe(200);
    expect((await call("POST", "/alerts/check")).status).toBe(200);
    expect((await call("DELETE", "/alerts/documented")).status).toBe(204);
    expect((await call("DELETE", "/alerts/documented")).status).toBe(404);

    const documented = Object.entries(document.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    expect(documented.filter((route) => !seen.has(route))).toEqual([]);
  });
});

describe("problem bodies", () => {
  it("`errors` is an array of { path, message }, query fields and headers named as sent", async () => {
    const query = await call("GET", "/events?after=soon&limit=-1");
    expect(query.status).toBe(400);
    expect(query.json.errors.map((e: { path: string }) => e.path).sort()).toEqual(["after", "limit"]);
    const keys = await call("GET", "/subscriptions/greeter/keys?status=asleep");
    expect(keys.json.errors).toEqual([{ path: "status", message: expect.any(String) }]);
    const header = await call("POST", "/consume/greeter", { headers: { "corq-budget-ms": "soon" } });
    expect(header.json.errors).toEqual([{ path: "corq-budget-ms", message: expect.any(String) }]);
    const param = await call("GET", "/streams/%20bad");
    expect(param.json.errors).toEqual([{ path: "stream", message: expect.any(String) }]);
    // a conflict's details are members of their own, not `errors`
    const conflict = await call("POST", "/streams/visitor-ola/events", {
      body: { events: [{ name: "X", data: 1 }], expectedVersion: 7 },
    });
    expect(conflict.status).toBe(409);
    expect(conflict.json).toMatchObject({
      type: "urn:corq:problem:version_conflict",
      stream: "visitor-ola",
      expectedVersion: 7,
      actualVersion: 1,
      currentVersion: 1,
    });
    expect(conflict.json.errors).toBeUndefined();
  });

  it("unknown fields on events and on the append body are refused, nothing written", async () => {
    const before = await api("GET", "/streams/visitor-typo");
    for (const body of [
      { events: [{ name: "Registered", data: {}, metadata: { a: 1 } }] },
      { events: [{ name: "Registered", data: {} }], expectedversion: 0 },
    ]) {
      const refused = await call("POST", "/streams/visitor-typo/events", { body });
      expect(refused.status).toBe(400);
      expect(refused.json.errors).toEqual([
        {
          path: expect.stringMatching(/^body(\.events\.0)?$/),
          message: expect.stringMatching(/metadata|expectedversion/),
        },
      ]);
    }
    expect((await api("GET", "/streams/visitor-typo")).json).toEqual(before.json);
  });

  it("a known path with another method: 405 with Allow", async () => {
    for (const [method, path, allow] of [
      ["DELETE", "/stats", "GET, HEAD"],
      ["GET", "/advance", "POST"],
      ["PATCH", "/subscriptions/greeter", "DELETE, GET, HEAD, PUT"],
    ] as const) {
      const response = await fetch(`${state.stack.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${state.stack.adminToken}` },
      });
      expect({ path, status: response.status, allow: response.headers.get("allow") }).toEqual({
        path,
        status: 405,
        allow,
      });
      expect(await response.json()).toMatchObject({ type: "urn:corq:problem:method_not_allowed", status: 405 });
    }
    expect((await api("GET", "/no/such/path")).status).toBe(404);
  });

  it("a form posted from another origin: 403 urn:corq:problem:forbidden_origin with a detail", async () => {
    const response = await fetch(`${state.stack.url}/ui/actions/pause`, {
      method: "POST",
      headers: { origin: "https://evil.example", "content-type": "application/x-www-form-urlencoded" },
      body: "subscription=greeter&back=/",
    });
    expect(response.status).toBe(403);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(await response.json()).toEqual({
      type: "urn:corq:problem:forbidden_origin",
      title: "Forbidden",
      status: 403,
      detail: `cross-site request refused: Origin "https://evil.example" is not ${state.stack.url}`,
    });
  });
});
