// The deployable Worker: the HTTP API and the cron. The subscriptions it runs are the app's
// (functions/app.ts); everything else is corq.
import { createApi } from "./api.js";
import { advanceAndDispatch, INTERNAL_ORIGIN, selfInvoker, type Invoke } from "./dispatch.js";
import type { ExecutionContext } from "hono";
import type { Env } from "./env.js";
import { subscriptions } from "./app.js";

const api = createApi(subscriptions);

export default {
  fetch: api.fetch,

  /** Cron: advance every subscription and fan out consumers. Never lets an error escape. */
  async scheduled(_controller: unknown, env: Env, ctx: ExecutionContext) {
    // Without a SELF binding there is no URL to call: the consumers run in this invocation.
    const invoke: Invoke = env.SELF
      ? selfInvoker(env, INTERNAL_ORIGIN)
      : (path, init) => Promise.resolve(api.fetch(new Request(new URL(path, INTERNAL_ORIGIN), init), env, ctx));
    ctx.waitUntil(
      advanceAndDispatch(env, subscriptions, invoke, { pruneActivity: true, coalesce: true }).catch((error) =>
        console.error("corq: scheduled run failed:", error),
      ),
    );
  },
};
