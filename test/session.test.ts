// The dashboard's session cookie (functions/dashboard/session.ts), on a bare Hono app.
import { createHmac } from "node:crypto";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { hasSession, SESSION_COOKIE, startSession } from "../functions/dashboard/session.js";

const app = new Hono<{ Bindings: { CORQ_ADMIN_TOKEN?: string } }>();
app.post("/login", async (c) => {
  await startSession(c, c.env.CORQ_ADMIN_TOKEN!);
  return c.body(null, 204);
});
app.get("/check", async (c) => c.json({ ok: await hasSession(c) }));

const login = async (origin: string, token: string) => {
  const response = await app.request(`${origin}/login`, { method: "POST" }, { CORQ_ADMIN_TOKEN: token });
  return response.headers.get("set-cookie")!;
};
const check = async (cookie: string, token: string | undefined) =>
  (await (await app.request("https://corq.test/check", { headers: { cookie } }, { CORQ_ADMIN_TOKEN: token })).json()).ok;

/** The cookie's MAC, computed independently (node:crypto) of session.ts. */
const macFor = (token: string, expiry: string) =>
  createHmac("sha256", token).update(`corq-dashboard:${expiry}`).digest("base64url");

describe("dashboard session cookie", () => {
  it("is http-only and SameSite=Strict, Secure over https, and holds a MAC, not the token", async () => {
    const cookie = await login("https://corq.test", "the-admin-token");
    expect(cookie).toMatch(new RegExp(`^${SESSION_COOKIE}=\\d+\\.[\\w-]{43};`));
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("SameSite=Strict");
    expect(cookie).toContain("Secure");
    expect(cookie).toContain("Max-Age=43200");
    expect(cookie).not.toContain("the-admin-token");
    expect(await login("http://127.0.0.1:8787", "t")).not.toContain("Secure");
  });

  it("is valid until it expires, and only while the admin token is the same", async () => {
    const value = (await login("https://corq.test", "token-a")).split(";")[0];
    expect(await check(value, "token-a")).toBe(true);
    expect(await check(value, "token-b")).toBe(false); // rotating the token ends every session
    expect(await check(value, undefined)).toBe(false); // and so does removing it
    const [, expiry, mac] = /=(\d+)\.(.+)$/.exec(value)!;
    expect(await check(`${SESSION_COOKIE}=${Number(expiry) + 1000}.${mac}`, "token-a")).toBe(false); // extended by hand
    expect(await check(`${SESSION_COOKIE}=${expiry}.${mac.slice(0, -1)}A`, "token-a")).toBe(false); // tampered
    expect(await check(`${SESSION_COOKIE}=junk`, "token-a")).toBe(false);
    // an expired session: its MAC is right (the same computation is accepted for a future time), its time is over
    const future = String(Date.now() + 60_000);
    expect(await check(`${SESSION_COOKIE}=${future}.${macFor("token-a", future)}`, "token-a")).toBe(true);
    const past = String(Date.now() - 1000);
    expect(await check(`${SESSION_COOKIE}=${past}.${macFor("token-a", past)}`, "token-a")).toBe(false);
  });
});
