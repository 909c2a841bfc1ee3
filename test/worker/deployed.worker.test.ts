// The Worker as deployed (CORQ_LOCAL unset): what it refuses to run with, and what it tells
// the public when something is wrong.
import { request } from "node:http";
import { describe, expect, inject, it } from "vitest";
import { useStack } from "../helpers/stack.js";

/** The test server's URL with a wrong password: Postgres answers "password authentication failed for user …". */
const wrongPassword = () => {
  const url = new URL(inject("postgresUrl"));
  url.password = "not-the-password";
  return url.toString();
};
const LONG_TOKEN = "a-deployed-admin-token-of-40-characters!";

function expectProblem(response: { status: number; type: string; json: any }, status: number, type: string) {
  expect(response.status).toBe(status);
  expect(response.type).toContain("application/problem+json");
  expect(response.json).toMatchObject({
    type: `urn:corq:problem:${type}`,
    status,
    title: expect.any(String),
    detail: expect.any(String),
  });
}

describe("deployed, database unreachable", () => {
  // the isolate's own limit out of the way: what stops the guessing below is the rate-limit binding
  const { api } = useStack({
    vars: {
      CORQ_LOCAL: "",
      DATABASE_URL: wrongPassword(),
      CORQ_ADMIN_TOKEN: LONG_TOKEN,
      CORQ_AUTH_FAILURE_LIMIT: "100000",
    },
  });

  it("GET /health answers a generic 503 problem: no database error text", async () => {
    const response = await api("GET", "/health", { token: null });
    expect(response.status).toBe(503);
    expect(response.type).toContain("application/problem+json");
    expect(response.json).toEqual({
      type: "urn:corq:problem:database_unavailable",
      title: "Service Unavailable",
      status: 503,
      detail: "the database is unavailable",
      ok: false,
      db: "unavailable",
    });
  });

  it("accepts an admin token of 32 characters or more (the call then fails on the database, not on the token)", async () => {
    // past the token check, the call fails on the database (a wrong password is a 500 "internal error")
    const accepted = await api("GET", "/stats", { token: LONG_TOKEN });
    expect(accepted.status).toBeGreaterThanOrEqual(500);
    expect(accepted.json.type).not.toMatch(/unauthorized|admin_token_too_short/);
    expectProblem(await api("GET", "/stats", { token: "wrong" }), 401, "unauthorized");
  });
  it("counts failed authentications in the CORQ_AUTH_LIMITER rate-limit binding (wrangler.toml: 100 a minute)", async () => {
    const client = { "cf-connecting-ip": "198.51.100.7" };
    let first429 = -1;
    for (let i = 0; i < 250 && first429 < 0; i++) {
      const { status } = await api("GET", "/stats", { token: `guess-${i}`, headers: client });
      if (status === 429) first429 = i;
      else expect(status).toBe(401);
    }
    // the 101st failure, or up to 100 later if the binding's minute turned over meanwhile
    expect(first429).toBeGreaterThanOrEqual(100);
    expect(first429).toBeLessThanOrEqual(200);
    expectProblem(
      await api("GET", "/stats", { token: LONG_TOKEN, headers: client }),
      429,
      "too_many_failed_authentications",
    );
  }, 60_000); // up to 200 sequential requests: slow when the machine is loaded
});

describe("admin token under 32 characters outside the local stack", () => {
  // the stack's default token, dev-admin-token (15 characters)
  const { state, api } = useStack({ vars: { CORQ_LOCAL: "" } });

  it("refuses every admin call with 503 saying why, even with that token; /health stays up", async () => {
    expect(state.stack.adminToken.length).toBeLessThan(32);
    expect(await api("GET", "/health", { token: null })).toMatchObject({ status: 200, json: { ok: true, db: "ok" } });
    for (const [method, path, body] of [
      ["GET", "/stats", undefined],
      ["POST", "/advance", undefined],
      ["POST", "/streams/s/events", { events: [{ name: "E", data: {} }] }],
      ["POST", "/dead-letters/retry", { subscription: "greeter" }],
    ] as const) {
      for (const token of [state.stack.adminToken, "wrong"]) {
        const response = await api(method, path, { token, body });
        expectProblem(response, 503, "admin_token_too_short");
        expect(response.json.detail).toContain("CORQ_ADMIN_TOKEN is shorter than 32 characters");
      }
    }
    const { rows } = await state.db.query("SELECT count(*)::int AS n FROM corq.events");
    expect(rows[0].n).toBe(0);
  });

  it("refuses dashboard logins with a page that says why", async () => {
    const page = await fetch(`${state.stack.url}/login`);
    expect(page.status).toBe(503);
    expect(await page.text()).toContain("CORQ_ADMIN_TOKEN is shorter than 32 characters");
    const login = await fetch(`${state.stack.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: state.stack.url },
      body: new URLSearchParams({ token: state.stack.adminToken }).toString(),
    });
    expect(login.status).toBe(503);
    expect(login.headers.get("set-cookie")).toBeNull();
  });

  it("answers any Host: deployed, Cloudflare routes by hostname (the loopback-only check is the local stack's)", async () => {
    const { port } = new URL(state.stack.url);
    const status = await new Promise<number>((resolve, reject) =>
      request({ host: "127.0.0.1", port, path: "/health", headers: { host: "corq.example.com" } }, (response) => {
        response.resume();
        resolve(response.statusCode!);
      })
        .on("error", reject)
        .end(),
    );
    expect(status).toBe(200);
  });
});
