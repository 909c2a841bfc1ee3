// Admin bearer token and Standard Webhooks signatures. Both compare in constant time; a
// secret that is not configured refuses everything (never an open admin API).
import type { Context, MiddlewareHandler } from "hono";
import { constantTimeEqual, verify } from "../src/webhookSignature.js";
import type { Env } from "./env.js";
import { ProblemError } from "./problem.js";

type AppContext = Context<{ Bindings: Env }>;

const digest = async (text: string) =>
  new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));

/** Hashing both sides first makes the comparison independent of the token's length too. */
export async function isAdmin(env: Env, authorization: string | undefined): Promise<boolean> {
  if (!env.CORQ_ADMIN_TOKEN) {
    throw new ProblemError(401, "admin_disabled", "admin API disabled: CORQ_ADMIN_TOKEN is not configured");
  }
  const match = /^Bearer (.+)$/.exec(authorization ?? "");
  if (!match) return false;
  return constantTimeEqual(await digest(match[1]), await digest(env.CORQ_ADMIN_TOKEN));
}

async function assertAdmin(c: AppContext): Promise<void> {
  if (!(await isAdmin(c.env, c.req.header("authorization")))) {
    throw new ProblemError(401, "unauthorized", "missing or wrong bearer token");
  }
}

/** Requires `Authorization: Bearer $CORQ_ADMIN_TOKEN`. */
export function requireAdmin(options: { unless?: (c: AppContext) => boolean } = {}): MiddlewareHandler<{ Bindings: Env }> {
  return async function requireAdminToken(c, next) {
    if (!options.unless?.(c)) await assertAdmin(c);
    await next();
  };
}

/**
 * Accepts the admin bearer token, or else a Standard Webhooks signature made with
 * CORQ_WEBHOOK_SECRET (several space-separated secrets are all accepted, for rotation).
 */
export function requireAdminOrSignature(): MiddlewareHandler<{ Bindings: Env }> {
  return async function adminOrSignature(c, next) {
    if (c.req.header("authorization") !== undefined) {
      await assertAdmin(c);
      return next();
    }
    const secrets = (c.env.CORQ_WEBHOOK_SECRET ?? "").split(/\s+/).filter(Boolean);
    if (secrets.length === 0) {
      throw new ProblemError(401, "webhook_disabled", "webhook disabled: CORQ_WEBHOOK_SECRET is not configured");
    }
    const result = await verify(
      secrets,
      {
        id: c.req.header("webhook-id"),
        timestamp: c.req.header("webhook-timestamp"),
        signature: c.req.header("webhook-signature"),
      },
      await c.req.text(),
    );
    if (!result.ok) throw new ProblemError(401, result.reason, `webhook signature refused: ${result.reason.replace(/_/g, " ")}`);
    await next();
  };
}
