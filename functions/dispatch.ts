// Moves the log into the queues and fans out consumer invocations. Runs from the cron and,
// in the background (ctx.waitUntil), after every append so delivery does not wait a minute.
import { CorqError, type SubscriptionDefinition } from "../src/index.js";
import { openCorq, type OpenCorq } from "./database.js";
import { settings, type Env } from "./env.js";

export type Invoke = (path: string, init: RequestInit) => Promise<Response>;

/** The origin the cron addresses its own invocations to (it has no request URL of its own). */
export const INTERNAL_ORIGIN = "https://corq.internal";

/**
 * Advance, then put consumers on the ready keys, spread over the subscriptions (round robin),
 * each draining keys for its time budget: this invocation is the first consumer (on the
 * connection it already has: every new connection is a full Postgres handshake), the others
 * are separate invocations. Keys under a live lease count as consumers already at work, so
 * however many appends kick this at once, about CORQ_CONCURRENCY consumers run.
 * Uses (and closes) `options.opened` when the caller already has a connection. The cron also
 * prunes the activity record (`options.pruneActivity`).
 */
export async function advanceAndDispatch(
  env: Env,
  subscriptions: SubscriptionDefinition[],
  invoke: Invoke,
  options: { opened?: OpenCorq; pruneActivity?: boolean } = {},
): Promise<{ advanced: Record<string, number>; dispatched: number; consumedHere: number }> {
  const opened = options.opened ?? openCorq(env, subscriptions);
  const { concurrency, consumerBudgetMs } = settings(env);
  let advanced: Record<string, number>;
  let plan: string[];
  let consumedHere = 0;
  let others: Promise<PromiseSettledResult<Response>[]> = Promise.resolve([]);
  try {
    advanced = await opened.corq.advance();
    if (options.pruneActivity) await opened.corq.pruneActivity();
    const readiness = await opened.corq.readyKeys(concurrency);
    // push subscriptions, and the code subscriptions of this Worker (not those of other apps sharing the database)
    const consumable = Object.entries(readiness).filter(
      ([name, r]) => r.kind === "push" || subscriptions.some((s) => s.name === name),
    );
    const working = consumable.reduce((sum, [, r]) => sum + r.leased, 0);
    plan = roundRobin(
      consumable.map(([name, r]) => [name, r.ready]),
      concurrency - working,
    );
    const init = {
      method: "POST",
      headers: { authorization: `Bearer ${env.CORQ_ADMIN_TOKEN ?? ""}`, "corq-budget-ms": String(consumerBudgetMs) },
    };
    others = Promise.allSettled(plan.slice(1).map((name) => invoke(`/consume/${encodeURIComponent(name)}`, init)));
    if (plan.length > 0) {
      // a subscription deleted since it was listed has nothing to do: not an error
      consumedHere = await opened.corq.drain(plan[0], { budgetMs: consumerBudgetMs }).then(
        (drained) => drained.batches,
        (error: unknown) => {
          if (error instanceof CorqError && error.code === "unknown_subscription") return 0;
          throw error;
        },
      );
    }
  } finally {
    await opened.end();
  }
  for (const result of await others) {
    if (result.status === "rejected") console.error("corq: consumer invocation failed:", result.reason);
    else await result.value.body?.cancel();
  }
  return { advanced, dispatched: Math.max(0, plan.length - 1), consumedHere };
}

/** Up to `total` subscription names, one invocation per ready key, taking turns. */
function roundRobin(ready: [string, number][], total: number): string[] {
  const plan: string[] = [];
  const left = new Map(ready.filter(([, count]) => count > 0));
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
