// The deployable Worker: the HTTP API and the cron. The subscriptions it runs are the app's
// (functions/app.ts); everything else is corq.
import { createApi } from "./api.js";
import { advanceAndDispatch, selfInvoker } from "./dispatch.js";
import { openCorq } from "./database.js";
import { settings, type Env } from "./env.js";
import { subscriptions } from "./app.js";

const api = createApi(subscriptions);

export default {
  fetch: api.fetch,

  /** Cron: advance every subscription and fan out consumers. Never lets an error escape. */
  async scheduled(_controller: unknown, env: Env, ctx: { waitUntil(promise: Promise<unknown>): void }) {
    ctx.waitUntil(
      (env.SELF
        ? advanceAndDispatch(env, subscriptions, selfInvoker(env, "https://corq.internal"))
        : drainInProcess(env)
      ).catch((error) => console.error("corq: scheduled run failed:", error)),
    );
  },
};

/** Without a SELF binding there is nobody to fan out to: advance and drain right here. */
async function drainInProcess(env: Env) {
  const { corq, end } = openCorq(env, subscriptions);
  try {
    await corq.advance();
    const budgetMs = settings(env).consumerBudgetMs;
    for (const { name } of subscriptions) await corq.drain(name, { budgetMs });
  } finally {
    await end();
  }
}
