// The Worker's environment: secrets (wrangler secret put / .dev.vars), vars and bindings.
import { z } from "zod";
import type { CorqRuntime } from "../src/internal.js";
import type { OpenCorq } from "./database.js";
import type { Executor } from "../src/db/executor.js";
import { signingSecretProblem } from "../src/webhookSignature.js";
import { replayKeysFor } from "../src/consume.js";
import { ProblemError } from "./problem.js";
import type { AuthThrottle } from "./authThrottle.js";
import type { Principal } from "./auth.js";
import type { TokenCache } from "./tokenCache.js";
import type { Invoke } from "./dispatch.js";

export interface Env {
  DATABASE_URL?: string;
  CORQ_ADMIN_TOKEN?: string;
  /** One secret, or several separated by spaces while rotating. */
  CORQ_WEBHOOK_SECRET?: string;
  CORQ_PUBLIC_APPEND?: string;
  CORQ_MAX_BODY_BYTES?: string;
  CORQ_CONCURRENCY?: string;
  CORQ_CONSUMER_BUDGET_MS?: string;
  /**
   * Subrequests one invocation may make (Cloudflare: 50 per invocation on the Free plan,
   * 10,000 on Paid): every HTTP statement, push delivery and SELF invocation is one. A consumer
   * stops draining before it runs out.
   */
  CORQ_MAX_SUBREQUESTS?: string;
  /**
   * Keys a consumer claims per statement (default 4, at most 256): their handlers or push
   * deliveries run at once, and their acks go in the statement that claims the next keys.
   * 4 keeps a settle statement and the deliveries within the 6 connections a Worker invocation
   * may have open at once (more wait for a free one, and their leases run meanwhile).
   */
  CORQ_KEYS_PER_CLAIM?: string;
  /**
   * Of those, replaying keys (working through events a rewind queued) a consumer holds at once
   * (default a quarter of CORQ_KEYS_PER_CLAIM, at least 1; at most CORQ_KEYS_PER_CLAIM): the
   * rest stays free for live keys while a replay runs (drain's `replayKeys`).
   */
  CORQ_REPLAY_KEYS?: string;
  /** "true" in the local stack only (npm start, tests): loopback Host names only, a short admin token allowed. */
  CORQ_LOCAL?: string;
  /** "true": push subscriptions may deliver to loopback / private addresses (the local stack sets it). */
  CORQ_PUSH_ALLOW_PRIVATE?: string;
  /** Local only: `host:port/<path token>` of the WebSocket→TCP proxy in front of Postgres (infra/wsProxy.ts). */
  CORQ_NEON_WS_PROXY?: string;
  /** Local only: the URL of the HTTP SQL endpoint standing in for Neon's (infra/httpSqlEndpoint.ts). */
  CORQ_NEON_HTTP_ENDPOINT?: string;
  /**
   * "http" (default): every one-statement operation over Neon's HTTP query path, no connection
   * per invocation; "websocket": a WebSocket Pool per invocation (a Postgres that is not Neon).
   */
  CORQ_DB_DRIVER?: string;
  /** Failed authentications allowed per client and window (functions/authThrottle.ts). */
  CORQ_AUTH_FAILURE_LIMIT?: string;
  CORQ_AUTH_FAILURE_WINDOW_S?: string;
  /** Workers rate-limit binding ([[ratelimits]]): failed authentications counted across isolates. */
  CORQ_AUTH_LIMITER?: { limit(options: { key: string }): Promise<{ success: boolean }> };
  /** Service binding to this Worker: consumer fan-out as separate invocations. */
  SELF?: { fetch(input: Request | string, init?: RequestInit): Promise<Response> };
  /**
   * Set by the Node runtime (src/node/serve.ts), never on Workers: the process's one database
   * handle for every request (instead of a handle per request), and appends that NOTIFY: the
   * process's own consumers wake on it, so an append dispatches nothing.
   */
  CORQ_NODE?: {
    open(): OpenCorq;
    /** SHA-256, synchronous (node:crypto): WebCrypto's digest is a thread-pool job on Node. */
    sha256?(text: string): Uint8Array;
    /** Scoped tokens verified within CORQ_TOKEN_CACHE_MS (functions/tokenCache.ts). */
    tokens?: TokenCache;
    /**
     * A token was revoked: forget the cached ones here and tell the other processes. Called by the
     * revoking handler itself (not matched on the URL: `DELETE /%74okens/:id` revokes as well).
     */
    tokenRevoked?(): void;
  };
  /**
   * Set per request by the Node runtime, never on Workers: the client's address and scheme, from
   * the socket or a trusted proxy's X-Forwarded-* headers (functions/requestClient.ts).
   */
  CORQ_CLIENT?: { address: string; secure: boolean };
}

