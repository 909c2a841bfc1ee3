// One Neon Pool per invocation (never at module scope: Workers reuse isolates across
// requests, and a socket cannot outlive the request that opened it).
import { Pool, neonConfig } from "@neondatabase/serverless";
import { createCorq, CorqError, type Corq, type SubscriptionDefinition } from "../src/index.js";
import { createExecutor, type Executor } from "../src/db/executor.js";
import { settings, type Env } from "./env.js";

/** Locally the Neon driver talks to Postgres through a plain WebSocket→TCP proxy. */
function configureLocalProxy(proxy: string | undefined) {
  if (!proxy) return;
  neonConfig.wsProxy = (host, port) => `${proxy}/v1?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
}

export interface OpenCorq {
  corq: Corq;
  pool: Pool;
  /** The same pool for the Worker's own statements (the dashboard's sessions). */
  db: Executor;
  /** Closes the pool; pass to ctx.waitUntil. */
  end(): Promise<void>;
}

export function openCorq(env: Env, subscriptions: SubscriptionDefinition[]): OpenCorq {
  if (!env.DATABASE_URL) throw new CorqError("database_unavailable", "DATABASE_URL is not configured");
  configureLocalProxy(env.CORQ_NEON_WS_PROXY);
  const pool = new Pool({ connectionString: env.DATABASE_URL });
  // An idle client whose socket dies emits 'error' on the pool; the next query reconnects.
  pool.on("error", () => undefined);
  return {
    corq: createCorq({ db: pool, subscriptions, pushAllowPrivate: settings(env).pushAllowPrivate }),
    pool,
    db: createExecutor(pool),
    end: () => pool.end().catch(() => undefined),
  };
}
