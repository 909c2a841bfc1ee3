// createCorq's options, parsed once, and what every part of the Corq gets (src/corq.ts wires them).
import { z } from "zod";
import { parseOrThrow, parseSubscriptions, type Subscription } from "../config.js";
import { parseAppMigrations, type AppMigration } from "../db/appMigrations.js";
import type { Executor, ExecutorOptions } from "../db/executor.js";
import { retentionInput, storedPolicy, type StoredPolicy } from "../retentionPolicy.js";
import type { CorqOptions } from "../types.js";
import { withSharedSchemas } from "../eventSchemas.js";

export const limit = (max: number, fallback: number) => z.number().int().min(1).max(max).default(fallback);

/** createCorq({ keyIdleMs }) and CORQ_KEY_IDLE_MS: 7 days by default, at most about 10 years. */
export const DEFAULT_KEY_IDLE_MS = 7 * 86_400_000;
export const MAX_KEY_IDLE_MS = 3650 * 86_400_000;

/** createCorq({ idempotencyTtlMs }) and CORQ_IDEMPOTENCY_TTL_MS: 24 hours by default, at most 366 days. */
export const DEFAULT_IDEMPOTENCY_TTL_MS = 86_400_000;
export const MAX_IDEMPOTENCY_TTL_MS = 366 * 86_400_000;

/** createCorq's options after validation: what the parts read. */
export interface CorqSettings {
  /** This instance's code subscriptions, by name. */
  code: Map<string, Subscription>;
  appMigrations: AppMigration[];
  advanceBatchSize: number;
  activityFlushMs: number;
  /** An idle key loses its row after this long (housekeeping). */
  keyIdleMs: number;
  /** How long an append's idempotency key answers with that append. */
  idempotencyTtlMs: number;
  notify: boolean;
  pushAllowPrivate: boolean;
  /** Who this instance's consumers are (recorded on each lease). */
  holder: string;
  /** The retention policy this instance was given (createCorq's `retention`); undefined: none. */
  retention: StoredPolicy | undefined;
  /** For an executor made over a caller's connection (append's `tx`). */
  statementOptions: Pick<ExecutorOptions, "onStatement" | "retries">;
}

/** What every part gets: the one door to the database (opened on first use) and the parsed options. */
export interface PartDeps {
  executor: () => Promise<Executor>;
  settings: CorqSettings;
}

export function parseCorqOptions(options: CorqOptions): CorqSettings {
  const code = parseSubscriptions(withSharedSchemas(options.subscriptions ?? [], options.schemas));
  const appMigrations = parseAppMigrations(options.migrations ?? []);
  const advanceBatchSize = parseOrThrow(
    limit(100_000, 5000),
    options.advanceBatchSize,
    "invalid_config",
    "advanceBatchSize",
  );
  const activityFlushMs = parseOrThrow(
    z.number().int().min(0).max(60_000).default(0),
    options.activityFlushMs,
    "invalid_config",
    "activityFlushMs",
  );
  const keyIdleMs = parseOrThrow(
    z.number().int().min(1).max(MAX_KEY_IDLE_MS).default(DEFAULT_KEY_IDLE_MS),
    options.keyIdleMs,
    "invalid_config",
    "keyIdleMs",
  );
  const idempotencyTtlMs = parseOrThrow(
    z.number().int().min(1).max(MAX_IDEMPOTENCY_TTL_MS).default(DEFAULT_IDEMPOTENCY_TTL_MS),
    options.idempotencyTtlMs,
    "invalid_config",
    "idempotencyTtlMs",
  );
  const holder =
    parseOrThrow(z.string().min(1).max(200).optional(), options.holder, "invalid_config", "holder") ?? defaultHolder();
  const retries = parseOrThrow(retryPolicy, options.retries, "invalid_config", "retries");
  const retention =
    options.retention === undefined
      ? undefined
      : storedPolicy(parseOrThrow(retentionInput, options.retention, "invalid_config", "retention"));
  return {
    code,
    appMigrations,
    retention,
    advanceBatchSize,
    activityFlushMs,
    keyIdleMs,
    idempotencyTtlMs,
    notify: options.notify === true,
    pushAllowPrivate: options.pushAllowPrivate ?? globalThis.process?.env?.CORQ_PUSH_ALLOW_PRIVATE === "true",
    holder,
    statementOptions: { onStatement: options.onStatement, retries },
  };
}

const retryPolicy = z
  .object({
    withinMs: z.number().int().min(0).max(600_000).optional(),
    allowed: z.custom<() => boolean>((value) => typeof value === "function", "a function").optional(),
  })
  .strict()
  .optional();

/** Who this instance's consumers are when the caller does not say: the process, or else a random invocation id. */
function defaultHolder(): string {
  const id = crypto.randomUUID().slice(0, 8);
  const pid = globalThis.process?.pid;
  const host = globalThis.process?.env?.HOSTNAME;
  return typeof pid === "number" && pid > 1 ? `process ${pid}${host ? ` on ${host}` : ""} (${id})` : `invocation ${id}`;
}
