// Moves the log into the queues and fans out consumer invocations. Runs from the cron and,
// in the background (ctx.waitUntil), after every append so delivery does not wait a minute.
import { CorqError, type SubscriptionDefinition } from "../index.js";
import { settings } from "./env.js";
import { roundRobin } from "../roundRobin.js";
import { coalesceKicks, scopeKey } from "./isolateKicks.js";
import { startHorizonRetry } from "./horizonRetry.js";
import type { Env, Invoke, OpenCorq } from "./types.js";
import { AFTER_DUE_MS, armWakeUp, nextDueAt, wakeUpsOf } from "./wakeUps.js";

/**
 * After an operator's action that queued work (a rewind): advance and dispatch consumers in the
 * background of this request (its own database handle), so delivery does not wait for the cron.
 */
export function dispatchInBackground(
  c: {
    env: Env;
    var: { invoke: Invoke; openCorq: () => OpenCorq };
    executionCtx: { waitUntil(promise: Promise<unknown>): void };
  },
  subscriptions: SubscriptionDefinition[],
  after: string,
): void {
  // On Node the process wakes its own consumers after every write (src/node/serve.ts).
  if (c.env.CORQ_NODE) return;
  c.executionCtx.waitUntil(
    advanceAndDispatch(c.env, subscriptions, c.var.invoke, {
      opened: c.var.openCorq(),
      coalesce: true,
    }).catch((error) => console.error(`corq: dispatch after ${after} failed:`, error)),
  );
}

/** The origin this Worker's invocations of itself are addressed to (selfInvoker). */
export const INTERNAL_ORIGIN = "https://corq.internal";

// A consumer slot is held for the consumer's budget and this much more (its invocation's own
// start and end); a consumer frees it when done, a crashed one when this runs out.
const SLOT_MARGIN_MS = 15_000;
// Subrequests (CORQ_MAX_SUBREQUESTS) a batch costs at most: its ack+claim, a claim of its own
// when the key it acked has more, and a push delivery. And what a consumer keeps for the end:
// freeing its slot, looking for ready keys and claiming a slot again (one statement), starting
// the next invocation.
const SUBREQUESTS_PER_BATCH = 3;
const SUBREQUESTS_AFTER = 3;
// with the wake-up binding, two more: the next due time and the wake-up object (wakeUps.ts)
const SUBREQUESTS_ARMING = 2;
// With the wake-up binding, a consumer with budget left waits in place for a key due this soon
// (consumeInSlot), instead of a wake-up's round trip.
const WAIT_WITHIN_MS = 1000;

/**
 * Advance, then put consumers on the ready keys, spread over the subscriptions (round robin),
 * each draining keys for its time budget: this invocation is the first consumer, the others
 * are separate invocations. Each consumer holds a consumer slot (claimed in the database), so
 * however many appends kick this at once, at most CORQ_CONCURRENCY consumers run.
 * Uses (and closes) `options.opened`. The cron also
 * runs housekeeping (`options.housekeeping`: idle keys, the activity record …). Wake-ups (an append's kick, the cron)
 * pass `coalesce` (corq.kick): the advance returns at once where another is at work, and its
 * re-check for others' kicks runs beside the slot claim; an append passes its `eventNames`:
 * only the subscriptions that take them advance.
 */
export async function advanceAndDispatch(
  env: Env,
  subscriptions: SubscriptionDefinition[],
  invoke: Invoke,
  options: DispatchOptions & {
    /** over cells: this cell's only (an append's kick dispatches its stream's cell); default every cell */
    cell?: string;
  },
): Promise<{ advanced: Record<string, number>; dispatched: number; consumedHere: number }> {
  const { opened } = options;
  if (!opened.cells) return advanceAndDispatchOne(env, subscriptions, invoke, options);
  // Over cells: every cell advances and dispatches on its own handle (its horizon, its consumer
  // slots), at once; a cell that fails is logged and holds back no other.
  const total = { advanced: {} as Record<string, number>, dispatched: 0, consumedHere: 0 };
  try {
    const cells = [...opened.cells].filter(([name]) => options.cell === undefined || name === options.cell);
    const results = await Promise.allSettled(
      cells.map(([name, cellOpened]) =>
        advanceAndDispatchOne(env, subscriptions, invokeInCell(invoke, name), { ...options, opened: cellOpened }),
      ),
    );
    results.forEach((result, index) => {
      const name = cells[index]?.[0];
      if (result.status === "rejected") {
        console.error(`corq: cell "${name}": dispatch failed:`, result.reason);
        return;
      }
      total.advanced = added(total.advanced, result.value.advanced);
      total.dispatched += result.value.dispatched;
      total.consumedHere += result.value.consumedHere;
    });
  } finally {
    await opened.end();
  }
  return total;
}

