// The HTTP app's types, in one leaf module: the environment it reads, what a runtime gives it
// (a database handle per request, a way to invoke itself), and what its middleware hands the
// routes. Everything in src/http/ and the runtimes import them from here; this file imports no
// module of src/http/, so no two of them form a circle through their types.
import type { Executor } from "../db/executor.js";
import type { CorqRuntime } from "../runtimeTypes.js";
import type { TokenScope } from "../tokens.js";
import type { SubscriptionDefinition } from "../types.js";

export interface Env {
  DATABASE_URL?: string;
  /**
   * A deployment of cells (src/cells/cellsEnv.ts): `name=postgres://…` pairs, home first. When
   * set, DATABASE_URL is not used; a secret (its URLs carry passwords).
   */
  CORQ_CELLS?: string;
  /** With CORQ_CELLS: where the cells' directory lives (default: the home cell's database). */
  CORQ_DIRECTORY_URL?: string;
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
  /** How long an idle key keeps its row, in ms (default 7 days): housekeeping deletes it after that. */
  CORQ_KEY_IDLE_MS?: string;
  /** How long an append's Idempotency-Key answers with that append, in ms (default 24 hours, at most 366 days). */
  CORQ_IDEMPOTENCY_TTL_MS?: string;
  /** "true" in the local stack only (npm start, tests): loopback Host names only, a short admin token allowed. */
  CORQ_LOCAL?: string;
  /** "true": push subscriptions may deliver to loopback / private addresses (the local stack sets it). */
  CORQ_PUSH_ALLOW_PRIVATE?: string;
  /** Local only: `host:port/<path token>` of the WebSocket→TCP proxy in front of Postgres (cli/dev/wsProxy.ts). */
  CORQ_NEON_WS_PROXY?: string;
  /** Local only: the URL of the HTTP SQL endpoint standing in for Neon's (cli/dev/httpSqlEndpoint.ts). */
  CORQ_NEON_HTTP_ENDPOINT?: string;
  /**
   * Local only, for cells on several Postgres servers: `host:port=<endpoint URL>` pairs (whitespace
   * between), the HTTP SQL endpoint of each server; any other goes to CORQ_NEON_HTTP_ENDPOINT.
   */
  CORQ_NEON_HTTP_ENDPOINTS?: string;
  /** Local only, the same for the WebSocket proxies: `host:port=<CORQ_NEON_WS_PROXY's value>` pairs. */
  CORQ_NEON_WS_PROXIES?: string;
  /**
   * "http" (default): every one-statement operation over Neon's HTTP query path, no connection
   * per invocation; "websocket": a WebSocket Pool per invocation (a Postgres that is not Neon).
   */
  CORQ_DB_DRIVER?: string;
  /** Failed authentications allowed per client and window (src/http/authThrottle.ts). */
  CORQ_AUTH_FAILURE_LIMIT?: string;
  CORQ_AUTH_FAILURE_WINDOW_S?: string;
  /** Workers rate-limit binding ([[ratelimits]]): failed authentications counted across isolates. */
  CORQ_AUTH_LIMITER?: { limit(options: { key: string }): Promise<{ success: boolean }> };
  /**
   * Retention (docs/http-api.md, "Retention"): remove events older than this many ms, or "off"
   * (unset: this deploy has no say, and the policy stored by PUT /retention stays in force).
   */
  CORQ_RETENTION_MAX_AGE_MS?: string;
  /** With CORQ_RETENTION_MAX_AGE_MS: only streams starting with one of these comma-separated prefixes. */
  CORQ_RETENTION_STREAMS?: string;
  /** Chunks one retention pass removes at most (a cron tick, POST /retention/run; default 100, within 10 s and the subrequests). */
  CORQ_RETENTION_CHUNKS?: string;
  /**
   * Durable Object binding to corq's wake-ups (CorqWakeUps, functions/wakeUps.ts): keys due
   * before the next cron (a backoff, a delay, a rate limit's room, a Retry-After, a lease) are
   * dispatched at their time. Without it they wait for the next cron or append (GET /doctor says so).
   */
  CORQ_WAKE_UPS?: WakeUpsNamespace;
  /**
   * The cron's period in minutes as wrangler.toml's `crons` has it (default 1, `* * * * *`;
   * `*\/30 * * * *` is 30): a key due later than one period ahead is left to a later cron.
   */
  CORQ_CRON_MINUTES?: string;
  /** Service binding to this Worker: consumer fan-out as separate invocations. */
  SELF?: { fetch(input: Request | string, init?: RequestInit): Promise<Response> };
  /**
   * Set by the Node runtime (src/node/serve.ts), never on Workers: appends that NOTIFY (the
   * process's own consumers wake on it, so an append dispatches nothing), and its caches.
   */
  CORQ_NODE?: {
    /** SHA-256, synchronous (node:crypto): WebCrypto's digest is a thread-pool job on Node. */
    sha256?(text: string): Uint8Array;
    /** Scoped tokens verified within CORQ_TOKEN_CACHE_MS (src/http/tokenCache.ts). */
    tokens?: TokenCache;
    /**
     * A token was revoked: forget the cached ones here and tell the other processes. Called by the
     * revoking handler itself (not matched on the URL: `DELETE /%74okens/:id` revokes as well).
     */
    tokenRevoked?(): void;
  };
  /**
   * Set per request by the Node runtime, never on Workers: the client's address and scheme, from
   * the socket or a trusted proxy's X-Forwarded-* headers (src/http/requestClient.ts).
   */
  CORQ_CLIENT?: { address: string; secure: boolean };
}

