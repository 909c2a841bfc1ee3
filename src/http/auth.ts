// Who is calling, and may they. A bearer secret is either the bootstrap admin token
// (CORQ_ADMIN_TOKEN, compared in constant time, no database) or a scoped token (found by the
// SHA-256 of its secret: one indexed read, src/sql/operate/tokens.ts). Each route states the scope it
// needs in ONE place, its route definition: `app.get(path, requireScope("read"), handler)`.
// A route that states none needs admin (the API's catch-all, `authenticate`) and is flagged by
// test/routeScopes.test.ts. A configured admin token that cannot be used refuses
// everything (never an open admin API).
//
// Failed authentication (401: a wrong secret, a bad signature) is throttled per client
// (authThrottle.ts); a valid token without the scope gets 403 and is not counted.
import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { constantTimeEqual, verify } from "../webhookSignature.js";
import { mayAppendTo, scopesAllow, type TokenScope } from "../tokens.js";
import { settings } from "./env.js";
import { ProblemError } from "./problem.js";
import type { AppEnv, Env, Principal, TokenCache } from "./types.js";

type AuthContext = Context<AppEnv>;

/** Shorter admin tokens are refused outside the local stack: too few to withstand guessing. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

export const BOOTSTRAP_ADMIN: Principal = { tokenId: null, scopes: ["admin"], streamPrefix: null };

/**
 * SHA-256 of `text`. On Node the runtime's synchronous hash (CORQ_NODE.sha256): WebCrypto's
 * digest is a thread-pool job there, and two per request were 2.4 ms p50 (25 ms p99) of an
 * append at 1,000 appends/s and a tenth of serve's CPU (measured, bench/serveProbe.ts).
 */
const digest = async (env: Env, text: string): Promise<Uint8Array> =>
  env.CORQ_NODE?.sha256?.(text) ??
  new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));

// CORQ_ADMIN_TOKEN's digest, made once (per isolate or process) for the value it was made of
let adminDigest: { token: string; digest: Promise<Uint8Array> } | undefined;
const adminTokenDigest = (env: Env, token: string) => {
  if (adminDigest?.token !== token) adminDigest = { token, digest: digest(env, token) };
  return adminDigest.digest;
};

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

const disabled = "the admin API and the dashboard are disabled";

/**
 * Why the configured admin token cannot be used at all (so every authenticated call and the
 * dashboard login are refused, whatever is sent — scoped tokens too: CORQ_ADMIN_TOKEN is a
 * required secret), or null when it can. Not set: 401. Set but shorter than 32 characters
 * outside the local stack (CORQ_LOCAL=true): 503, a deployment to fix.
 */
export function adminTokenRefusal(env: Env): ProblemError | null {
  const token = env.CORQ_ADMIN_TOKEN;
  if (!token) return new ProblemError(401, "admin_disabled", `${disabled}: CORQ_ADMIN_TOKEN is not configured`);
  if (token.length < MIN_ADMIN_TOKEN_LENGTH && !settings(env).local) {
    return new ProblemError(
      503,
      "admin_token_too_short",
      `${disabled}: CORQ_ADMIN_TOKEN is shorter than ${MIN_ADMIN_TOKEN_LENGTH} characters; set a longer one (e.g. openssl rand -hex 32 | wrangler secret put CORQ_ADMIN_TOKEN)`,
    );
  }
  return null;
}

/**
 * Who a secret belongs to: the bootstrap admin, a scoped token that is not revoked, or nobody.
 * A secret not shaped like a token (`corq_…`) costs no statement. Call after adminTokenRefusal.
 * `cache` (the Node runtime's, for API requests; src/http/tokenCache.ts): a scoped token
 * verified within its TTL is not looked up again. The dashboard's login never uses it.
 */
export async function principalOf(
  c: AuthContext,
  secret: string,
  options: { cache?: TokenCache } = {},
): Promise<Principal | null> {
  const hashed = await digest(c.env, secret);
  // hashing both sides first makes the comparison independent of the secret's length too
  const admin = c.env.CORQ_ADMIN_TOKEN;
  if (admin && constantTimeEqual(hashed, await adminTokenDigest(c.env, admin))) return BOOTSTRAP_ADMIN;
  const { cache } = options;
  const key = cache && hex(hashed);
  const cached = key === undefined ? undefined : cache?.get(key);
  if (cached) return cached;
  const since = cache?.generation() ?? 0;
  const token = await c.var.corq().verifyToken(secret);
  const principal = token && { tokenId: token.id, scopes: token.scopes, streamPrefix: token.streamPrefix };
  if (principal && key !== undefined) cache?.set(key, principal, since);
  return principal;
}

/**
 * The bearer token's principal. A refusal for the configuration comes first (it depends on no
 * credential), then the throttle; a wrong secret counts as a failure, a missing one does not.
 */
