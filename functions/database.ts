// How an invocation reaches Postgres. By default every statement goes over Neon's HTTP query
// path (`neon()`): one HTTPS request per statement, answered by Neon's pooler — no connection
// to open, so concurrency is the platform's, not max_connections'. Every corq operation is one
// statement; only an interactive transaction (deleting a subscription) opens a WebSocket
// session, for that transaction alone. CORQ_DB_DRIVER=websocket keeps one WebSocket Pool per
// invocation instead (a Postgres that is not Neon). Never at module scope: Workers reuse
// isolates across requests, and a socket cannot outlive the request that opened it.
import { Pool, neon, neonConfig, type NeonQueryFunction } from "@neondatabase/serverless";
import { CorqError, type SubscriptionDefinition } from "../src/index.js";
import { createCellsRuntime, createCorqRuntime as createCorq } from "../src/internal.js";
import { cellsRuntime } from "../src/cells/cellsRuntime.js";
import { parseCellsEnv } from "../src/cells/cellsEnv.js";
import { present } from "../src/errors.js";
import { createExecutor, type HttpQueryFunction, type PoolLike, type Session } from "../src/db/executor.js";
import { guardPool } from "../src/db/guardPool.js";
import { retentionOption, settings } from "../src/http/env.js";
import type { Env, OpenCorq } from "../src/http/types.js";

// Neon's own endpoint for a host (read once: configureLocal may replace it with a function of its own)
const neonEndpoint = neonConfig.fetchEndpoint;

/**
 * Locally the driver talks to the stand-ins in infra/: the HTTP SQL endpoint and a WebSocket→TCP
 * proxy — one per Postgres server, each serving only its own (cells on several servers: the
 * CORQ_NEON_HTTP_ENDPOINTS and CORQ_NEON_WS_PROXIES pairs, by the connection string's host:port).
 */
function configureLocal(env: Env) {
  const endpoints = byAddress(env.CORQ_NEON_HTTP_ENDPOINTS);
  const single = env.CORQ_NEON_HTTP_ENDPOINT;
  if (endpoints.size > 0)
    neonConfig.fetchEndpoint = (host, port, options) =>
      endpoints.get(address(host, port)) ??
      single ??
      (typeof neonEndpoint === "function" ? neonEndpoint(host, port, options) : neonEndpoint);
  else if (single) neonConfig.fetchEndpoint = single;
  const proxies = byAddress(env.CORQ_NEON_WS_PROXIES);
  const proxy = env.CORQ_NEON_WS_PROXY;
  if (!proxy && proxies.size === 0) return;
  neonConfig.wsProxy = (host, port) => `${proxies.get(address(host, port)) ?? proxy}/v1?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
}

const address = (host: string, port: number | string) => `${host}:${port || 5432}`;

/** `host:port=value` pairs separated by whitespace (local settings only). */
function byAddress(pairs: string | undefined): Map<string, string> {
  const entries = (pairs ?? "").split(/\s+/).filter(Boolean);
  return new Map(entries.map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]));
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
  // a deployment of cells: DATABASE_URL is not used (the home cell is the first of CORQ_CELLS)
  if (env.CORQ_CELLS?.trim()) return openCells(env, subscriptions);
  if (!env.DATABASE_URL) throw new CorqError("database_unavailable", "DATABASE_URL is not configured");
  configureLocal(env);
  return openDatabase(env, env.DATABASE_URL, { subscriptions, counter: { statements: 0 } });
}

/** What every driver's corq is given besides its connection. */
function corqSettings(env: Env, subscriptions: SubscriptionDefinition[]) {
  const { pushAllowPrivate, keyIdleMs, idempotencyTtlMs } = settings(env);
  // the deploy's retention policy, applied when it changed (a malformed one: none; the cron logs why)
  const retention = retentionOption(env).option;
  // recorded on every lease this invocation takes: the keys API says who holds a key
  const holder = `worker invocation ${crypto.randomUUID().slice(0, 8)}`;
  return { subscriptions, pushAllowPrivate, holder, keyIdleMs, idempotencyTtlMs, retention };
}

/**
 * One database's handle. `counter`: this invocation's statements over Neon's HTTP path, each a
 * subrequest (shared by the cells of one invocation: the limit is the invocation's).
 */
function openDatabase(
  env: Env,
  databaseUrl: string,
  options: {
    subscriptions: SubscriptionDefinition[];
    counter: { statements: number };
    common?: ReturnType<typeof corqSettings>;
  },
): OpenCorq {
  const { dbDriver, maxSubrequests } = settings(env);
  const common = options.common ?? corqSettings(env, options.subscriptions);
  const { counter } = options;
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
  const onStatement = () => void counter.statements++;
  // a statement sent again is one more: never into the last few the invocation keeps for itself
  const retries = {
    withinMs: WORKER_RETRY_WITHIN_MS,
    allowed: () => counter.statements < maxSubrequests - SUBREQUESTS_KEPT,
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
    corq: createCorq({ db: http, session, ...common, retries, onStatement }),
    statements: () => counter.statements,
    db: createExecutor(http, { session, retries, onStatement }),
    end: async () => undefined,
  };
}

/**
 * CORQ_CELLS: every cell opened as one database is (its own handle, in `cells`), the directory
 * too, and `corq` the HTTP API's runtime over them (src/cells/cellsRuntime.ts), as `npm run
 * serve` has it. The cells' statements count together: they are this invocation's subrequests.
 */
function openCells(env: Env, subscriptions: SubscriptionDefinition[]): OpenCorq {
  const { cells: urls, directoryUrl } = parseCellsEnv(env as Record<string, string | undefined>);
  configureLocal(env);
  const counter = { statements: 0 };
  const common = corqSettings(env, subscriptions);
  const handles = new Map(
    Object.entries(urls).map(([name, url]) => [name, openDatabase(env, url, { subscriptions, counter, common })]),
  );
  const directory = openDatabase(env, directoryUrl ?? present(Object.values(urls)[0], "the home cell"), {
    subscriptions,
    counter,
    common,
  });
  const deployment = createCellsRuntime({
    ...common,
    cells: urls,
    directoryUrl,
    open: {
      cell: (name) => present(handles.get(name), `cell "${name}"`).corq,
      directory: () => directory.db,
    },
  });
  const corq = cellsRuntime(deployment);
  const home = present(handles.values().next().value, "the home cell");
  const statements = () => sum([...handles.values(), directory].map((handle) => handle.statements()));
  return {
    corq,
    statements: () => (settings(env).dbDriver === "websocket" ? statements() : counter.statements),
    db: home.db,
    // each cell's handle is ended with this one, not by its own user
    cells: new Map([...handles].map(([name, handle]) => [name, { ...handle, cell: name, end: async () => undefined }])),
    prometheus: () => corq.prometheus(),
    end: async () => {
      await Promise.allSettled([...handles.values(), directory].map((handle) => handle.end()));
    },
  };
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
