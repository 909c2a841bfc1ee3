// corqueue/worker: the deployable Worker for an app — corq's HTTP API, dashboard and cron around
// the app's code subscriptions. A Worker of your own is
//   export default createWorker({ subscriptions, migrations });
// or, beside routes of its own, corq under a prefix (`basePath`, see WorkerApp)
// (functions/worker.ts is this repository's, running the example app).
import type { ExecutionContext } from "hono";
import type { AnyEvents, EventMap, EventSchemas, SubscriptionDefinition } from "../src/index.js";
import { withSharedSchemas } from "../src/eventSchemas.js";
import { applyAppMigrations, parseAppMigrations, type AppMigration } from "../src/db/appMigrations.js";
import { parseSubscriptions } from "../src/config.js";
import { createApi } from "../src/http/api.js";
import { parseBasePath } from "../src/http/basePath.js";
import { openCorq } from "./database.js";
import { advanceAndDispatch, selfInvoker } from "../src/http/dispatch.js";
import { retentionOption } from "../src/http/env.js";
import { retainOnCron } from "../src/http/retentionRoutes.js";
import { alertOnCron } from "../src/http/alertRoutes.js";
import type { Env } from "../src/http/types.js";
export type { Env } from "../src/http/types.js";
/** The wake-ups' Durable Object: export it from your Worker module and bind it (docs/deploy.md, "Wake-ups"). */
export { CorqWakeUps } from "./wakeUps.js";

export type { AppMigration } from "../src/db/appMigrations.js";

/** `createWorker<Events>(…)`: subscriptions checked against the app's event map (docs/typed-events.md). */
export interface WorkerApp<E extends EventMap = AnyEvents> {
  /** The app's code subscriptions (handlers run in this Worker). Push subscriptions are created over HTTP. */
  subscriptions: SubscriptionDefinition<E>[];
  /** Standard Schema validators by event name, for every subscription that takes the name (its own win). */
  schemas?: EventSchemas<E>;
  /**
   * The app's own SQL (its projections' tables), not corq's schema: applied by the Worker
   * itself, each migration once, before it serves its first request or cron in an isolate.
   * corq's schema comes first, from `corq migrate`.
   */
  migrations?: AppMigration[];
  /**
   * Serve corq under this prefix ("/corq") in a Worker that has routes of its own; default the
   * root. The Worker's own `fetch` hands corq every request under the prefix *with its path
   * whole* (not stripped), and exports corq's `scheduled`:
   *
   * ```ts
   * const corq = createWorker({ subscriptions, migrations, basePath: "/corq" });
   * const app = new Hono();
   * app.get("/", (c) => c.text("my app"));
   * app.all("/corq/*", (c) => corq.fetch(c.req.raw, c.env, c.executionCtx));
   * export default { fetch: app.fetch, scheduled: corq.scheduled };
   * ```
   *
   * Everything then lives under it: the HTTP API (`CORQ_URL=https://host/corq`), /health,
   * /metrics, the dashboard (its links, assets, forms, redirects and its cookie's Path), the
   * OpenAPI document's server URL — and corq's invocations of itself (the consumers it fans out,
   * the cron's retention pass), which go through the SELF binding to the Worker's own `fetch`
   * at `<basePath>/…`. A request outside the prefix that reaches corq's `fetch` answers 404
   * (problem+json, naming the prefix): Hono's `app.mount("/corq", corq.fetch)` strips the
   * prefix, so use `app.mount("/corq", corq.fetch, { replaceRequest: false })` or `app.all`.
   * "/" and "" are the root. Otherwise it starts with "/", has no trailing "/", no "." or ".."
   * segment, no query, and only letters, digits and `-._~`: anything else throws here, at the
   * Worker's module evaluation.
   */
  basePath?: string;
}

export interface CorqWorker {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response>;
  scheduled(controller: unknown, env: Env, ctx: ExecutionContext): Promise<void>;
}

export function createWorker<E extends EventMap = AnyEvents>(app: NoInfer<WorkerApp<E>>): CorqWorker;
export function createWorker(app: WorkerApp): CorqWorker {
  const subscriptions = withSharedSchemas(app.subscriptions, app.schemas);
  // a malformed definition fails the deploy (module evaluation), not the first request
  parseSubscriptions(subscriptions);
  const migrations = parseAppMigrations(app.migrations ?? []);
  const basePath = parseBasePath(app.basePath);
  const api = createApi({ subscriptions, open: openCorq, basePath });

  // Once per isolate: one statement when everything is applied (a transaction only when not).
  // A failure is logged and tried again by the next request: the handlers that need the tables
  // fail and retry meanwhile, as they would on any database error.
  let migrated: Promise<void> | undefined;
  const migrateApp = (env: Env): Promise<void> | undefined => {
    if (migrations.length === 0) return undefined;
    migrated ??= (async () => {
      const opened = openCorq(env, subscriptions);
      try {
        // over cells, in every cell: a cell's handlers write to its own database
        for (const [cell, { db }] of opened.cells ?? [["", opened]]) {
          const applied = await applyAppMigrations(db, migrations);
          if (applied.length > 0) console.log(`corq: applied ${applied.join(", ")}${cell ? ` in cell "${cell}"` : ""}`);
        }
      } finally {
        await opened.end();
      }
    })().catch((error) => {
      migrated = undefined;
      console.error("corq: the app's migrations failed:", error);
    });
    return migrated;
  };

  return {
    async fetch(request, env, ctx) {
      // a consumer a dispatcher started (corq-slot) comes after that dispatcher migrated
      if (!request.headers.has("corq-slot")) await migrateApp(env);
      return api.fetch(request, env, ctx);
    },

    /**
     * Cron: advance every subscription and fan out consumers (over cells, in every cell on its
     * own); a retention pass; an alerts pass. Never lets an error escape.
     */
    async scheduled(_controller, env, ctx) {
      // Without a SELF binding the consumers run in this invocation.
      const invoke = selfInvoker(env, { here: (request) => api.fetch(request, env, ctx), basePath });
      ctx.waitUntil(
        (async () => {
          await migrateApp(env);
          await advanceAndDispatch(env, subscriptions, invoke, {
            opened: openCorq(env, subscriptions),
            housekeeping: true,
            coalesce: true,
          });
        })().catch((error) => console.error("corq: scheduled run failed:", error)),
      );
      // retention: a bounded pass in an invocation of its own (its own subrequests); the next tick goes on
      const { problem } = retentionOption(env);
      if (problem) console.error(`corq: retention option ignored: ${problem}`);
      ctx.waitUntil(
        retainOnCron(env.CORQ_ADMIN_TOKEN, invoke).catch((error) =>
          console.error("corq: retention pass failed:", error),
        ),
      );
      // alerts: a pass in an invocation of its own too (its sends are subrequests; a slow receiver waits there)
      ctx.waitUntil(
        alertOnCron(env.CORQ_ADMIN_TOKEN, invoke).catch((error) => console.error("corq: alerts pass failed:", error)),
      );
    },
  };
}
