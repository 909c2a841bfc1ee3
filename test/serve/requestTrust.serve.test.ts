// What `npm run serve` believes of a request (src/http/requestClient.ts, src/node/forwarded.ts,
// src/http/dispatch.ts), set up as in production: a long admin token, no CORQ_LOCAL.
//   - No destination comes from a request: whatever Host or request target a client sends,
//     the consumers a dispatch starts run in the process, and nothing (least of all the admin
//     token) goes to the address the client named.
//   - The auth throttle counts failures by the socket's address: headers a client sets
//     (CF-Connecting-IP, X-Forwarded-For) neither dodge it nor lock anyone else out; behind
//     CORQ_TRUSTED_PROXIES the proxy's X-Forwarded-For names the client and its
//     X-Forwarded-Proto makes the dashboard's cookie Secure and sends HSTS.
//   - A token revoked under any spelling of its path is refused at once (the token cache).
// Clients at other addresses: Linux answers all of 127.0.0.0/8 on loopback, so a request can
// come from 127.0.0.2 (http.request's localAddress).
import { request as httpRequest, createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createTestDatabase } from "../helpers/database.js";
import { startServeProcess, type ServeProcess } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";
import pg from "pg";

const ADMIN = "request-trust-admin-token-0123456789abcdef";
const LIMIT = 5;
const state = {} as {
  direct: ServeProcess;
  proxied: ServeProcess;
  listener: Server;
  heard: string[];
  db: pg.Pool;
  drop: () => Promise<void>;
};

