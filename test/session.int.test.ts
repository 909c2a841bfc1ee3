// The dashboard's session (src/http/dashboard/session.ts) on a bare Hono app and real Postgres.
import { createHmac } from "node:crypto";
import { Hono } from "hono";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createExecutor } from "../src/db/executor.js";
import { endSession, hasSession, SESSION_COOKIE, startSession } from "../src/http/dashboard/session.js";
import { createTestDatabase } from "./helpers/database.js";
import { present } from "./helpers/present.js";
import type { AppEnv } from "../src/http/types.js";

// deployed-length admin tokens (session.ts refuses shorter ones outside the local stack)
const TOKEN_A = "a".repeat(32);
const TOKEN_B = "b".repeat(32);

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let pool: pg.Pool;
let statements = 0;
beforeAll(async () => {
  database = await createTestDatabase(inject("postgresUrl"));
  pool = new pg.Pool({ connectionString: database.url, max: 2 });
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

const app = new Hono<AppEnv>();
app.use(async (c, next) => {
  const db = createExecutor(pool, { onStatement: () => statements++ });
  c.set("db", () => db);
  await next();
});
app.post("/login", async (c) => {
  await startSession(c);
  return c.body(null, 204);
});
app.post("/logout", async (c) => {
  await endSession(c);
  return c.body(null, 204);
});
app.get("/check", async (c) => c.json({ ok: await hasSession(c) }));

const login = async (origin: string, token: string) => {
  const response = await app.request(`${origin}/login`, { method: "POST" }, { CORQ_ADMIN_TOKEN: token });
  return response.headers.get("set-cookie")!;
};
const cookieOf = (setCookie: string) => present(setCookie.split(";")[0], "a name=value in Set-Cookie");
/** The session id and its MAC in a cookie (`pattern` captures them, in that order). */
const idAndMac = (cookie: string, pattern: RegExp) => {
  const [, id, mac] = pattern.exec(cookie) ?? [];
  return { id: present(id, `a session id in ${cookie}`), mac: present(mac, `a MAC in ${cookie}`) };
};
const check = async (cookie: string, token: string | undefined) =>
  (await (await app.request("https://corq.test/check", { headers: { cookie } }, { CORQ_ADMIN_TOKEN: token })).json())
    .ok;
const logout = (cookie: string, token: string) =>
  app.request("https://corq.test/logout", { method: "POST", headers: { cookie } }, { CORQ_ADMIN_TOKEN: token });

/** The cookie's MAC, computed independently (node:crypto) of session.ts: HMAC(HMAC(token, label), id). */
const macFor = (token: string, id: string) => {
  const sessionKey = createHmac("sha256", token).update("corq dashboard session key v1").digest();
  return createHmac("sha256", sessionKey).update(id).digest("base64url");
};

describe("dashboard session", () => {
  it("is an http-only, SameSite=Strict cookie, Secure over https, holding an id and its MAC under a key derived from the token", async () => {
    const setCookie = await login("https://corq.test", "the-admin-token-of-32-characters");
    expect(setCookie).toMatch(new RegExp(`^${SESSION_COOKIE}=[\\w-]{22}\\.[\\w-]{43};`));
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Strict");
    expect(setCookie).toContain("Secure");
    expect(setCookie).toContain("Max-Age=43200");
    expect(setCookie).not.toContain("the-admin-token-of-32-characters");
    const { id, mac } = idAndMac(setCookie, /=([\w-]{22})\.([\w-]{43})/);
    expect(mac).toBe(macFor("the-admin-token-of-32-characters", id));
    // not a MAC made with the token itself
    expect(mac).not.toBe(createHmac("sha256", "the-admin-token-of-32-characters").update(id).digest("base64url"));
    expect(await login("http://127.0.0.1:8787", TOKEN_A)).not.toContain("Secure");
  });

  it("is valid while its row lives and the admin token is the same; costs one statement, none with a wrong MAC", async () => {
    const cookie = cookieOf(await login("https://corq.test", TOKEN_A));
    statements = 0;
    expect(await check(cookie, TOKEN_A)).toBe(true);
    expect(statements).toBe(1);
    expect(await check(cookie, TOKEN_B)).toBe(false); // rotating the token ends every session
    expect(await check(cookie, undefined)).toBe(false); // and so does removing it
    const { id, mac } = idAndMac(cookie, /=(.+)\.(.+)$/);
    statements = 0;
    expect(await check(`${SESSION_COOKIE}=${id}.${mac.slice(0, -1)}${mac.endsWith("A") ? "B" : "A"}`, TOKEN_A)).toBe(
      false,
    ); // tampered
    expect(await check(`${SESSION_COOKIE}=${id.slice(0, -1)}${id.endsWith("A") ? "B" : "A"}.${mac}`, TOKEN_A)).toBe(
      false,
    );
    expect(await check(`${SESSION_COOKIE}=junk`, TOKEN_A)).toBe(false);
    expect(statements).toBe(0);
    // a well-signed id that no login created is refused
    const forged = "A".repeat(22);
    expect(await check(`${SESSION_COOKIE}=${forged}.${macFor(TOKEN_A, forged)}`, TOKEN_A)).toBe(false);
    // expired: the row says so
    await pool.query("UPDATE corq.dashboard_sessions SET expires_at = now() - interval '1 second' WHERE id = $1", [id]);
    expect(await check(cookie, TOKEN_A)).toBe(false);
    // the next login forgets it
    await login("https://corq.test", TOKEN_A);
    expect(
      (await pool.query("SELECT count(*)::int AS n FROM corq.dashboard_sessions WHERE id = $1", [id])).rows[0].n,
    ).toBe(0);
  });

  it("logout ends that session only", async () => {
    const first = cookieOf(await login("https://corq.test", TOKEN_A));
    const second = cookieOf(await login("https://corq.test", TOKEN_A));
    const response = await logout(first, TOKEN_A);
    expect(response.headers.get("set-cookie")).toMatch(new RegExp(`^${SESSION_COOKIE}=;`));
    expect(await check(first, TOKEN_A)).toBe(false); // the old cookie, replayed
    expect(await check(second, TOKEN_A)).toBe(true);
  });
});
