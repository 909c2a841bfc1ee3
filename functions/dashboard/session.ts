// The dashboard's login session: a cookie `<expiry>.<HMAC-SHA256(admin token, expiry)>`.
// The token itself never leaves the login form; changing CORQ_ADMIN_TOKEN logs everyone out.
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { constantTimeEqual } from "../../src/webhookSignature.js";
import type { Env } from "../env.js";

export const SESSION_COOKIE = "corq_session";
const SESSION_MS = 12 * 3_600_000;

async function mac(token: string, expiry: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(token), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const signature = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`corq-dashboard:${expiry}`));
  return btoa(String.fromCharCode(...new Uint8Array(signature))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Whether the request carries a live session cookie made with the current admin token. */
export async function hasSession<E extends { Bindings: Env }>(c: Context<E>): Promise<boolean> {
  const token = c.env.CORQ_ADMIN_TOKEN;
  const value = getCookie(c, SESSION_COOKIE);
  if (!token || !value) return false;
  const match = /^(\d{1,15})\.([\w-]{43})$/.exec(value);
  if (!match || Number(match[1]) < Date.now()) return false;
  const encode = (text: string) => new TextEncoder().encode(text);
  return constantTimeEqual(encode(match[2]), encode(await mac(token, match[1])));
}

export async function startSession<E extends { Bindings: Env }>(c: Context<E>, token: string): Promise<void> {
  const expiry = String(Date.now() + SESSION_MS);
  setCookie(c, SESSION_COOKIE, `${expiry}.${await mac(token, expiry)}`, {
    httpOnly: true,
    sameSite: "Strict",
    // Secure everywhere but plain-http development on this machine (browsers drop Secure cookies over http).
    secure: new URL(c.req.url).protocol === "https:",
    path: "/",
    maxAge: SESSION_MS / 1000,
  });
}

export function endSession(c: Context): void {
  deleteCookie(c, SESSION_COOKIE, { path: "/" });
}
