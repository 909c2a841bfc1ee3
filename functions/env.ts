// The Worker's environment: secrets (wrangler secret put / .dev.vars), vars and bindings.
import { z } from "zod";
import type { Corq } from "../src/index.js";

export interface Env {
  DATABASE_URL?: string;
  CORQ_ADMIN_TOKEN?: string;
  /** One secret, or several separated by spaces while rotating. */
  CORQ_WEBHOOK_SECRET?: string;
  CORQ_PUBLIC_APPEND?: string;
  CORQ_MAX_BODY_BYTES?: string;
  CORQ_CONCURRENCY?: string;
  CORQ_CONSUMER_BUDGET_MS?: string;
  /** Local only: `host:port/<path token>` of the WebSocket→TCP proxy in front of Postgres (infra/wsProxy.ts). */
  CORQ_NEON_WS_PROXY?: string;
  /** Service binding to this Worker: consumer fan-out as separate invocations. */
  SELF?: { fetch(input: Request | string, init?: RequestInit): Promise<Response> };
}

const positiveInt = (fallback: number, max: number) =>
  z.coerce.number().int().min(1).max(max).catch(fallback).default(fallback);

const settingsSchema = z.object({
  CORQ_MAX_BODY_BYTES: positiveInt(1_048_576, 100 * 1_048_576),
  CORQ_CONCURRENCY: positiveInt(8, 1000),
  CORQ_CONSUMER_BUDGET_MS: positiveInt(10_000, 900_000),
  CORQ_PUBLIC_APPEND: z.string().optional(),
});

export interface Settings {
  maxBodyBytes: number;
  concurrency: number;
  consumerBudgetMs: number;
  publicAppend: boolean;
}

/** Numeric knobs with their defaults; a malformed value falls back to the default. */
export function settings(env: Env): Settings {
  const parsed = settingsSchema.parse(env);
  return {
    maxBodyBytes: parsed.CORQ_MAX_BODY_BYTES,
    concurrency: parsed.CORQ_CONCURRENCY,
    consumerBudgetMs: parsed.CORQ_CONSUMER_BUDGET_MS,
    publicAppend: parsed.CORQ_PUBLIC_APPEND === "true",
  };
}

/** Hono's environment for every route: the bindings, and the request's corq (opened on first use). */
export type AppEnv = { Bindings: Env; Variables: { corq: () => Corq } };