beforeAll(async () => {
  const database = await createTestDatabase(inject("postgresUrl"));
  state.drop = database.drop;
  state.db = new pg.Pool({ connectionString: database.url, max: 2 });
  state.db.on("error", () => undefined);
  const env = {
    CORQ_ADMIN_TOKEN: ADMIN,
    CORQ_LOCAL: "",
    CORQ_AUTH_FAILURE_LIMIT: String(LIMIT),
    CORQ_AUTH_FAILURE_WINDOW_S: "60",
    CORQ_TOKEN_CACHE_MS: "60000",
  };
  // "direct": an API process (no consumers of its own: only a dispatch can start them); "proxied":
  // behind a proxy at 127.0.0.1
  [state.direct, state.proxied] = await Promise.all([
    startServeProcess({
      databaseUrl: database.url,
      entry: "test/serve/recordingServe.ts",
      env: { ...env, CORQ_ROLE: "api", CORQ_CONCURRENCY: "3" },
    }),
    startServeProcess({
      databaseUrl: database.url,
      entry: "test/serve/recordingServe.ts",
      env: { ...env, CORQ_ROLE: "api", CORQ_TRUSTED_PROXIES: "127.0.0.1, ::1" },
    }),
  ]);
  // where a spoofed Host would send the server's own invocations
  state.heard = [];
  state.listener = createServer((req, res) => {
    state.heard.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => state.listener.listen(0, "127.0.0.1", resolve));
}, 90_000);

afterAll(async () => {
  await Promise.all([state.direct?.stop(), state.proxied?.stop()]);
  await new Promise((resolve) => state.listener?.close(resolve));
  await state.db?.end();
  await state.drop?.();
});

/** A raw HTTP request: any Host, any request target (absolute-form too), from any loopback address. */
function send(
  base: string,
  options: {
    method?: string;
    target: string;
    headers?: Record<string, string>;
    from?: string;
    body?: unknown;
  },
): Promise<{ status: number; headers: IncomingMessage["headers"]; text: string }> {
  const { port } = new URL(base);
  const body = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        method: options.method ?? "GET",
        path: options.target,
        localAddress: options.from,
        headers: { ...(body ? { "content-type": "application/json" } : {}), ...options.headers },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const admin = { authorization: `Bearer ${ADMIN}` };
const handled = async () =>
  Number((await state.db.query("SELECT count(*) AS n FROM public.serve_handled")).rows[0]?.n ?? 0);

describe("serve: no destination from a request", () => {
  it("a dispatch with another Host or an absolute-form target consumes in the process; the named address hears nothing", async () => {
    const listener = `127.0.0.1:${(state.listener.address() as AddressInfo).port}`;
    // 3 dispatches, each finding ready keys on 4 streams (so each starts consumers besides its own)
    const spoofs: { target: string; headers: Record<string, string> }[] = [
      { target: "/dispatch", headers: { host: listener } },
      { target: `http://${listener}/dispatch`, headers: {} },
      { target: `http://${listener}/dispatch`, headers: { host: listener } },
    ];
    let appended = 0;
    for (const [i, spoof] of spoofs.entries()) {
      for (let s = 0; s < 4; s++) {
        const append = await send(state.direct.url, {
          method: "POST",
          target: `/streams/trust-${i}-${s}/events`,
          headers: admin,
          body: { events: [{ name: "E", data: {} }] },
        });
        expect(append.status).toBe(201);
        appended++;
      }
      const dispatched = await send(state.direct.url, {
        method: "POST",
        target: spoof.target,
        headers: { ...admin, ...spoof.headers },
      });
      expect(dispatched.status).toBe(200);
      expect(JSON.parse(dispatched.text)).toMatchObject({ advanced: { recorded: 4 } });
      await eventually(async () => expect(await handled()).toBe(appended), { timeoutMs: 15_000 });
    }
    expect(state.heard).toEqual([]);
  });
});

describe("serve: the auth throttle counts by the socket's address", () => {
  it("rotating CF-Connecting-IP / X-Forwarded-For does not dodge it, and one client's failures lock out no other", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4 * LIMIT; i++) {
      const guess = await send(state.direct.url, {
        target: "/stats",
        from: "127.0.0.2",
        headers: {
          authorization: `Bearer guess-${i}`,
          "cf-connecting-ip": `198.51.100.${i}`,
          "x-forwarded-for": `203.0.113.${i}`,
        },
      });
      statuses.push(guess.status);
    }
    expect(statuses).toEqual([...Array(LIMIT).fill(401), ...Array(3 * LIMIT).fill(429)]);
    // the guesser is held up, right token or not
    expect((await send(state.direct.url, { target: "/stats", from: "127.0.0.2", headers: admin })).status).toBe(429);
    // two other clients, one naming the guesser's headers, are not
    for (const from of ["127.0.0.3", "127.0.0.4"]) {
      const right = await send(state.direct.url, {
        target: "/stats",
        from,
        headers: { ...admin, "cf-connecting-ip": "127.0.0.2" },
      });
      expect(right.status).toBe(200);
    }
  });

  it("behind a trusted proxy: X-Forwarded-For names the client; from anyone else it is ignored", async () => {
    const viaProxy = (client: string, authorization: string) =>
      send(state.proxied.url, {
        target: "/stats",
        from: "127.0.0.1",
        headers: { authorization, "x-forwarded-for": `192.0.2.77, ${client}` },
      });
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 2; i++) statuses.push((await viaProxy("198.51.100.7", `Bearer guess-${i}`)).status);
    expect(statuses).toEqual([...Array(LIMIT).fill(401), 429, 429]);
    // two other clients behind the same proxy get in
    expect((await viaProxy("198.51.100.8", admin.authorization)).status).toBe(200);
    expect((await viaProxy("198.51.100.9", admin.authorization)).status).toBe(200);
    // an untrusted peer naming the blocked client is itself
    const untrusted = await send(state.proxied.url, {
      target: "/stats",
      from: "127.0.0.5",
      headers: { ...admin, "x-forwarded-for": "198.51.100.7" },
    });
    expect(untrusted.status).toBe(200);
  });

  it("X-Forwarded-Proto from a trusted proxy: HSTS and a Secure cookie; from anyone else: neither", async () => {
    const form = (from: string, origin: string) =>
      new Promise<{ status: number; headers: IncomingMessage["headers"] }>((resolve, reject) => {
        const body = new URLSearchParams({ token: ADMIN }).toString();
        const req = httpRequest(
          {
            host: "127.0.0.1",
            port: new URL(state.proxied.url).port,
            method: "POST",
            path: "/login",
            localAddress: from,
            headers: {
              "content-type": "application/x-www-form-urlencoded",
              "x-forwarded-proto": "https",
              origin,
            },
          },
          (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    const host = new URL(state.proxied.url).host;
    const proxied = await form("127.0.0.1", `https://${host}`);
    expect(proxied.status).toBe(303);
    expect(proxied.headers["strict-transport-security"]).toContain("max-age=");
    expect(String(proxied.headers["set-cookie"])).toMatch(/;\s*Secure/i);

    const direct = await form("127.0.0.6", `http://${host}`);
    expect(direct.status).toBe(303);
    expect(direct.headers["strict-transport-security"]).toBeUndefined();
    expect(String(direct.headers["set-cookie"])).not.toMatch(/;\s*Secure/i);
  });
});

describe("serve: a revoked token is refused at once, however its path was spelled", () => {
  it("DELETE /%74okens/:id (and /tokens/:id): the cached token is refused on the next request", async () => {
    for (const spelling of ["/%74okens/", "/tokens/"]) {
      const created = await send(state.direct.url, {
        method: "POST",
        target: "/tokens",
        headers: admin,
        body: { name: `reader ${spelling}`, scopes: ["read"] },
      });
      expect(created.status).toBe(201);
      const { id, token } = JSON.parse(created.text) as { id: string; token: string };
      const read = () => send(state.direct.url, { target: "/stats", headers: { authorization: `Bearer ${token}` } });
      expect((await read()).status).toBe(200); // now cached for a minute
      const revoked = await send(state.direct.url, { method: "DELETE", target: `${spelling}${id}`, headers: admin });
      expect(revoked.status).toBe(204);
      expect((await read()).status).toBe(401);
    }
  });
});
