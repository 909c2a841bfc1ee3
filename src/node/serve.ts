// The self-hosted Node runtime: ONE process with the Worker's own HTTP API and dashboard (the
// same Hono app, src/http/api.ts, on @hono/node-server), and the advancer and consumers
// in-process (runner.ts), woken by LISTEN/NOTIFY (wakeUps.ts: on CORQ_LISTEN_DATABASE_URL when
// DATABASE_URL is a transaction-mode pooler, else polled every CORQ_POLL_MS, and said so at
// start). Several processes on one database share the work; SIGTERM stops them gracefully
// (stopOnSignals).
//
// What the Worker gets from the platform, the process provides itself:
//   env / bindings          the process environment's CORQ_* variables, plus CORQ_NODE: the
//                           process's one corq (one pool) instead of a handle per request
//   executionCtx.waitUntil  background work tracked here and awaited at shutdown
//   the cron                the runner: NOTIFY wake-ups, next-due timers and a safety net
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import type { Socket } from "node:net";
import { serve as listen } from "@hono/node-server";
import pg from "pg";
import { z } from "zod";
import { createApi } from "../http/api.js";
import { parseBasePath, pathWithin } from "../http/basePath.js";
import { adminTokenRefusal } from "../http/auth.js";
import { retentionOption, settings } from "../http/env.js";
import { createTokenCache } from "../http/tokenCache.js";
import {
  createCellsRuntime,
  createCorqRuntime,
  DEFAULT_KEYS_PER_CLAIM,
  MAX_KEYS_PER_CLAIM,
  type CorqRuntime,
} from "../internal.js";
import { cellsRuntime } from "../cells/cellsRuntime.js";
import { parseCellsEnv } from "../cells/cellsEnv.js";
import { present } from "../errors.js";
import type { CellsRuntime } from "../cells/createCells.js";
import { createExecutor } from "../db/executor.js";
import { guardPool } from "../db/guardPool.js";
import { notifyWake } from "../sql/log/notify.js";
import type { AnyEvents, EventMap, EventSchemas, SubscriptionDefinition } from "../types.js";
import { withSharedSchemas } from "../eventSchemas.js";
import type { AppMigration } from "../db/appMigrations.js";
import { createRunner, type Runner } from "./runner.js";
import { forwardedClient, parseTrustedProxies } from "./forwarded.js";
import type { WakeListener } from "./wakeListener.js";
import { hearWakeUps } from "./wakeUps.js";
import type { Env, OpenCorq, TokenCache } from "../http/types.js";

/** `startServe<Events>(…)`: subscriptions checked against the app's event map (docs/typed-events.md). */
export interface ServeOptions<E extends EventMap = AnyEvents> {
  /** The app's code subscriptions (this process runs their handlers; push subscriptions too). */
  subscriptions: SubscriptionDefinition<E>[];
  /** Standard Schema validators by event name, for every subscription that takes the name (its own win). */
  schemas?: EventSchemas<E>;
  /** The app's own SQL (its projections' tables), applied at start after corq's schema, each once. */
  migrations?: AppMigration[];
  /**
   * The environment: DATABASE_URL (required; or CORQ_CELLS, a deployment of cells), the Worker's
   * CORQ_* variables (docs/http-api.md, "Configuration") and the Node runtime's own
   * (docs/self-hosting.md). Default: process.env.
   */
  env?: Record<string, string | undefined>;
  /** Port to listen on; 0 picks a free one. Default: PORT or 8787. */
  port?: number;
  /** Address to listen on. Default: HOST or 127.0.0.1 (in a container: 0.0.0.0). */
  host?: string;
  /** Apply corq's migrations and the app's first (idempotent; concurrent starts take turns). Default true. */
  migrate?: boolean;
  /**
   * What this process runs: "all" (the HTTP API and the consumers), "api" (the HTTP API and
   * dashboard only: its appends wake the workers by NOTIFY) or "worker" (the advancer and the
   * consumers, no HTTP). Default: CORQ_ROLE, else "all".
   */
  role?: ServeRole;
  /**
   * Serve the HTTP API and dashboard under this prefix ("/corq"), as createWorker's `basePath`
   * (functions/createWorker.ts): behind a proxy that forwards `/corq/*` with the path whole.
   * Its links, redirects and cookie Path go under it; a request outside it answers 404. "" or
   * "/" (default) is the root; a malformed one refuses to start.
   */
  basePath?: string;
  log?: (line: string) => void;
}

