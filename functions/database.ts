// How an invocation reaches Postgres. By default every statement goes over Neon's HTTP query
// path (`neon()`): one HTTPS request per statement, answered by Neon's pooler — no connection
// to open, so concurrency is the platform's, not max_connections'. Every corq operation is one
// statement; only an interactive transaction (deleting a subscription) opens a WebSocket
// session, for that transaction alone. CORQ_DB_DRIVER=websocket keeps one WebSocket Pool per
// invocation instead (a Postgres that is not Neon). Never at module scope: Workers reuse
// isolates across requests, and a socket cannot outlive the request that opened it.
import { Pool, neon, neonConfig } from "@neondatabase/serverless";
import { CorqError, type SubscriptionDefinition } from "../src/index.js";
import { createCorqRuntime as createCorq } from "../src/internal.js";
import { createExecutor, type PoolLike, type Session } from "../src/db/executor.js";
import { retentionOption, settings } from "../src/http/env.js";
import type { Env, OpenCorq } from "../src/http/types.js";

/** Locally the driver talks to the stand-ins in infra/: the HTTP SQL endpoint and a WebSocket→TCP proxy. */
function configureLocal(env: Env) {
  if (env.CORQ_NEON_HTTP_ENDPOINT) neonConfig.fetchEndpoint = env.CORQ_NEON_HTTP_ENDPOINT;
  const proxy = env.CORQ_NEON_WS_PROXY;
  if (!proxy) return;
  neonConfig.wsProxy = (host, port) => `${proxy}/v1?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
}

function webSocketPool(databaseUrl: string): Pool {
  const pool = new Pool({ connectionString: databaseUrl });
  // An idle client whose socket dies emits 'error' on the pool; the next query reconnects.
  pool.on("error", () => undefined);
  return pool;
}

export function openCorq(env: Env, subscriptions: SubscriptionDefinition[]): OpenCorq {
  if (!env.DATABASE_URL) throw new CorqError("database_unavailable", "DATABASE_URL is not configured");
  configureLocal(env);
  const databaseUrl = env.DATABASE_URL;
  const { dbDriver, pushAllowPrivate, keyIdleMs, idempotencyTtlMs } = settings(env);
  // the deploy's retention policy, applied when it changed (a malformed one: none; the cron logs why)
  const retention = retentionOption(env).option;
  // recorded on every lease this invocation takes: the keys API says who holds a key
  const holder = `worker invocation ${crypto.randomUUID().slice(0, 8)}`;
  if (dbDriver === "websocket") {
    const pool = webSocketPool(databaseUrl);
    return {
      corq: createCorq({
        db: pool,
        subscriptions,
        pushAllowPrivate,
        holder,
        keyIdleMs,
        idempotencyTtlMs,
        retention,
      }),
      statements: () => 1,
      db: createExecutor(pool),
      end: () => pool.end().catch(() => undefined),
    };
  }
  const http = neon(databaseUrl);
  let statements = 0; // each one an HTTPS request: a subrequest of this invocation
  // a WebSocket session for one interactive transaction, closed after it
  const session: Session = async (use) => {
    const pool = webSocketPool(databaseUrl);
    try {
      return await use(pool as unknown as PoolLike);
    } finally {
      await pool.end().catch(() => undefined);
    }
  };
  return {
    corq: createCorq({
      db: http,
      session,
      subscriptions,
      pushAllowPrivate,
      holder,
      keyIdleMs,
      idempotencyTtlMs,
      retention,
      onStatement: () => void statements++,
    }),
    statements: () => statements,
    db: createExecutor(http, { session, onStatement: () => void statements++ }),
    end: async () => undefined,
  };
}