const positiveInt = (fallback: number, max: number) =>
  z.coerce.number().int().min(1).max(max).catch(fallback).default(fallback);

const settingsSchema = z.object({
  CORQ_MAX_BODY_BYTES: positiveInt(1_048_576, 100 * 1_048_576),
  CORQ_CONCURRENCY: positiveInt(8, 1000),
  CORQ_DB_DRIVER: z.enum(["http", "websocket"]).default("http"),
  CORQ_CONSUMER_BUDGET_MS: positiveInt(10_000, 900_000),
  CORQ_MAX_SUBREQUESTS: positiveInt(50, 10_000_000),
  CORQ_KEYS_PER_CLAIM: positiveInt(4, 256),
  // no fixed default: a quarter of the keys per claim (settings())
  CORQ_REPLAY_KEYS: z.coerce.number().int().min(1).max(256).optional().catch(undefined),
  CORQ_PUBLIC_APPEND: z.string().optional(),
  CORQ_LOCAL: z.string().optional(),
  CORQ_AUTH_FAILURE_LIMIT: positiveInt(10, 1_000_000),
  CORQ_AUTH_FAILURE_WINDOW_S: positiveInt(60, 86_400),
  CORQ_PUSH_ALLOW_PRIVATE: z.string().optional(),
});

export interface Settings {
  maxBodyBytes: number;
  concurrency: number;
  dbDriver: "http" | "websocket";
  consumerBudgetMs: number;
  maxSubrequests: number;
  keysPerClaim: number;
  /** Replaying keys a consumer holds at once, 1–keysPerClaim. */
  replayKeys: number;
  publicAppend: boolean;
  /** Running in the local stack (CORQ_LOCAL=true). */
  local: boolean;
  authFailureLimit: number;
  authFailureWindowMs: number;
  pushAllowPrivate: boolean;
}

/**
 * Numeric knobs with their defaults; a malformed value falls back to the default. A malformed
 * CORQ_WEBHOOK_SECRET is refused outright (every request answers 500 saying so), as a process
 * refuses to start: otherwise it would only show when a signed webhook is needed.
 */
export function settings(env: Env): Settings {
  const secrets = (env.CORQ_WEBHOOK_SECRET ?? "").split(/\s+/).filter(Boolean);
  for (const [i, secret] of secrets.entries()) {
    const problem = signingSecretProblem(secret);
    if (problem)
      throw new ProblemError(
        500,
        "misconfigured",
        `CORQ_WEBHOOK_SECRET (secret ${i + 1} of ${secrets.length}): ${problem}`,
      );
  }
  const parsed = settingsSchema.parse(env);
  return {
    maxBodyBytes: parsed.CORQ_MAX_BODY_BYTES,
    concurrency: parsed.CORQ_CONCURRENCY,
    dbDriver: parsed.CORQ_DB_DRIVER,
    consumerBudgetMs: parsed.CORQ_CONSUMER_BUDGET_MS,
    maxSubrequests: parsed.CORQ_MAX_SUBREQUESTS,
    keysPerClaim: parsed.CORQ_KEYS_PER_CLAIM,
    // more than keysPerClaim would mean no more than keysPerClaim: said as what it means
    replayKeys: Math.min(
      parsed.CORQ_REPLAY_KEYS ?? replayKeysFor(parsed.CORQ_KEYS_PER_CLAIM),
      parsed.CORQ_KEYS_PER_CLAIM,
    ),
    publicAppend: parsed.CORQ_PUBLIC_APPEND === "true",
    local: parsed.CORQ_LOCAL === "true",
    authFailureLimit: parsed.CORQ_AUTH_FAILURE_LIMIT,
    authFailureWindowMs: parsed.CORQ_AUTH_FAILURE_WINDOW_S * 1000,
    pushAllowPrivate: parsed.CORQ_PUSH_ALLOW_PRIVATE === "true",
  };
}

/**
 * Hono's environment for every route: the bindings, the request's corq and its pool (opened on
 * first use), the isolate's auth throttle, and who the request acts as once authenticated.
 */
export type AppEnv = {
  Bindings: Env;
  Variables: {
    corq: () => CorqRuntime;
    db: () => Executor;
    opened: () => OpenCorq;
    throttle: AuthThrottle;
    /** Starts an invocation of this app (a consumer, a dispatch): SELF, else in this one. */
    invoke: Invoke;
    principal: Principal | undefined;
  };
};