export type ServeRole = "all" | "api" | "worker";

export interface RunningServe {
  /** http://127.0.0.1:<port> (or the host listened on, when it is not a wildcard); "" for a worker (no HTTP). */
  url: string;
  role: ServeRole;
  port: number;
  runner: Runner;
  listener: WakeListener;
  /** The graceful stop (see Runner.stop); resolves once everything is closed. */
  stop(options?: { boundMs?: number }): Promise<{ abandoned: number }>;
}

const int = (fallback: number, min: number, max: number) =>
  z.coerce.number().int().min(min).max(max).catch(fallback).default(fallback);

/** The Node runtime's own knobs (the Worker's are in src/http/env.ts). */
const nodeSettingsSchema = z.object({
  /** Advance and look for ready keys at least this often, woken or not (ms). */
  CORQ_SAFETY_NET_MS: int(5000, 50, 3_600_000),
  /**
   * The same while LISTEN does not receive notifications (a transaction-mode pooler: wakeUps.ts),
   * at most CORQ_SAFETY_NET_MS (ms). A look is an advance and a read of the ready keys: a few
   * statements, about 1 ms of the database's time.
   */
  CORQ_POLL_MS: int(1000, 50, 3_600_000),
  /** Where the LISTEN goes when DATABASE_URL is a transaction-mode pooler: a direct connection to the same database. */
  CORQ_LISTEN_DATABASE_URL: z.string().optional(),
  /** How long SIGTERM waits for in-flight batches before it aborts their handlers (ms). */
  CORQ_SHUTDOWN_MS: int(10_000, 0, 3_600_000),
  /** After aborting: how long handlers get to give up before the process leaves them (ms). */
  CORQ_SHUTDOWN_GRACE_MS: int(2000, 0, 600_000),
  /** Connections of the HTTP API's pool (the consumers have one of CORQ_CONCURRENCY + 2 of their own). */
  CORQ_POOL_SIZE: int(10, 1, 1000),
  /** How long a verified scoped token is trusted without a lookup (ms; 0: every request looks it up). */
  CORQ_TOKEN_CACHE_MS: int(0, 0, 60_000),
  /** What this process runs (ServeOptions.role). */
  CORQ_ROLE: z.enum(["all", "api", "worker"]).default("all"),
  /** Keys a drain claims at once: the library's default here (the Worker's 4 is for its subrequest budget). */
  CORQ_KEYS_PER_CLAIM: int(DEFAULT_KEYS_PER_CLAIM, 1, MAX_KEYS_PER_CLAIM),
  /** Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (forwarded.ts); default none. */
  CORQ_TRUSTED_PROXIES: z.string().optional(),
  /** A retention pass this often (ms); one that stopped with more to remove goes on at the next safety-net tick. */
  CORQ_RETENTION_EVERY_MS: int(60_000, 1000, 86_400_000),
  /** An alerts pass this often (ms): a key that dies is an alert within about that. */
  CORQ_ALERTS_EVERY_MS: int(1000, 100, 3_600_000),
});

export function nodeSettings(env: Record<string, string | undefined>) {
  const parsed = nodeSettingsSchema.parse(env);
  const base = settings({ ...env, CORQ_KEYS_PER_CLAIM: String(parsed.CORQ_KEYS_PER_CLAIM) } as Env);
  // a malformed retention policy refuses to start (as a malformed proxy list does)
  const retention = retentionOption(env as Env);
  if (retention.problem) throw new Error(retention.problem);
  return {
    concurrency: base.concurrency,
    keysPerClaim: base.keysPerClaim,
    replayKeys: base.replayKeys,
    consumerBudgetMs: base.consumerBudgetMs,
    safetyNetMs: parsed.CORQ_SAFETY_NET_MS,
    pollMs: Math.min(parsed.CORQ_POLL_MS, parsed.CORQ_SAFETY_NET_MS),
    // (empty: unset, as a blank line in an env file gives it)
    listenDatabaseUrl: parsed.CORQ_LISTEN_DATABASE_URL?.trim() || undefined,
    shutdownMs: parsed.CORQ_SHUTDOWN_MS,
    shutdownGraceMs: parsed.CORQ_SHUTDOWN_GRACE_MS,
    poolSize: parsed.CORQ_POOL_SIZE,
    tokenCacheMs: parsed.CORQ_TOKEN_CACHE_MS,
    role: parsed.CORQ_ROLE,
    pushAllowPrivate: base.pushAllowPrivate,
    keyIdleMs: base.keyIdleMs,
    idempotencyTtlMs: base.idempotencyTtlMs,
    // a malformed list refuses to start (it throws here)
    trustedProxies: parseTrustedProxies(parsed.CORQ_TRUSTED_PROXIES),
    retention: retention.option,
    retentionPasses: { everyMs: parsed.CORQ_RETENTION_EVERY_MS, maxChunks: base.retentionChunks },
    alertPasses: { everyMs: parsed.CORQ_ALERTS_EVERY_MS, maxSends: 100 },
  };
}

