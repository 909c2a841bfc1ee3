// The self-hosted Node runtime: ONE process with the Worker's own HTTP API and dashboard (the
// same Hono app, functions/api.ts, on @hono/node-server), and the advancer and consumers
// in-process (runner.ts), woken by LISTEN/NOTIFY (wakeListener.ts). Several processes on one
// database share the work; SIGTERM stops them gracefully (stopOnSignals).
//
// What the Worker gets from the platform, the process provides itself:
//   env / bindings          the process environment's CORQ_* variables, plus CORQ_NODE: the
//                           process's one corq (one pool) instead of a handle per request
//   executionCtx.waitUntil  background work tracked here and awaited at shutdown
//   the cron                the runner: NOTIFY wake-ups, next-due timers and a safety net
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve as listen } from "@hono/node-server";
import pg from "pg";
import { z } from "zod";
import { createApi } from "../../functions/api.js";
import type { OpenCorq } from "../../functions/database.js";
import { settings, type Env } from "../../functions/env.js";
import { createCorq } from "../corq.js";
import { createExecutor } from "../db/executor.js";
import { notifyWake } from "../sql/log/notify.js";
import type { SubscriptionDefinition } from "../types.js";
import type { AppMigration } from "../db/appMigrations.js";
import { createRunner, type Runner } from "./runner.js";
import { listenForWakes, type WakeListener } from "./wakeListener.js";

export interface ServeOptions {
  /** The app's code subscriptions (this process runs their handlers; push subscriptions too). */
  subscriptions: SubscriptionDefinition[];
  /** The app's own SQL (its projections' tables), applied at start after corq's schema, each once. */
  migrations?: AppMigration[];
  /**
   * The environment: DATABASE_URL (required), the Worker's CORQ_* variables (docs/http-api.md,
   * "Configuration") and the Node runtime's own (docs/self-hosting.md). Default: process.env.
   */
  env?: Record<string, string | undefined>;
  /** Port to listen on; 0 picks a free one. Default: PORT or 8787. */
  port?: number;
  /** Address to listen on. Default: HOST or 127.0.0.1 (in a container: 0.0.0.0). */
  host?: string;
  /** Apply corq's migrations and the app's first (idempotent; concurrent starts take turns). Default true. */
  migrate?: boolean;
  log?: (line: string) => void;
}

export interface RunningServe {
  /** http://127.0.0.1:<port> (or the host listened on, when it is not a wildcard). */
  url: string;
  port: number;
  runner: Runner;
  listener: WakeListener;
  /** The graceful stop (see Runner.stop); resolves once everything is closed. */
  stop(options?: { boundMs?: number }): Promise<{ abandoned: number }>;
}

const int = (fallback: number, min: number, max: number) =>
  z.coerce.number().int().min(min).max(max).catch(fallback).default(fallback);

/** The Node runtime's own knobs (the Worker's are in functions/env.ts). */
const nodeSettingsSchema = z.object({
  /** Advance and look for ready keys at least this often, woken or not (ms). */
  CORQ_SAFETY_NET_MS: int(5000, 50, 3_600_000),
  /** How long SIGTERM waits for in-flight batches before it aborts their handlers (ms). */
  CORQ_SHUTDOWN_MS: int(10_000, 0, 3_600_000),
  /** After aborting: how long handlers get to give up before the process leaves them (ms). */
  CORQ_SHUTDOWN_GRACE_MS: int(2000, 0, 600_000),
  /** Connections of the HTTP API's pool (the consumers have one of CORQ_CONCURRENCY + 2 of their own). */
  CORQ_POOL_SIZE: int(10, 1, 1000),
});

export function nodeSettings(env: Record<string, string | undefined>) {
  const parsed = nodeSettingsSchema.parse(env);
  const base = settings(env as Env);
  return {
    concurrency: base.concurrency,
    consumerBudgetMs: base.consumerBudgetMs,
    safetyNetMs: parsed.CORQ_SAFETY_NET_MS,
    shutdownMs: parsed.CORQ_SHUTDOWN_MS,
    shutdownGraceMs: parsed.CORQ_SHUTDOWN_GRACE_MS,
    poolSize: parsed.CORQ_POOL_SIZE,
    pushAllowPrivate: base.pushAllowPrivate,
  };
}