async function authenticateBearer(c: AuthContext): Promise<Principal> {
  const refusal = adminTokenRefusal(c.env);
  if (refusal) throw refusal;
  const throttle = c.var.throttle;
  throttle.guard(c);
  const authorization = c.req.header("authorization");
  const [, bearer] = /^Bearer (.+)$/.exec(authorization ?? "") ?? [];
  const principal = bearer !== undefined ? await principalOf(c, bearer, { cache: c.env.CORQ_NODE?.tokens }) : null;
  if (principal) return principal;
  if (authorization !== undefined) await throttle.failed(c);
  throw new ProblemError(401, "unauthorized", "missing or wrong bearer token");
}

/** 403 when `principal` may not do what `scope` allows (for `append`: to the route's :stream), else null. */
export function scopeRefusal(principal: Principal, scope: TokenScope, stream?: string): ProblemError | null {
  if (!scopesAllow(principal.scopes, scope)) {
    return new ProblemError(403, "forbidden", `this token does not have the ${scope} scope`);
  }
  if (scope === "append" && stream !== undefined && !mayAppendTo(principal, stream)) {
    return new ProblemError(
      403,
      "forbidden",
      `this token appends only to streams whose name starts with ${JSON.stringify(principal.streamPrefix)}`,
    );
  }
  return null;
}

/** Every route's declared scope, by its middleware (test/routeScopes.test.ts reads it from app.routes). */
const declared = new WeakMap<object, TokenScope>();
export const declaredScope = (handler: unknown): TokenScope | undefined =>
  typeof handler === "function" ? declared.get(handler) : undefined;

/**
 * Authenticates every request (bearer token) unless `unless` says otherwise, and keeps who it
 * is in c.var.principal. The API's catch-all: a path no route answers needs a valid token too
 * (401 without, 404 with). Default deny: a route that states no scope (requireScope) needs
 * admin.
 */
export function authenticate(options: { unless?: (c: AuthContext) => boolean } = {}): MiddlewareHandler<AppEnv> {
  return async function authenticated(c, next) {
    if (options.unless?.(c)) return next();
    const principal = c.var.principal ?? (await authenticateBearer(c));
    c.set("principal", principal);
    const routes = matchedRoutes(c).filter((route) => route.method !== "ALL");
    if (routes.length > 0 && !routes.some((route) => declaredScope(route.handler))) {
      const refusal = scopeRefusal(principal, "admin");
      if (refusal) throw refusal;
    }
    await next();
  };
}

/**
 * The route needs `scope`: what a route states, in one word. Uses the principal already known
 * (the catch-all's, the dashboard session's) or authenticates the bearer token; 403 `forbidden`
 * when the scope is missing — for `append`, also outside the token's stream prefix (the route's
 * `:stream`). `unless`: no credentials needed at all (CORQ_PUBLIC_APPEND); `refuse`: answer a
 * 403 another way (the dashboard's HTML page).
 */
export function requireScope(
  scope: TokenScope,
  options: {
    unless?: (c: AuthContext) => boolean;
    refuse?: (c: AuthContext, refusal: ProblemError) => Response | Promise<Response>;
  } = {},
): MiddlewareHandler<AppEnv> {
  const middleware: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (options.unless?.(c)) return next();
    const principal = c.var.principal ?? (await authenticateBearer(c));
    c.set("principal", principal);
    const refusal = scopeRefusal(principal, scope, c.req.param("stream"));
    if (refusal) {
      if (options.refuse) return options.refuse(c, refusal);
      throw refusal;
    }
    await next();
  };
  declared.set(middleware, scope);
  return middleware;
}

/**
 * A bearer token with `scope`, or else a Standard Webhooks signature made with
 * CORQ_WEBHOOK_SECRET (several space-separated secrets are all accepted, for rotation). The
 * signature is a scope of its own: only the route this guards (releasing dead letters).
 */
export function requireScopeOrSignature(scope: TokenScope): MiddlewareHandler<AppEnv> {
  const bearer = requireScope(scope);
  const middleware: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (c.req.header("authorization") !== undefined) return bearer(c, next);
    const secrets = (c.env.CORQ_WEBHOOK_SECRET ?? "").split(/\s+/).filter(Boolean);
    if (secrets.length === 0) {
      throw new ProblemError(401, "webhook_disabled", "webhook disabled: CORQ_WEBHOOK_SECRET is not configured");
    }
    const throttle = c.var.throttle;
    throttle.guard(c);
    const signature = c.req.header("webhook-signature");
    const result = await verify(
      secrets,
      { id: c.req.header("webhook-id"), timestamp: c.req.header("webhook-timestamp"), signature },
      await c.req.text(),
    );
    if (!result.ok) {
      if (signature !== undefined) await throttle.failed(c);
      throw new ProblemError(401, result.reason, `webhook signature refused: ${result.reason.replace(/_/g, " ")}`);
    }
    await next();
  };
  declared.set(middleware, scope);
  return middleware;
}
