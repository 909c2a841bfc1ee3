// Moves the log into the queues and fans out consumer invocations. Runs from the cron and,
// in the background (ctx.waitUntil), after every append so delivery does not wait a minute.
import { CorqError, type Corq, type SubscriptionDefinition } from "../src/index.js";
import { openCorq, type OpenCorq } from "./database.js";
import { settings, type Env } from "./env.js";

export type Invoke = (path: string, init: RequestInit) => Promise<Response>;

/** The origin the cron addresses its own invocations to (it has no request URL of its own). */
export const INTERNAL_ORIGIN = "https://corq.internal";

// A consumer slot is held for the consumer's budget and this much more (its invocation's own
// start and end); a consumer frees it when done, a crashed one when this runs out.
const SLOT_MARGIN_MS = 15_000;

/**
 * Advance, then put consumers on the ready keys, spread over the subscriptions (round robin),
 * each draining keys for its time budget: this invocation is the first consumer, the others
 * are separate invocations. Each consumer holds a consumer slot (claimed in the database), so
 * however many appends kick this at once, at most CORQ_CONCURRENCY consumers run.
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
    const ready = consumable.reduce((sum, [, r]) => sum + r.ready, 0);
    // one consumer per ready key, as far as free slots go: decided in the database, so the
    // kicks of many concurrent appends together start at most CORQ_CONCURRENCY consumers
    const slots = await opened.corq.claimSlots({ max: concurrency, want: Math.min(concurrency, ready), holdMs: consumerBudgetMs + SLOT_MARGIN_MS });
    plan = roundRobin(
      consumable.map(([name, r]) => [name, r.ready]),
      slots.length,
    );
    const init = (slot: number) => ({
      method: "POST",
      headers: { authorization: `Bearer ${env.CORQ_ADMIN_TOKEN ?? ""}`, "corq-budget-ms": String(consumerBudgetMs), "corq-slot": String(slot) },
    });
    others = Promise.allSettled(plan.slice(1).map((name, i) => invoke(`/consume/${encodeURIComponent(name)}`, init(slots[i + 1]))));
    if (plan.length > 0) consumedHere = await consumeInSlot(env, subscriptions, opened.corq, plan[0], slots[0]);
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

/**
 * One consumer in its slot: drains `name` for the budget, frees the slot — then looks once more
 * for ready keys, and if there are, claims a slot again and drains on. That last look comes
 * after the slot is free, so a kick that found every slot busy is never lost: either it got
 * this slot, or its keys were ready (committed before it tried) by the time of the look.
 * Returns the batches consumed.
 */
export async function consumeInSlot(
  env: Env,
  subscriptions: SubscriptionDefinition[],
  corq: Corq,
  name: string,
  slot: number,
): Promise<number> {
  const { concurrency, consumerBudgetMs } = settings(env);
  const deadline = Date.now() + consumerBudgetMs;
  let batches = 0;
  let next: { name: string; slot: number } | undefined = { name, slot };
  while (next) {
    const current = next;
    next = undefined;
    try {
      batches += (await corq.drain(current.name, { budgetMs: Math.max(0, deadline - Date.now()) })).batches;
    } catch (error) {
      // a subscription deleted since it was listed has nothing to do: not an error
      if (!(error instanceof CorqError && error.code === "unknown_subscription")) throw error;
    } finally {
      await corq.releaseSlot(current.slot).catch(() => undefined);
    }
    if (Date.now() >= deadline) break;
    const ready = Object.entries(await corq.readyKeys(1)).find(
      ([subscription, r]) => r.ready > 0 && (r.kind === "push" || subscriptions.some((s) => s.name === subscription)),
    );
    if (!ready) break;
    const [again] = await corq.claimSlots({ max: concurrency, want: 1, holdMs: consumerBudgetMs + SLOT_MARGIN_MS });
    if (again !== undefined) next = { name: ready[0], slot: again };
  }
  return batches;
}
