// The dashboard's login session. The cookie is `<id>.<MAC(session key, id)>`; the session is
// alive while its row in corq.dashboard_sessions is (12 hours; logout deletes it, ending that
// session only). The row remembers the token that logged in: the session has that token's
// scopes, and revoking the token deletes its sessions. The session key is derived from the admin token under a fixed label, so the
// cookie never carries a MAC made with the token itself, and changing CORQ_ADMIN_TOKEN ends
// every session. A cookie costs one statement per request, and none when its MAC is wrong.
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import {
  dashboardSession,
  endDashboardSession,
  startDashboardSession,
  type SessionRow,
} from "../../sql/operate/dashboardSessions.js";
import type { TokenScope } from "../../tokens.js";
import { constantTimeEqual } from "../../webhookSignature.js";
import { present } from "../../errors.js";
import { adminTokenRefusal, BOOTSTRAP_ADMIN } from "../auth.js";
import { requestClient } from "../requestClient.js";
import type { AppEnv, Principal } from "../types.js";

export const SESSION_COOKIE = "corq_session";
const SESSION_MS = 12 * 3_600_000;
const SESSION_KEY_LABEL = "corq dashboard session key v1";

type SessionContext = Context<AppEnv>;

const encode = (text: string) => new TextEncoder().encode(text);
const base64url = (bytes: ArrayBuffer | Uint8Array) =>
  btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");

const hmac = async (key: BufferSource, message: string) =>
  crypto.subtle.sign(
    "HMAC",
    await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]),
    encode(message),
  );

/** MAC of a session id: HMAC(HMAC(admin token, label), id). */
async function mac(token: string, id: string): Promise<string> {
  const sessionKey = await hmac(encode(token), SESSION_KEY_LABEL);
  return base64url(await hmac(sessionKey, id));
}

/** The session id of the request's cookie when its MAC is right under the current admin token. */
async function signedSessionId(c: SessionContext): Promise<string | null> {
  const token = c.env.CORQ_ADMIN_TOKEN;
  const value = getCookie(c, SESSION_COOKIE);
  if (!token || !value || adminTokenRefusal(c.env)) return null;
  const [, id, signature] = /^([\w-]{22})\.([\w-]{43})$/.exec(value) ?? [];
  if (id === undefined || signature === undefined) return null;
  if (!constantTimeEqual(encode(signature), encode(await mac(token, id)))) return null;
  return id;
}

/** Who the request's session cookie acts as, or null without a live session. */
export async function sessionPrincipal(c: SessionContext): Promise<Principal | null> {
  const id = await signedSessionId(c);
  if (id === null) return null;
  const [row] = await c.var.db().run<SessionRow>(dashboardSession(id));
  if (!row) return null;
  if (row.token_id === null) return BOOTSTRAP_ADMIN;
  return { tokenId: row.token_id, scopes: (row.scopes ?? []) as TokenScope[], streamPrefix: row.stream_prefix };
}

/** Whether the request carries the cookie of a live session. */
export async function hasSession(c: SessionContext): Promise<boolean> {
  return (await sessionPrincipal(c)) !== null;
}

/**
 * Call once the credential has been checked: `principal` is who logged in. False (no session)
 * when its token was revoked in between.
 */
export async function startSession(c: SessionContext, principal: Principal = BOOTSTRAP_ADMIN): Promise<boolean> {
  const id = base64url(crypto.getRandomValues(new Uint8Array(16)));
  const started = await c.var.db().run(startDashboardSession(id, SESSION_MS, principal.tokenId));
  if (started.length === 0) return false;
  setCookie(c, SESSION_COOKIE, `${id}.${await mac(present(c.env.CORQ_ADMIN_TOKEN, "CORQ_ADMIN_TOKEN"), id)}`, {
    httpOnly: true,
    sameSite: "Strict",
    // Secure everywhere but plain-http development on this machine (browsers drop Secure cookies
    // over http); behind a trusted TLS proxy too (src/http/requestClient.ts)
    secure: requestClient(c).secure,
    // the dashboard's own prefix only: a user's app beside it never sees the session
    path: c.var.basePath || "/",
    maxAge: SESSION_MS / 1000,
  });
  return true;
}

/** Logout: ends this session (its row), whatever else is logged in. */
export async function endSession(c: SessionContext): Promise<void> {
  const id = await signedSessionId(c);
  if (id !== null) await c.var.db().run(endDashboardSession(id));
  deleteCookie(c, SESSION_COOKIE, { path: c.var.basePath || "/" });
}