/** A cell's consumers consume from their cell: its invocations carry it (the consume route opens that cell's runtime). */
export const CELL_HEADER = "corq-cell";

function invokeInCell(invoke: Invoke, cell: string): Invoke {
  const inCell: Invoke = (path, init) => {
    const headers = new Headers(init.headers);
    headers.set(CELL_HEADER, cell);
    return invoke(path, { ...init, headers });
  };
  // a wake-up dispatches every cell
  inCell.wakeAt = invoke.wakeAt;
  return inCell;
}

/** `invoke` with this cell in every invocation, where `opened` is a cell's handle (else `invoke` itself). */
export function cellInvoker(invoke: Invoke, opened: OpenCorq): Invoke {
  return opened.cell === undefined ? invoke : invokeInCell(invoke, opened.cell);
}

interface DispatchOptions {
  /** the database handle it uses, and closes */
  opened: OpenCorq;
  housekeeping?: boolean;
  coalesce?: boolean;
  eventNames?: string[];
  /** this dispatch is itself the retry after the horizon passed (src/http/horizonRetry.ts): it starts none */
  afterHorizon?: boolean;
  /** this dispatch is a wake-up's (src/http/wakeUps.ts): it arms the next one whatever it did */
  wakeUp?: boolean;
  /** the append that kicked this dispatch had a delayed event: it arms a wake-up for its time */
  delayed?: boolean;
}

async function advanceAndDispatchOne(
  env: Env,
  subscriptions: SubscriptionDefinition[],
  invoke: Invoke,
  options: DispatchOptions,
): Promise<{ advanced: Record<string, number>; dispatched: number; consumedHere: number }> {
  const { opened } = options;
  const { concurrency, consumerBudgetMs, keysPerClaim } = settings(env);
  let advanced: Record<string, number>;
  let plan: string[];
  let consumedHere = 0;
  // other appends' kicks in this isolate left their event names with this one (coalesceKicks)
  let merged = false;
  // the consumer here left keys waiting for a time, and the next due time when it read it at its
  // end (the wake-up needs no second read)
  let leftWaiting = false;
  let dueAt: number | null | undefined;
  let others: Promise<PromiseSettledResult<Response>[]> = Promise.resolve([]);
  // this app on this database: kicks (and horizon retries) in this isolate meet only within it
  // (a cell's: its own, so no kick of one cell is left with another's)
  const scope = {
    databaseUrl: opened.cell === undefined ? (env.DATABASE_URL ?? "") : `cell ${opened.cell}`,
    codeSubscriptions: subscriptions.map((s) => s.name),
  };
  try {
    // one consumer per CORQ_KEYS_PER_CLAIM ready keys of a subscription (its claims take that
    // many at once), as far as free slots go: decided in the database, so the kicks of many
    // concurrent appends together start at most CORQ_CONCURRENCY consumers
    const slotOptions = {
      max: concurrency,
      want: concurrency,
      holdMs: consumerBudgetMs + SLOT_MARGIN_MS,
      codeSubscriptions: subscriptions.map((s) => s.name),
      keysPerClaim,
    };
    let consumers: [string, number][];
    let slots: number[];
    let waiting: string | null = null;
    if (options.coalesce) {
      const kick = (eventNames: string[] | undefined, covered: number) =>
        opened.corq.kick({ eventNames, slots: { ...slotOptions, want: concurrency - covered, covered } });
      // a kick that met another in this isolate left its event names with it: nothing to do here
      ({ advanced, consumers, slots, waiting } = (await coalesceKicks(
        scope,
        options.eventNames,
        () => kick(options.eventNames, 0),
        async (names, first) => {
          merged = true;
          try {
            const more = await kick(names, first.slots.length);
            return {
              advanced: added(first.advanced, more.advanced),
              ready: more.ready,
              consumers: more.consumers,
              slots: [...first.slots, ...more.slots],
              waiting: more.waiting,
            };
          } catch (error) {
            // the kicks left with this one are lost as a failed kick is (the cron advances); its own plan stands
            console.error("corq: coalesced kick failed:", error);
            return first;
          }
        },
      )) ?? { advanced: {}, consumers: [], slots: [], waiting: null });
    } else {
      advanced = await opened.corq.advance();
      ({ consumers, slots } = await opened.corq.claimSlots(slotOptions));
    }
    // its own failure stops nothing: the consumers are started all the same
    if (options.housekeeping)
      await opened.corq.housekeeping().catch((error) => console.error("corq: housekeeping failed:", error));
    plan = roundRobin(consumers, slots.length);
    for (const unused of slots.slice(plan.length)) await opened.corq.releaseSlot(unused);
    const [here, ...elsewhere] = inSlots(plan, slots);
    const started = elsewhere.map((consumer) => startConsumer(env, invoke, consumer));
    // events this kick could not advance yet (an older transaction still ran): one more invocation
    // advances them once the horizon has passed, instead of the cron a minute later
    if (waiting !== null && options.coalesce && !options.afterHorizon) {
      const retry = startHorizonRetry(scopeKey(scope), () =>
        invoke("/dispatch", {
          method: "POST",
          headers: { authorization: `Bearer ${env.CORQ_ADMIN_TOKEN ?? ""}`, "corq-after-horizon": waiting },
        }),
      );
      if (retry) started.push(retry);
    }
    // the invocations started through SELF are subrequests of this one too
    if (here !== undefined) {
      const consumed = await consumeInSlot(env, {
        subscriptions,
        opened,
        first: here,
        continueIn: (next) => {
          started.push(startConsumer(env, invoke, next));
        },
        otherSubrequests: started.length,
      });
      consumedHere = consumed.batches;
      ({ leftWaiting, dueAt } = consumed);
    }
    // the next wake-up, if a key is due before the next cron: the cron's and a wake-up's always
    // (they are what re-arms, and see every due time), a kick's when its append had a delayed
    // event or took others' in (merged), or its consumer left keys waiting (a backoff, a
    // Retry-After, a rate limit's room). The consumers it started arm at their own ends. A kick
    // that only delivered reads nothing: one statement per append would be a third more of them.
    if (options.housekeeping || options.wakeUp || options.delayed || merged || leftWaiting)
      await armWakeUp(env, invoke, { opened, subscriptions, dueAt });
    others = Promise.allSettled(started);
  } finally {
    await opened.end();
  }
  for (const result of await others) {
    if (result.status === "rejected") console.error("corq: consumer invocation failed:", result.reason);
    else await result.value.body?.cancel();
  }
  return { advanced, dispatched: Math.max(0, plan.length - 1), consumedHere };
}

