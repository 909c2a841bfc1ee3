// Wake-ups at the due time on Workers. A key can come due while nothing runs: a backoff, a
// delayed event, a rate limit's room, a Retry-After, a lease that runs out. Workers have no
// process to wait in (the Node runner sets a timer, src/node/runner.ts), and the cron comes
// once a minute; so whoever ends work with a key due before the next cron asks the deployment's
// one wake-up object (a Durable Object, functions/wakeUps.ts) for a dispatch at that time.
//
//   arm (end of an invocation that did work: the cron's, a kick's, a consumer's, the wake-up's own)
//     one statement: the earliest due time (nextDue, as serve's idle loop reads it)
//     due within the cron's period (and a margin for a late cron)? one request to the object,
//     which moves its single alarm earlier, never later (coalesced: one alarm in flight)
//   alarm  POST <basePath>/dispatch with corq-wake-up through SELF: answered 202 at once, the
//     dispatch (advance, consumers) runs in that invocation's background and arms again at its end
//
// Nothing here is needed for correctness: the cron stays the safety net (a wake-up lost to an
// error is a key delivered at the next cron, as without the binding).
import { nextDue } from "../sql/consume/nextDue.js";
import { settings } from "./env.js";
import type { SubscriptionDefinition } from "../types.js";
import type { Env, Invoke, OpenCorq, WakeUpsNamespace } from "./types.js";

/** The one wake-up object of a deployment (its namespace is this Worker's: one per deployment). */
export const WAKE_UPS_OBJECT = "corq";
/** The header of the alarm's dispatch request: answered 202, dispatched in the background. */
export const WAKE_UP_HEADER = "corq-wake-up";
/** The object's one route: `{ at, path }` (epoch ms; the dispatch path under the app's basePath). */
export const WAKE_AT_URL = "https://corq.internal/wake-at";
// A key that came due this recently counts (a look now): it may have come due between the last
// claim and this read (nextDue's recentMs; serve's runner uses the same 250 ms).
const RECENTLY_DUE_MS = 250;
// Cloudflare fires a cron within seconds of its minute: a key due a little after the next one
// is armed too, not left to the cron after it.
const CRON_LATE_MS = 10_000;
// a little after the due time: the key is ready once the database's clock has passed available_at
export const AFTER_DUE_MS = 2;
// a key already due when the wake-up is armed: woken this much later (armWakeUp says why)
const AGAIN_AFTER_MS = 100;

/** The wake-up request function of `selfInvoker` (Invoke.wakeAt), or undefined without the binding. */
export function wakeUpsOf(env: Env, dispatchPath: string): Invoke["wakeAt"] {
  const namespace: WakeUpsNamespace | undefined = env.CORQ_WAKE_UPS;
  if (!namespace) return undefined;
  return async (epochMs) => {
    const stub = namespace.get(namespace.idFromName(WAKE_UPS_OBJECT));
    const response = await stub.fetch(
      new Request(WAKE_AT_URL, {
        method: "POST",
        body: JSON.stringify({ at: Math.round(epochMs), path: dispatchPath }),
      }),
    );
    await response.body?.cancel();
    if (!response.ok) throw new Error(`the wake-up object answered ${response.status}`);
  };
}

/**
 * At the end of an invocation's work: reads the earliest due time and, when it is before the
 * next cron, asks for a wake-up then. Returns the subrequests it spent (0 without the binding, 1
 * when nothing is due soon, 2 when it asked). Never throws: a failure is logged, and the cron
 * delivers what the wake-up would have.
 */
export async function armWakeUp(
  env: Env,
  invoke: Invoke,
  work: {
    opened: OpenCorq;
    subscriptions: SubscriptionDefinition[];
    /** the next due time as the invocation's consumer read it at its end (undefined: read it here) */
    dueAt?: number | null;
  },
): Promise<number> {
  const { wakeAt } = invoke;
  if (!wakeAt) return 0;
  let spent = 0;
  try {
    let { dueAt } = work;
    if (dueAt === undefined) {
      spent++;
      dueAt = await nextDueAt(work.opened, work.subscriptions);
    }
    if (dueAt === null || dueAt - Date.now() > settings(env).cronMs + CRON_LATE_MS) return spent;
    spent++;
    // a key due already (this invocation's look just missed it, or another consumer is taking
    // it): a little later, not at once — at once, every wake-up's dispatch that races a consumer
    // for such a key armed the next one immediately (six in 200 ms, measured), for RECENTLY_DUE_MS
    const now = Date.now();
    await wakeAt(dueAt <= now ? now + AGAIN_AFTER_MS : dueAt + AFTER_DUE_MS);
  } catch (error) {
    console.error("corq: arming a wake-up failed (the next cron dispatches instead):", error);
  }
  return spent;
}

/**
 * When the next key of this app comes due, in epoch ms by this runtime's clock (at or before now:
 * it came due just now), or null: none. One statement. The due time is counted from before the
 * statement was sent, not from its answer: the database's now() lies between, so a wait or an
 * alarm for it ends when the key is due, not a round trip later (at 5 per second and burst 1, a
 * rate limit lost that round trip, ~30-50 ms here, from every 200 ms interval).
 */
export async function nextDueAt(opened: OpenCorq, subscriptions: SubscriptionDefinition[]): Promise<number | null> {
  const sent = Date.now();
  const [row] = await opened.db.run<{ due_in_ms: number | string | null }>(
    nextDue(
      subscriptions.map((s) => s.name),
      { recentMs: RECENTLY_DUE_MS },
    ),
    { repeatable: true },
  );
  return row?.due_in_ms == null ? null : sent + Math.max(0, Number(row.due_in_ms));
}

/** What GET /doctor says of a Worker without the binding (on Node: nothing, its runner wakes itself). */
export function wakeUpsFinding(env: Env) {
  if (env.CORQ_NODE || env.CORQ_WAKE_UPS) return [];
  return [
    {
      severity: "warning" as const,
      code: "wake_ups_wait_for_cron" as const,
      message:
        "This Worker has no CORQ_WAKE_UPS binding: keys due before the next cron (a backoff, a delay, a rate " +
        "limit's room, a Retry-After, an expired lease) wait for the next cron (every minute deployed) or append.",
      fix:
        'Export the wake-ups from your Worker (export { CorqWakeUps } from "corqueue/worker") and add to ' +
        'wrangler.toml: [[durable_objects.bindings]] name = "CORQ_WAKE_UPS", class_name = "CorqWakeUps" and ' +
        '[[migrations]] tag = "corq-wake-ups-v1", new_sqlite_classes = ["CorqWakeUps"] (docs/deploy.md, "Wake-ups").',
    },
  ];
}
