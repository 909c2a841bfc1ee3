// Moves the log into the queues and fans out consumer invocations. Runs from the cron and,
// in the background (ctx.waitUntil), after every append so delivery does not wait a minute.
import type { SubscriptionDefinition } from "../src/index.js";
import { openCorq } from "./database.js";
import { settings, type Env } from "./env.js";

export type Invoke = (path: string, init: RequestInit) => Promise<Response>;

/**
 * Advance, then start up to CORQ_CONCURRENCY separate consumer invocations, spread over the
 * subscriptions with ready keys (round robin), each draining keys for its time budget.
 * Returns what was advanced and how many consumers were started.
 */
export async function advanceAndDispatch(
  env: Env,
  subscriptions: SubscriptionDefinition[],
  invoke: Invoke,
): Promise<{ advanced: Record<string, number>; dispatched: number }> {
  const { concurrency, consumerBudgetMs } = settings(env);
  const { corq, end } = openCorq(env, subscriptions);
  let advanced: Record<string, number>;
  let ready: Record<string, number>;
  try {
    advanced = await corq.advance();
    ready = await corq.readyKeys(concurrency);
  } finally {
    await end();
  }
  const consumable = new Set(subscriptions.map((s) => s.name));
  const plan = roundRobin(
    Object.entries(ready).filter(([name]) => consumable.has(name)),
    concurrency,
  );
  const init = {
    method: "POST",
    headers: { authorization: `Bearer ${env.CORQ_ADMIN_TOKEN ?? ""}`, "corq-budget-ms": String(consumerBudgetMs) },
  };
  const results = await Promise.allSettled(plan.map((name) => invoke(`/consume/${encodeURIComponent(name)}`, init)));
  for (const result of results) {
    if (result.status === "rejected") console.error("corq: consumer invocation failed:", result.reason);
    else await result.value.body?.cancel();
  }
  return { advanced, dispatched: plan.length };
}

/** Up to `total` subscription names, one invocation per ready key, taking turns. */
function roundRobin(ready: [string, number][], total: number): string[] {
  const plan: string[] = [];
  const left = new Map(ready);
  while (plan.length < total && left.size > 0) {
    for (const [name, count] of left) {
      if (plan.length >= total) break;
      plan.push(name);
      if (count <= 1) left.delete(name);
      else left.set(name, count - 1);
    }
  }
  return plan;
}

/** Invokes this Worker again: the SELF service binding when present, else a fetch to its own origin. */
export function selfInvoker(env: Env, origin: string): Invoke {
  return (path, init) => (env.SELF ? env.SELF.fetch(new Request(new URL(path, origin), init)) : fetch(new URL(path, origin), init));
}