/** roundRobin plans at most one subscription per slot: each planned name with its slot, in plan order. */
function inSlots(plan: string[], slots: number[]): { name: string; slot: number }[] {
  return plan.flatMap((name, i) => {
    const slot = slots[i];
    return slot === undefined ? [] : [{ name, slot }];
  });
}

function added(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const sum = { ...a };
  for (const [name, n] of Object.entries(b)) sum[name] = (sum[name] ?? 0) + n;
  return sum;
}

/** Starts a consumer invocation in `slot` (it frees the slot, or hands it on, when done). */
export function startConsumer(
  env: Env,
  invoke: Invoke,
  { name, slot }: { name: string; slot: number },
): Promise<Response> {
  const { consumerBudgetMs } = settings(env);
  return invoke(`/consume/${encodeURIComponent(name)}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${env.CORQ_ADMIN_TOKEN ?? ""}`,
      "corq-budget-ms": String(consumerBudgetMs),
      "corq-slot": String(slot),
    },
  });
}

/**
 * Invokes this Worker again: a separate invocation through the SELF service binding when there
 * is one, else in this invocation (`here`: the app's own fetch; on Node, in the process). Never
 * a fetch to a URL: built from a request (its Host, its request target) it sent the admin token
 * that the invocation carries wherever a client pointed it (DESIGN: never derive a destination
 * from a request). The path goes under `basePath` (src/http/basePath.ts): SELF is the user's
 * whole Worker, whose router hands corq only what is under it.
 */
export function selfInvoker(
  env: Env,
  options: { here: (request: Request) => Response | Promise<Response>; basePath: string },
): Invoke {
  const { here, basePath } = options;
  const invoke: Invoke = async (path, init) => {
    const request = new Request(new URL(`${basePath}${path}`, INTERNAL_ORIGIN), init);
    return env.SELF ? env.SELF.fetch(request) : here(request);
  };
  // the wake-up object's alarm comes back through SELF too (functions/wakeUps.ts)
  invoke.wakeAt = wakeUpsOf(env, `${basePath}/dispatch`);
  return invoke;
}