const reads = new Set(["GET", "HEAD", "OPTIONS"]);
// writes that wake nobody: an append NOTIFYs by itself; /advance, /consume and /dispatch are
// the caller driving the pipeline by hand (as on Workers, where they kick nothing either)
const wakesNobody = /^\/(streams\/[^/]+\/events|advance|consume\/[^/]+|dispatch)\/?$/;

export async function startServe(options: ServeOptions): Promise<RunningServe> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => console.log(`corq: ${line}`));
  if (!env.DATABASE_URL) throw new Error("DATABASE_URL is not set: corq serve needs a Postgres to run on");
  const databaseUrl = named(env.DATABASE_URL);
  const knobs = nodeSettings(env);
  const closers: (() => Promise<unknown>)[] = [];
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  };
  try {
    // Two pools: the consumers' (one connection each, and the advancer's) and the API's, so
    // requests never queue behind consumers for a connection (measured: with one shared pool,
    // 8 draining consumers pushed appends at 200/s to seconds).
    const make = (poolSize: number) =>
      createCorq({
        databaseUrl,
        subscriptions: options.subscriptions,
        migrations: options.migrations,
        poolSize,
        notify: true,
        pushAllowPrivate: knobs.pushAllowPrivate,
      });
    const corq = make(knobs.concurrency + 2);
    closers.push(() => corq.close());
    const apiCorq = make(knobs.poolSize);
    closers.push(() => apiCorq.close());
    if (options.migrate !== false) await corq.migrate();
    // the runner's own statements, the wake-ups and the dashboard's sessions: a small pool of their own
    const ownPool = new pg.Pool({ connectionString: databaseUrl, max: 3 });
    ownPool.on("error", () => undefined);
    closers.push(() => ownPool.end());
    const db = createExecutor(ownPool);

    const runner = createRunner({
      corq,
      db,
      codeSubscriptions: options.subscriptions.map((s) => s.name),
      concurrency: knobs.concurrency,
      budgetMs: knobs.consumerBudgetMs,
      safetyNetMs: knobs.safetyNetMs,
      log,
    });
    const listener = listenForWakes({
      connectionString: databaseUrl,
      onWake: (payload) => runner.wake(payload),
      onConnected: () => runner.recheck(),
      log,
    });
    closers.push(() => listener.close());
    // the listener is pinged by the safety net: a connection that died quietly is replaced
    const ping = setInterval(() => void listener.check(), knobs.safetyNetMs);
    ping.unref();
    closers.push(async () => clearInterval(ping));

    // executionCtx.waitUntil: background work, awaited at shutdown
    const background = new Set<Promise<unknown>>();
    const track = (work: Promise<unknown>) => {
      const tracked = work.catch((error) => log(`background work failed: ${String(error)}`));
      background.add(tracked);
      void tracked.finally(() => background.delete(tracked));
    };
    const opened: OpenCorq = { corq: apiCorq, db, statements: () => 0, end: async () => undefined };
    const appEnv: Env = { ...env, CORQ_NODE: { open: () => opened } };
    const api = createApi(options.subscriptions);
    const fetch = async (request: Request) => {
      const response = await api.fetch(request, appEnv, {
        waitUntil: track,
        passThroughOnException: () => undefined,
        props: {},
      });
      // A write that may have made keys ready or subscriptions advanceable (resume, release,
      // rewind, a new subscription): every process advances and looks at once, not at its
      // safety net.
      if (!reads.has(request.method) && response.status < 400 && !wakesNobody.test(new URL(request.url).pathname)) {
        track(db.run(notifyWake("append", "ready")));
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

    let stopping: Promise<{ abandoned: number }> | undefined;
    const stop = async (stopOptions: { boundMs?: number } = {}) => {
      const boundMs = stopOptions.boundMs ?? knobs.shutdownMs;
      const started = Date.now();
      // no new requests; requests in flight finish (the runner ignores wake-ups from here on)
      server.close();
      server.closeIdleConnections();
      const { abandoned } = await runner.stop({ boundMs, graceMs: knobs.shutdownGraceMs });
      // the keys this process gave back or left ready: other processes take them now
      await db.run(notifyWake("ready")).catch(() => undefined);
      const left = Math.max(0, boundMs - (Date.now() - started));
      await Promise.race([
        Promise.all([closed, ...background]),
        new Promise((resolve) => setTimeout(resolve, left).unref()),
      ]);
      await closeAll();
      return { abandoned };
    };
    return {
      url: `http://${shown}:${port}`,
      port,
      runner,
      listener,
      stop: () => (stopping ??= stop()),
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

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
