// Admin bearer token and Standard Webhooks signatures. Both compare in constant time; a
// secret that is not configured refuses everything (never an open admin API).
import type { Context, MiddlewareHandler } from "hono";
import { constantTimeEqual, verify } from "../src/webhookSignature.js";
import { settings, type Env } from "./env.js";
import type { AuthThrottle } from "./authThrottle.js";
import { ProblemError } from "./problem.js";

type AppContext = Context<{ Bindings: Env }>;

/** Shorter admin tokens are refused outside the local stack: too few to withstand guessing. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

const digest = async (text: string) =>
  new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));

const disabled = "the admin API and the dashboard are disabled";

/**
 * Why the configured admin token cannot be used at all (so every admin call and the dashboard
 * login are refused, whatever is sent), or null when it can. Not set: 401, as before. Set but
 * shorter than 32 characters outside the local stack (CORQ_LOCAL=true): 503, a deployment to fix.
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

/** Hashing both sides first makes the comparison independent of the token's length too. */
export async function isAdmin(env: Env, authorization: string | undefined): Promise<boolean> {
  const refusal = adminTokenRefusal(env);
  if (refusal) throw refusal;
  const match = /^Bearer (.+)$/.exec(authorization ?? "");
  if (!match) return false;
  return constantTimeEqual(await digest(match[1]), await digest(env.CORQ_ADMIN_TOKEN!));
}

/**
 * The bearer token must be the admin token. A refusal for the configuration comes first (it
 * depends on no credential), then the throttle; a wrong token counts as a failure, a missing
 * one does not.
 */
async function assertAdmin(c: AppContext, throttle: AuthThrottle): Promise<void> {
  const refusal = adminTokenRefusal(c.env);
  if (refusal) throw refusal;
  throttle.guard(c);
  const authorization = c.req.header("authorization");
  if (await isAdmin(c.env, authorization)) return;
  if (authorization !== undefined) await throttle.failed(c);
  throw new ProblemError(401, "unauthorized", "missing or wrong bearer token");
}

/** Requires `Authorization: Bearer $CORQ_ADMIN_TOKEN`. */
export function requireAdmin(options: {
  throttle: AuthThrottle;
  unless?: (c: AppContext) => boolean;
}): MiddlewareHandler<{ Bindings: Env }> {
  return async function requireAdminToken(c, next) {
    if (!options.unless?.(c)) await assertAdmin(c, options.throttle);
    await next();
  };
}

/**
 * Accepts the admin bearer token, or else a Standard Webhooks signature made with
 * CORQ_WEBHOOK_SECRET (several space-separated secrets are all accepted, for rotation).
 */
export function requireAdminOrSignature(options: { throttle: AuthThrottle }): MiddlewareHandler<{ Bindings: Env }> {
  const { throttle } = options;
  return async function adminOrSignature(c, next) {
    if (c.req.header("authorization") !== undefined) {
      await assertAdmin(c, throttle);
      return next();
    }
    const secrets = (c.env.CORQ_WEBHOOK_SECRET ?? "").split(/\s+/).filter(Boolean);
    if (secrets.length === 0) {
      throw new ProblemError(401, "webhook_disabled", "webhook disabled: CORQ_WEBHOOK_SECRET is not configured");
    }
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
}