/**
 * One consumer in its slot: drains `name` for the budget (time, and the invocation's
 * subrequests), frees the slot — then looks once more for ready keys and, if there are, claims
 * a slot again in the same statement, and drains on; when its own budget is spent it hands that slot to a new
 * invocation (`continueIn`) instead. The look comes after the slot is free, so a kick that found
 * every slot busy is never lost: either it got this slot, or its keys were ready (committed
 * before it tried) by the time of the look. Returns the batches consumed here and the
 * subrequests spent (as counted: statements, deliveries, invocations).
 *
 * With the wake-up binding, when a drain finds nothing more ready, it reads the next due time
 * (one statement): a key due within WAIT_WITHIN_MS and the budget is waited for in the slot and
 * the subscription drained again — a rate limit's next room (200 ms at 5 per second), a short
 * backoff — instead of a wake-up's round trip (an alarm, an invocation, a dispatch, a slot: 100-
 * 300 ms each, lost from a smooth rate limit's every interval). A wait that finds nothing for the
 * subscription (the due key was another's) goes on to the look; one whose subrequests are spent
 * goes on to the look too, which hands its slot on with the key now ready. The due time read last
 * is returned (`dueAt`) when nothing came after it: the caller's wake-up reads it from there.
 */
export async function consumeInSlot(
  env: Env,
  consumer: {
    subscriptions: SubscriptionDefinition[];
    opened: OpenCorq;
    first: { name: string; slot: number };
    /** hands a slot on to a new invocation when this one's budget is spent */
    continueIn: (next: { name: string; slot: number }) => void;
    /** subrequests this invocation spent already (the invocations it started) */
    otherSubrequests?: number;
  },
): Promise<{ batches: number; subrequests: number; leftWaiting: boolean; dueAt?: number | null }> {
  const { subscriptions, opened, first, continueIn, otherSubrequests = 0 } = consumer;
  const { concurrency, consumerBudgetMs, maxSubrequests, keysPerClaim, replayKeys } = settings(env);
  const { corq } = opened;
  const deadline = Date.now() + consumerBudgetMs;
  let batches = 0;
  // spent so far: statements, SELF invocations, and a delivery per batch (push; counted for
  // code subscriptions too, to be safe); batches that fit in the rest, keeping SUBREQUESTS_AFTER
  const spent = () => opened.statements() + otherSubrequests + batches;
  const after = SUBREQUESTS_AFTER + (env.CORQ_WAKE_UPS ? SUBREQUESTS_ARMING : 0);
  const batchesLeft = () => Math.floor((maxSubrequests - spent() - after) / SUBREQUESTS_PER_BATCH);
  // its drains left keys waiting for a time (a backoff, a Retry-After, a rate limit's room): the
  // caller arms a wake-up for them; dueAt, when read last, is when the next key is due
  let leftWaiting = false;
  let dueAt: number | null | undefined;
  for (let current = first; ; ) {
    try {
      for (let waited = false; ; waited = true) {
        const maxBatches = batchesLeft();
        if (maxBatches < 1) break;
        const budgetMs = Math.max(0, deadline - Date.now());
        const drain = await corq.drain(current.name, { budgetMs, maxBatches, keysPerClaim, replayKeys });
        const drained = drain.batches;
        batches += drained;
        if (drain.waiting > 0) leftWaiting = true;
        dueAt = undefined;
        // out of subrequests (batchesLeft), it still waits: the look below then finds the key ready
        // and hands the slot on to a new invocation (continueIn), sooner than a wake-up would
        // nothing left waiting: nothing due soon that this consumer made (the common case: no read)
        if (!env.CORQ_WAKE_UPS || !leftWaiting || (drained === 0 && !waited) || Date.now() >= deadline) break;
        dueAt = await nextDueAt(opened, subscriptions);
        if (dueAt === null || dueAt > Math.min(Date.now() + WAIT_WITHIN_MS, deadline)) break;
        // waited, and the key went to another claim or was sent back to wait for its room: wait
        // again for a time to come, but not for one already here that it could not take
        if (drained === 0 && dueAt <= Date.now()) break;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, (dueAt ?? 0) - Date.now()) + AFTER_DUE_MS));
      }
    } catch (error) {
      // a subscription deleted since it was listed has nothing to do: not an error
      if (!(error instanceof CorqError && error.code === "unknown_subscription")) throw error;
    } finally {
      await corq.releaseSlot(current.slot).catch(() => undefined);
    }
    const spentAll = Date.now() >= deadline || batchesLeft() < 1;
    const {
      ready: [next],
      slots: [slot],
    } = await corq.claimSlots({
      // one slot, for itself: any ready key wants a consumer (keysPerClaim would not change that)
      max: concurrency,
      want: 1,
      holdMs: consumerBudgetMs + SLOT_MARGIN_MS,
      codeSubscriptions: subscriptions.map((s) => s.name),
    });
    // nothing ready, or every slot at work (they will look again too)
    if (next === undefined || slot === undefined) return { batches, subrequests: spent(), leftWaiting, dueAt };
    if (spentAll) {
      continueIn({ name: next[0], slot });
      return { batches, subrequests: spent() + 1, leftWaiting };
    }
    current = { name: next[0], slot };
  }
}
