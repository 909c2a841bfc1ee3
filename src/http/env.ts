// The Worker's environment: secrets (wrangler secret put / .dev.vars), vars and bindings.
import { z } from "zod";
import { signingSecretProblem } from "../webhookSignature.js";
import { replayKeysFor } from "../consume/drainLimits.js";
import {
  DEFAULT_IDEMPOTENCY_TTL_MS,
  DEFAULT_KEY_IDLE_MS,
  MAX_IDEMPOTENCY_TTL_MS,
  MAX_KEY_IDLE_MS,
} from "../corq/options.js";
import { retentionInput, storedPolicy, type StoredPolicy } from "../retentionPolicy.js";
import { ProblemError } from "./problem.js";
import type { Env } from "./types.js";

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
  CORQ_KEY_IDLE_MS: positiveInt(DEFAULT_KEY_IDLE_MS, MAX_KEY_IDLE_MS),
  CORQ_IDEMPOTENCY_TTL_MS: positiveInt(DEFAULT_IDEMPOTENCY_TTL_MS, MAX_IDEMPOTENCY_TTL_MS),
  CORQ_RETENTION_CHUNKS: positiveInt(100, 100_000),
  CORQ_CRON_MINUTES: positiveInt(1, 7 * 24 * 60),
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
  /** An idle key loses its row after this long (createCorq's keyIdleMs). */
  keyIdleMs: number;
  /** How long an Idempotency-Key answers with its append (createCorq's idempotencyTtlMs). */
  idempotencyTtlMs: number;
  /** Chunks a retention pass removes at most (CORQ_RETENTION_CHUNKS). */
  retentionChunks: number;
  /** The cron's period (CORQ_CRON_MINUTES, default 1): wake-ups cover keys due before the next cron. */
  cronMs: number;
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
    keyIdleMs: parsed.CORQ_KEY_IDLE_MS,
    idempotencyTtlMs: parsed.CORQ_IDEMPOTENCY_TTL_MS,
    retentionChunks: parsed.CORQ_RETENTION_CHUNKS,
    cronMs: parsed.CORQ_CRON_MINUTES * 60_000,
  };
}

/**
 * The retention policy this deploy brings (createCorq's `retention` option): from
 * CORQ_RETENTION_MAX_AGE_MS (milliseconds, or "off") and CORQ_RETENTION_STREAMS (comma-separated
 * prefixes). Unset: no option (the stored policy stays as it is). A malformed value is not
 * guessed at: `problem` says what is wrong, and there is no option (the Worker logs it; serve
 * refuses to start).
 */
export function retentionOption(env: Env): { option?: StoredPolicy; problem?: string } {
  const maxAge = env.CORQ_RETENTION_MAX_AGE_MS?.trim();
  const streams = env.CORQ_RETENTION_STREAMS?.trim();
  if (maxAge === undefined || maxAge === "") {
    return streams ? { problem: "CORQ_RETENTION_STREAMS is set without CORQ_RETENTION_MAX_AGE_MS" } : {};
  }
  const maxAgeMs = maxAge === "off" ? null : /^\d{1,16}$/.test(maxAge) ? Number(maxAge) : Number.NaN;
  const parsed = retentionInput.safeParse({
    maxAgeMs,
    streams: streams ? streams.split(",").map((prefix) => prefix.trim()) : undefined,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = issue?.path[0] === "streams" ? "CORQ_RETENTION_STREAMS" : "CORQ_RETENTION_MAX_AGE_MS";
    return { problem: `${name}: ${issue?.message ?? "invalid"} (milliseconds, or "off")` };
  }
  return { option: storedPolicy(parsed.data) };
}
