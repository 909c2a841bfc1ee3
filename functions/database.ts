// How an invocation reaches Postgres. By default every statement goes over Neon's HTTP query
// path (`neon()`): one HTTPS request per statement, answered by Neon's pooler — no connection
// to open, so concurrency is the platform's, not max_connections'. Every corq operation is one
// statement; only an interactive transaction (deleting a subscription) opens a WebSocket
// session, for that transaction alone. CORQ_DB_DRIVER=websocket keeps one WebSocket Pool per
// invocation instead (a Postgres that is not Neon). Never at module scope: Workers reuse
// isolates across requests, and a socket cannot outlive the request that opened it.
import { Pool, neon, neonConfig, type NeonQueryFunction } from "@neondatabase/serverless";
import { CorqError, type SubscriptionDefinition } from "../src/index.js";
import { createCorqRuntime as createCorq } from "../src/internal.js";
import { createExecutor, type HttpQueryFunction, type PoolLike, type Session } from "../src/db/executor.js";
import { guardPool } from "../src/db/guardPool.js";
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

/**
 * The HTTP query function, whose requests that never reached its endpoint say which endpoint —
 * where that is safe to say (`corq dev`'s endpoint, or a local DATABASE_URL that Neon's own
 * endpoint can never serve: plain `wrangler dev` on a plain Postgres). A deployed Worker on Neon
 * keeps the generic answer: an address in a public 503 says too much.
 */
function explainingUnreachable(
  http: NeonQueryFunction<false, false>,
  env: Env,
  databaseUrl: string,
): HttpQueryFunction {
  const explain = unreachableExplanation(env, databaseUrl);
  if (!explain) return http;
  const query: HttpQueryFunction["query"] = (text, params, options) =>
    http.query(text, params, options).catch((error: unknown) => {
      // the driver's words for a request that got no answer at all (an HTTP status is another error)
      if (error instanceof Error && error.message.startsWith("Error connecting to database"))
        throw explain((error as { sourceError?: unknown }).sourceError ?? error);
      throw error;
    });
  // a function with .transaction is what the executor takes for Neon's HTTP path
  return Object.assign((...args: Parameters<typeof http>) => http(...args), { query, transaction: http.transaction });
}

function unreachableExplanation(env: Env, databaseUrl: string): ((cause: unknown) => CorqError) | undefined {
  const because = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause));
  const local = env.CORQ_NEON_HTTP_ENDPOINT;
  if (local) {
    // its origin only: the path carries the endpoint's token
    const endpoint = URL.canParse(local) ? new URL(local).origin : "(CORQ_NEON_HTTP_ENDPOINT: not a URL)";
    return (cause) =>
      new CorqError(
        "database_unavailable",
        `the Neon HTTP endpoint ${endpoint} (CORQ_NEON_HTTP_ENDPOINT) could not be reached: ${because(cause)}; is corq dev still running?`,
        { extra: { endpoint }, cause },
      );
  }
  const host = URL.canParse(databaseUrl) ? new URL(databaseUrl).hostname : "";
  if (!isLoopback(host) && !settings(env).local) return undefined;
  const { fetchEndpoint } = neonConfig;
  const endpoint = typeof fetchEndpoint === "function" ? fetchEndpoint(host, 443) : fetchEndpoint;
  return (cause) =>
    new CorqError(
      "database_unavailable",
      `the Neon HTTP endpoint ${endpoint} (Neon's, for DATABASE_URL's host ${host}) could not be reached: ${because(cause)}. ` +
        "A Postgres that is not Neon needs a local endpoint: run this Worker with `npx corq dev` " +
        "(or set CORQ_NEON_HTTP_ENDPOINT)",
      { extra: { endpoint }, cause },
    );
}

const isLoopback = (host: string) =>
  host === "localhost" || host.endsWith(".localhost") || /^127\./.test(host) || host === "[::1]" || host === "::1";

// A client whose socket dies, idle or lent, does not throw in the isolate; the next statement reconnects.
const webSocketPool = (databaseUrl: string): Pool => guardPool(new Pool({ connectionString: databaseUrl }));

// A statement that fails on a connection error (a Neon compute waking or restarting, its proxy
// answering 5xx) is sent again for at most this long before the request answers 503
// (src/db/retries.ts): long enough for a compute to wake (Neon: a few hundred ms to a second or
// two), short enough for a request's caller.
const WORKER_RETRY_WITHIN_MS = 3000;
const SUBREQUESTS_KEPT = 5;

export function openCorq(env: Env, subscriptions: SubscriptionDefinition[]): OpenCorq {
  if (!env.DATABASE_URL) throw new CorqError("database_unavailable", "DATABASE_URL is not configured");
  configureLocal(env);
  const databaseUrl = env.DATABASE_URL;
  const { dbDriver, pushAllowPrivate, keyIdleMs, idempotencyTtlMs, maxSubrequests } = settings(env);
  // the deploy's retention policy, applied when it changed (a malformed one: none; the cron logs why)
  const retention = retentionOption(env).option;
  // recorded on every lease this invocation takes: the keys API says who holds a key
  const holder = `worker invocation ${crypto.randomUUID().slice(0, 8)}`;
  // what every driver's corq is given besides its connection
  const common = { subscriptions, pushAllowPrivate, holder, keyIdleMs, idempotencyTtlMs, retention };
  if (dbDriver === "websocket") {
    const pool = webSocketPool(databaseUrl);
    const retries = { withinMs: WORKER_RETRY_WITHIN_MS };
    return {
      corq: createCorq({ db: pool, ...common, retries }),
      statements: () => 1,
      db: createExecutor(pool, { retries }),
      end: () => pool.end().catch(() => undefined),
    };
  }
  const http = explainingUnreachable(neon(databaseUrl), env, databaseUrl);
  let statements = 0; // each one an HTTPS request: a subrequest of this invocation
  // a statement sent again is one more: never into the last few the invocation keeps for itself
  const retries = {
    withinMs: WORKER_RETRY_WITHIN_MS,
    allowed: () => statements < maxSubrequests - SUBREQUESTS_KEPT,
  };
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
    corq: createCorq({ db: http, session, ...common, retries, onStatement: () => void statements++ }),
    statements: () => statements,
    db: createExecutor(http, { session, retries, onStatement: () => void statements++ }),
    end: async () => undefined,
  };
}