/** A database handle: what one invocation (Workers) or the process (Node) reaches Postgres with. */
export interface OpenCorq {
  corq: CorqRuntime;
  /** Subrequests this invocation spent on statements so far (1 on the WebSocket path: one session). */
  statements(): number;
  /** The same database for the Worker's own statements (the dashboard's sessions). */
  db: Executor;
  /** Closes what the invocation opened; pass to ctx.waitUntil. */
  end(): Promise<void>;
  /**
   * Over cells (CORQ_CELLS): each cell's own handle, home first — its runtime (its consumer
   * slots, its horizon), its database — sharing this invocation's statements; ended with this one.
   * A dispatch runs per cell on these (src/http/dispatch.ts).
   */
  cells?: Map<string, OpenCorq>;
  /** A cell's own handle (in `cells`): its name. */
  cell?: string;
  /**
   * GET /metrics' text, where it is not `toPrometheus(corq.metrics())`: a deployment of cells
   * renders every cell's, labelled with its cell (src/cells/cellsRuntime.ts).
   */
  prometheus?: () => Promise<string>;
}

/** How a runtime opens a handle: Workers one per invocation (functions/database.ts), Node the process's. */
export type OpenCorqFor = (env: Env, subscriptions: SubscriptionDefinition[]) => OpenCorq;

/** What corq uses of a Durable Object namespace binding (the wake-ups'). */
export interface WakeUpsNamespace {
  idFromName(name: string): object;
  get(id: object): { fetch(input: Request | string, init?: RequestInit): Promise<Response> };
}

/** Starts an invocation of this app (src/http/dispatch.ts: selfInvoker). */
export interface Invoke {
  (path: string, init: RequestInit): Promise<Response>;
  /**
   * With the wake-up binding: asks for a dispatch of this app at `epochMs` (src/http/wakeUps.ts).
   * Undefined without it (and on Node, whose runner wakes itself at the next due time).
   */
  wakeAt?: (epochMs: number) => Promise<void>;
}

/** Who a request acts as. */
export interface Principal {
  /** The scoped token's id; null for the bootstrap admin (CORQ_ADMIN_TOKEN). */
  tokenId: string | null;
  scopes: readonly TokenScope[];
  /** Appends only to streams starting with it (null: any). */
  streamPrefix: string | null;
}

/** What the throttle reads of a request (any Hono context). */
export type AuthRequest = { env: Env; req: { url: string; header(name: string): string | undefined } };

export interface AuthThrottle {
  /** Throws 429 while the client is blocked; call before checking its credentials. */
  guard(c: AuthRequest): void;
  /** Counts a failed authentication; throws 429 when the rate-limit binding says it was one too many. */
  failed(c: AuthRequest): Promise<void>;
}

/** The Node runtime's cache of verified scoped tokens (src/http/tokenCache.ts). */
export interface TokenCache {
  /** The principal verified for this secret hash within the TTL, or undefined. */
  get(hash: string): Principal | undefined;
  /**
   * Keeps a principal verified by a lookup that began at `since` (from `generation()`): a lookup
   * that began before the last `clear()` may have read a token revoked meanwhile, and is not kept.
   */
  set(hash: string, principal: Principal, since: number): void;
  /** Where lookups are now; pass to `set`. */
  generation(): number;
  /** Forgets every entry (a token was revoked). */
  clear(): void;
}

export interface RequestClient {
  /** The client's address; "unknown" when the runtime cannot tell (every such request shares one bucket). */
  address: string;
  /** Whether the client's connection (to us, or to the trusted proxy in front) is https. */
  secure: boolean;
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
    /** A database handle of its own, for work that outlives the request (the caller ends it). */
    openCorq: () => OpenCorq;
    throttle: AuthThrottle;
    /** Starts an invocation of this app (a consumer, a dispatch): SELF, else in this one. */
    invoke: Invoke;
    principal: Principal | undefined;
    /** The prefix the app is mounted under ("" at the root; src/http/basePath.ts): its links and cookie go under it. */
    basePath: string;
  };
};
