import { afterAll, beforeAll, inject } from "vitest";
import pg from "pg";
import { localVars } from "../../cli/dev/localDatabase.js";
import { startLocalStack, type LocalStack } from "../../cli/dev/localStack.js";
import { app as exampleApp } from "../../functions/app.js";
import type { WorkerApp } from "../../functions/createWorker.js";
import { createCorq } from "../../src/index.js";
import { createTestDatabase } from "./database.js";
import { startServeProcess } from "./serveProcess.js";
import { present } from "./present.js";

/**
 * Which runtime a stack test file runs against: "worker" (`npm start`: the Worker in workerd)
 * or "serve" (`npm run serve`: the same app in one Node process). vitest.config.ts runs the
 * HTTP contract's files once per runtime (the "serve" project sets CORQ_TEST_RUNTIME).
 */
export type Runtime = "worker" | "serve";
export const runtime: Runtime = process.env.CORQ_TEST_RUNTIME === "serve" ? "serve" : "worker";

/** What a test sees of either runtime (serve has no cron to fire and no proxy or HTTP endpoint to count). */
export type Stack = LocalStack;

/**
 * The real local stack for a test file, on a fresh database of its own: by default the
 * Worker in workerd under wrangler's dev server, the Neon driver through the local HTTP SQL
 * endpoint (and the WebSocket proxy for interactive transactions); with CORQ_TEST_RUNTIME=serve
 * `npm run serve` as a child process with the same variables.
 */
export function useStack(
  options: {
    vars?: Record<string, string>;
    httpPoolSize?: number;
    /** Another Worker module than functions/worker.ts (createWorker(app)), with its app. */
    worker?: { entrypoint: string; app: WorkerApp };
    /** Another wrangler configuration than this repository's (the Worker runtime only). */
    config?: string;
    /** Fire the Worker's cron this often (default never: a test fires it with runCron). */
    cronIntervalMs?: number;
  } = {},
) {
  const state = {} as { stack: Stack; db: pg.Pool; drop: () => Promise<void> };
  beforeAll(async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    state.drop = database.drop;
    // the Worker's code subscriptions registered and its app's tables made before the first
    // request, as a test expects them (the Worker itself does both at its first advance and
    // request; the stack never imports the Worker's module)
    if (runtime === "worker") {
      const corq = createCorq({ databaseUrl: database.url, ...(options.worker?.app ?? exampleApp) });
      await corq.migrate().finally(() => corq.close());
    }
    // CORQ_LOCAL: what the local stack is (cli/dev/localStack.ts sets it too); options.vars may unset it
    state.stack =
      runtime === "serve"
        ? await startServeStack(database.url, { CORQ_LOCAL: "true", ...options.vars })
        : await startLocalStack({
            databaseUrl: database.url,
            httpPoolSize: options.httpPoolSize,
            entrypoint: options.worker?.entrypoint,
            config: options.config,
            cronIntervalMs: options.cronIntervalMs,
            vars: { CORQ_LOCAL: "true", ...options.vars },
          });
    state.db = new pg.Pool({ connectionString: database.url, max: 4 });
    // pool.end() resolves before its idle connections' sockets close, and the database is dropped
    // WITH (FORCE) right after: the server's "terminating connection" reaches the pool's 'error'
    // event (pg-pool's idle listener), which must not be an uncaught error (it failed a whole run
    // once, attributed to whichever file was running)
    state.db.on("error", () => undefined);
  }, 120_000);
  afterAll(async () => {
    try {
      await state.stack?.stop();
    } finally {
      await state.db?.end();
      await state.drop?.();
    }
  });

  const api = async (
    method: string,
    path: string,
    init: { body?: unknown; headers?: Record<string, string>; token?: string | null } = {},
  ) => {
    const headers: Record<string, string> = { ...init.headers };
    const token = init.token === undefined ? state.stack.adminToken : init.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === "string" ? init.body : JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await fetch(`${state.stack.url}${path}`, { method, headers, body });
    const text = await response.text();
    const type = response.headers.get("content-type") ?? "";
    return { status: response.status, type, json: text && type.includes("json") ? JSON.parse(text) : null };
  };
  return { state, api };
}

export { eventually } from "./until.js";

/** `npm run serve` with what `npm start` gives the Worker: the local variables, the dev secrets. */
async function startServeStack(databaseUrl: string, vars: Record<string, string>): Promise<Stack> {
  const secrets = { CORQ_ADMIN_TOKEN: "dev-admin-token", CORQ_WEBHOOK_SECRET: "dev-webhook-secret" };
  const env = { ...localVars, ...secrets, ...vars };
  const serve = await startServeProcess({ databaseUrl, env });
  return {
    url: serve.url,
    databaseUrl,
    adminToken: env.CORQ_ADMIN_TOKEN,
    webhookSecret: present(env.CORQ_WEBHOOK_SECRET.split(" ")[0], "a webhook secret"),
    runCron: () => Promise.reject(new Error("npm run serve has no cron: its runner is woken by NOTIFY")),
    wsSessions: () => 0,
    httpStatements: () => 0,
    stop: async () => {
      const code = await serve.stop("SIGTERM");
      if (code !== 0) throw new Error(`serve exited ${code} after SIGTERM:\n${serve.output()}`);
    },
  };
}