const reads = new Set(["GET", "HEAD", "OPTIONS"]);
// writes that wake nobody: an append wakes in its own way (`appended`); /advance, /consume and
// /dispatch are the caller driving the pipeline by hand (as on Workers, where they kick nothing either)
const wakesNobody = /^\/(streams\/[^/]+\/events|advance|consume\/[^/]+|dispatch)\/?$/;
const NOTIFY_EVERY_MS = 5;
// how long the start waits for the LISTEN's first probe (wakeUps.ts), so that "ready" comes after
// the word on wake-ups: a probe takes a few ms on a direct connection, 2 s at most
const LISTEN_CHECK_MS = 3000;
const appendPath = /^\/streams\/[^/]+\/events\/?$/;

export async function startServe<E extends EventMap = AnyEvents>(
  options: NoInfer<ServeOptions<E>>,
): Promise<RunningServe>;
export async function startServe(options: ServeOptions): Promise<RunningServe> {
  const subscriptions = withSharedSchemas(options.subscriptions, options.schemas);
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => console.log(`corq: ${line}`));
  // CORQ_CELLS: a deployment of cells (src/cells/, docs/self-hosting.md "Cells"), else DATABASE_URL's one database
  const cellsEnv = env.CORQ_CELLS?.trim() ? parseCellsEnv(env) : undefined;
  if (!cellsEnv && !env.DATABASE_URL)
    throw new Error("DATABASE_URL is not set: corq serve needs a Postgres to run on (or CORQ_CELLS: cells)");
  const databases: Database[] = cellsEnv
    ? Object.entries(cellsEnv.cells).map(([name, url]) => ({ name, url: named(url) }))
    : [{ name: "", url: named(present(env.DATABASE_URL, "DATABASE_URL")) }];
  if (cellsEnv && env.DATABASE_URL)
    log("CORQ_CELLS is set: DATABASE_URL is not used (the home cell is the first of CORQ_CELLS)");
  const knobs = nodeSettings(env);
  const listenUrl = knobs.listenDatabaseUrl && named(knobs.listenDatabaseUrl);
  if (cellsEnv && listenUrl)
    throw new Error(
      "CORQ_LISTEN_DATABASE_URL names one database: with CORQ_CELLS each cell LISTENs on its own URL (name direct ones)",
    );
  const basePath = parseBasePath(options.basePath);
  const role = options.role ?? knobs.role;
  // said at start, not discovered as a 401 on every call after "ready"
  const adminRefused = role === "worker" ? null : adminTokenRefusal(env as Env);
  if (adminRefused) log(`warning: ${adminRefused.message}`);
  const closers: (() => Promise<unknown>)[] = [];
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  };
  try {
    // Two pools per database: the consumers' (one connection each, and the advancer's) and the
    // API's, so requests never queue behind consumers for a connection (measured: with one shared
    // pool, 8 draining consumers pushed appends at 200/s to seconds).
    const runtimeOptions = (poolSize: number, notify: boolean) => ({
      subscriptions,
      migrations: options.migrations,
      poolSize,
      notify,
      pushAllowPrivate: knobs.pushAllowPrivate,
      keyIdleMs: knobs.keyIdleMs,
      idempotencyTtlMs: knobs.idempotencyTtlMs,
      retention: knobs.retention,
      // one activity write a second for all drains, not one per drain (drains here are many
      // and short: at 1,000 appends/s that statement was a fifth of the database's work)
      activityFlushMs: 1000,
    });
    const open = (poolSize: number, notify: boolean): Deployment => {
      if (cellsEnv) {
        const deployment = createCellsRuntime({
          ...runtimeOptions(poolSize, notify),
          cells: Object.fromEntries(databases.map(({ name, url }) => [name, url])),
          directoryUrl: cellsEnv.directoryUrl,
        });
        const { cells, runtimes } = deployment;
        return { runtimes, cells: deployment, migrate: () => cells.migrate(), close: () => cells.close() };
      }
      const corq = createCorqRuntime({ ...runtimeOptions(poolSize, notify), databaseUrl: databases[0]?.url });
      return { runtimes: new Map([["", corq]]), migrate: () => corq.migrate(), close: () => corq.close() };
    };
    // (an API process has no consumers, a worker no API: each opens only its own pools)
    const workers = role === "api" ? undefined : open(knobs.concurrency + 2, true);
    if (workers) closers.push(() => workers.close());
    // the API's appends wake this process directly and NOTIFY the others from `fetch` below
    const apis = role === "worker" ? undefined : open(knobs.poolSize, false);
    if (apis) closers.push(() => apis.close());
    if (options.migrate !== false) await (workers ?? apis)?.migrate();

    const tokens = createTokenCache({ ttlMs: knobs.tokenCacheMs });
    // executionCtx.waitUntil: background work, awaited at shutdown
    const background = new Set<Promise<unknown>>();
    const track = (work: Promise<unknown>) => {
      const tracked = work.catch((error) => log(`background work failed: ${String(error)}`));
      background.add(tracked);
      void tracked.finally(() => background.delete(tracked));
    };
    // every database advances and consumes on its own: a cell that is down, or whose horizon is
    // held, holds back only its own runner
    const works = databases.map((database) =>
      startWork(database, workers?.runtimes.get(database.name), {
        subscriptions,
        knobs,
        role,
        listenUrl,
        tokens,
        track,
        closers,
        log: database.name ? (line) => log(`cell "${database.name}": ${line}`) : log,
      }),
    );
    const home = present(works[0], "the home database's work");
    // said before "ready": whether wake-ups are immediate or polled (a LISTEN through a pooler)
    await Promise.all(works.map((work) => work.wakeUps.checked(LISTEN_CHECK_MS)));
    const workOf = new Map(works.map((work, index) => [databases[index]?.name, work]));
    const apiCorq =
      apis?.cells === undefined
        ? apis?.runtimes.get("")
        : cellsRuntime(apis.cells, { appended: (cell) => workOf.get(cell)?.appended() });
    const http = apiCorq ? await serveHttp(apiCorq) : undefined;

    async function serveHttp(apiCorq: CorqRuntime & { prometheus?: () => Promise<string> }) {
      const opened: OpenCorq = {
        corq: apiCorq,
        // the dashboard's sessions: the home cell's, with the tokens
        db: home.db,
        statements: () => 0,
        end: async () => undefined,
        prometheus: apiCorq.prometheus,
      };
      const sha256 = (text: string) => new Uint8Array(createHash("sha256").update(text).digest());
      // A revoked token: 401 from the next request on here, and in the other processes once they
      // hear it (or their cache entry ends: CORQ_TOKEN_CACHE_MS). Called by the revoking handler.
      const tokenRevoked = () => {
        tokens.clear();
        track(home.db.run(notifyWake("tokens")));
      };
      // no SELF here, whatever the environment holds: consumers run in this process
      const appEnv: Env = { ...env, SELF: undefined, CORQ_NODE: { sha256, tokens, tokenRevoked } };
      const api = createApi({ subscriptions, open: () => opened, basePath });
      const fetch = async (request: Request, bindings: { incoming?: { socket?: Socket } }) => {
        // who sent it: the socket, or a trusted proxy's word (forwarded.ts)
        const socket = bindings.incoming?.socket as (Socket & { encrypted?: boolean }) | undefined;
        const client = forwardedClient(
          {
            peer: socket?.remoteAddress,
            encrypted: socket?.encrypted === true,
            header: (name) => request.headers.get(name) ?? undefined,
          },
          knobs.trustedProxies,
        );
        const response = await api.fetch(
          request,
          { ...appEnv, CORQ_CLIENT: client },
          {
            waitUntil: track,
            passThroughOnException: () => undefined,
            props: {},
          },
        );
        if (reads.has(request.method) || response.status >= 400) return response;
        const whole = new URL(request.url).pathname;
        // the API's own path: an append under the prefix wakes the consumers as one at the root
        const path = pathWithin(basePath, whole) ?? whole;
        // (over cells, the append woke its own cell's runner: cellsRuntime's `appended`)
        if (appendPath.test(path)) {
          if (!cellsEnv) home.appended();
        } else if (!wakesNobody.test(path)) {
          // A write that may have made keys ready or subscriptions advanceable (resume, release,
          // rewind, a new subscription): every process advances and looks at once, not at its
          // safety net (in every cell).
          for (const work of works) work.changed();
        }
        return response;
      };

      const host = options.host ?? env.HOST ?? "127.0.0.1";
      // @hono/node-server replaces the global Request/Response with its own (its default,
      // overrideGlobalObjects): hono's bodyLimit builds a new Request from the incoming one, which
      // Node's own Request constructor refuses for a body-less DELETE (a 500 in the API test).
      const server = await new Promise<Server>((resolve, reject) => {
        const created = listen({ fetch, port: options.port ?? Number(env.PORT ?? 8787), hostname: host }, () =>
          resolve(created as Server),
        ) as Server;
        created.once("error", reject);
      });
      const closed = new Promise<void>((resolve) => server.once("close", resolve));
      closers.push(async () => {
        server.close();
        server.closeAllConnections();
      });
      const { port } = server.address() as AddressInfo;
      const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
      return { server, closed, url: `http://${shown}:${port}`, port };
    }

    const runner = works.length === 1 ? home.runner : everyRunner(works.map((work) => work.runner));
    let stopping: Promise<{ abandoned: number }> | undefined;
    const stop = async (stopOptions: { boundMs?: number } = {}) => {
      const boundMs = stopOptions.boundMs ?? knobs.shutdownMs;
      const started = Date.now();
      // no new requests; requests in flight finish (the runner ignores wake-ups from here on)
      http?.server.close();
      http?.server.closeIdleConnections();
      const { abandoned } = await runner.stop({ boundMs, graceMs: knobs.shutdownGraceMs });
      // the keys this process gave back or left ready: other processes take them now; and they
      // advance (a kick another process left with this one's advancer may wait for a run that the
      // stop cut short: Runner's recheckIf)
      await Promise.all(works.map((work) => work.db.run(notifyWake("append", "ready")).catch(() => undefined)));
      const left = Math.max(0, boundMs - (Date.now() - started));
      await Promise.race([
        Promise.all([http?.closed, ...background]),
        new Promise((resolve) => setTimeout(resolve, left).unref()),
      ]);
      await closeAll();
      return { abandoned };
    };
    return {
      url: http?.url ?? "",
      port: http?.port ?? 0,
      role,
      runner,
      listener: home.wakeUps.listener,
      stop: () => (stopping ??= stop()),
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** One database of the process (DATABASE_URL's, or a cell's), and the runtimes on it. */
interface Database {
  /** The cell's name; "" for DATABASE_URL's. */
  name: string;
  url: string;
}

interface Deployment {
  /** By the database's name. */
  runtimes: Map<string, CorqRuntime>;
  /** Over cells (CORQ_CELLS): the cells with their runtimes. */
  cells?: CellsRuntime;
  migrate(): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * One database's share of the process: a small pool of its own (the runner's statements, the
 * wake-ups, the dashboard's sessions), its runner, its LISTEN, and the NOTIFYs that tell the
 * other processes on it of this one's writes.
 */
function startWork(
  database: Database,
  corq: CorqRuntime | undefined,
  deps: {
    subscriptions: SubscriptionDefinition[];
    knobs: ReturnType<typeof nodeSettings>;
    role: ServeRole;
    listenUrl: string | undefined;
    tokens: TokenCache;
    track(work: Promise<unknown>): void;
    closers: (() => Promise<unknown>)[];
    log(line: string): void;
  },
) {
  const { knobs, track, log, tokens, closers } = deps;
  const ownPool = guardPool(new pg.Pool({ connectionString: database.url, max: 3 }));
  closers.push(() => ownPool.end());
  const db = createExecutor(ownPool);
  const runner = corq
    ? createRunner({
        corq,
        db,
        codeSubscriptions: deps.subscriptions.map((s) => s.name),
        transactionalSubscriptions: deps.subscriptions.filter((s) => s.transactional).map((s) => s.name),
        concurrency: knobs.concurrency,
        keysPerClaim: knobs.keysPerClaim,
        replayKeys: knobs.replayKeys,
        budgetMs: knobs.consumerBudgetMs,
        safetyNetMs: knobs.safetyNetMs,
        retention: knobs.retentionPasses,
        alerts: knobs.alertPasses,
        log,
      })
    : noRunner;
  const wakeUps = hearWakeUps({
    pool: ownPool,
    db,
    listenUrl: deps.listenUrl ?? database.url,
    separateListenUrl: deps.listenUrl !== undefined,
    onWake: (payload) => {
      if (payload === "tokens") tokens.clear();
      else runner.wake(payload);
    },
    recheck: () => {
      // a revocation heard of by no notification (missed, or none arrive) is heard of here
      tokens.clear();
      runner.recheck();
    },
    safetyNetMs: knobs.safetyNetMs,
    pollMs: knobs.pollMs,
    log,
  });
  closers.push(() => wakeUps.close());

  // The other processes hear of this process's appends by NOTIFY, on this process's own pool
  // (not the API's: at 1,000 appends/s a NOTIFY after every commit, one in flight, was a
  // statement per two appends, and half of them queued behind appends for the API's
  // connections; bench/serveProbe.ts). With consumers here ("all") this process advances at
  // once and the others only help with what it cannot take: one NOTIFY per NOTIFY_EVERY_MS
  // at most. An API process ("api") wakes the workers by nothing else: one NOTIFY in flight,
  // one more after it for the appends that committed meanwhile.
  let notifyTimer: NodeJS.Timeout | undefined;
  let notifying = false;
  let notifyAgain = false;
  const notifyOthers = () => {
    if (notifying) {
      notifyAgain = true;
      return;
    }
    notifying = true;
    const send = async () => {
      do {
        notifyAgain = false;
        await db.run(notifyWake("append"));
      } while (notifyAgain);
    };
    track(send().finally(() => (notifying = false)));
  };
  closers.push(async () => clearTimeout(notifyTimer));
  return {
    db,
    runner,
    wakeUps,
    /** An append committed here. */
    appended() {
      if (deps.role === "api") return notifyOthers();
      runner.wake("append");
      notifyTimer ??= setTimeout(() => {
        notifyTimer = undefined;
        notifyOthers();
      }, NOTIFY_EVERY_MS);
    },
    /** Another write that may have made work here: advance and look at once, here and in the other processes. */
    changed() {
      runner.recheck();
      track(db.run(notifyWake("append", "ready")));
    },
  };
}

/** The runners of every cell as one (RunningServe.runner). */
function everyRunner(runners: Runner[]): Runner {
  return {
    wake: (payload) => {
      for (const runner of runners) runner.wake(payload);
    },
    recheck: () => {
      for (const runner of runners) runner.recheck();
    },
    busy: () => runners.reduce((total, runner) => total + runner.busy(), 0),
    async stop(stopOptions) {
      const stopped = await Promise.all(runners.map((runner) => runner.stop(stopOptions)));
      return { abandoned: stopped.reduce((total, { abandoned }) => total + abandoned, 0) };
    },
  };
}

/** An API process's runner: nothing to advance or consume. */
const noRunner: Runner = {
  wake: () => undefined,
  recheck: () => undefined,
  busy: () => 0,
  stop: async () => ({ abandoned: 0 }),
};

/** The connection string with application_name=corq-serve (unless it names one): operators see who is who. */
function named(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  if (!url.searchParams.has("application_name")) url.searchParams.set("application_name", "corq-serve");
  return url.toString();
}

/**
 * Stops `running` gracefully on SIGTERM, SIGINT or SIGHUP and exits 0 (1 if the stop itself
 * failed). A second signal does not cut the stop short: the bound does.
 */
export function stopOnSignals(
  running: { stop(): Promise<{ abandoned: number }> },
  log: (line: string) => void = (line) => console.log(`corq: ${line}`),
): void {
  let stopping = false;
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log(`${signal}: stopping (claiming nothing new; batches in flight finish)`);
      running.stop().then(
        ({ abandoned }) => {
          if (abandoned > 0) log(`${abandoned} consumer(s) with handlers still running were left; their leases expire`);
          log("stopped");
          process.exit(0);
        },
        (error) => {
          log(`stop failed: ${String(error)}`);
          process.exit(1);
        },
      );
    });
  }
}
