// What the runtimes' dispatchers drive (src/runtimeTypes.ts): consumer slots, kicks, the horizon probe, ready-key counts.
import { z } from "zod";
import { advanceOnce } from "../advance.js";
import { parseOrThrow, subscriptionName } from "../config.js";
import type { Executor } from "../db/executor.js";
import type { CorqRuntime } from "../runtimeTypes.js";
import { eventsAboveHorizon, horizonPassed } from "../sql/advance/eventsAboveHorizon.js";
import { claimConsumerSlots, releaseConsumerSlot, type ConsumerPlanRow } from "../sql/consume/consumerSlots.js";
import { readyKeys } from "../sql/consume/readyKeys.js";
import { MAX_KEYS_PER_CLAIM } from "./consuming.js";
import { limit, type PartDeps } from "./options.js";

// The dispatcher's statements may be sent again on a connection error whether or not they
// committed (src/db/retries.ts): reads, a slot's release, and slot claims — a claim whose answer
// was lost holds its slots until their holdMs ends, as a crashed invocation's do.
const REPEATABLE = { repeatable: true } as const;
const readyKeysCap = limit(10_000, 8);
const slotNumber = z.number().int().min(1).max(1000);
/** a transaction id (xid8) as text */
const xid = z.string().regex(/^\d{1,20}$/);
const slotOptions = z.object({
  max: slotNumber,
  want: z.number().int().min(0).max(1000),
  holdMs: z.number().int().min(1).max(3_600_000),
  codeSubscriptions: z.array(subscriptionName).max(1000),
  keysPerClaim: z.number().int().min(1).max(MAX_KEYS_PER_CLAIM).optional(),
  covered: z.number().int().min(0).max(1000).optional(),
});

export function createDispatching({
  executor,
  settings,
}: PartDeps): Pick<CorqRuntime, "claimSlots" | "kick" | "horizonWaiting" | "releaseSlot" | "readyKeys"> {
  const { code, advanceBatchSize } = settings;
  return {
    async claimSlots(slotOpts) {
      return claimSlots(await executor(), parseOrThrow(slotOptions, slotOpts, "invalid_input", "options"));
    },

    async kick(kickOpts) {
      const slotOpts = parseOrThrow(slotOptions, kickOpts.slots, "invalid_input", "slots");
      const db = await executor();
      const first = await advanceOnce(db, code, {
        batchSize: advanceBatchSize,
        coalesce: true,
        eventNames: kickOpts.eventNames,
      });
      const total = () => Object.values(first.advanced).reduce((sum, n) => sum + n, 0);
      const enqueuedFirst = total();
      const [claimed, rechecked] = await Promise.allSettled([claimSlots(db, slotOpts), first.recheck()]);
      if (claimed.status === "rejected") throw claimed.reason;
      const plan = claimed.value;
      // a failure after the claim gives its slots back (they would be held for holdMs)
      const giveBack = async (reason: unknown) => {
        for (const slot of plan.slots) await db.run(releaseConsumerSlot(slot), REPEATABLE).catch(() => undefined);
        throw reason;
      };
      if (rechecked.status === "rejected") return giveBack(rechecked.reason);
      // the re-check enqueued others' events after the claim counted ready keys: slots for them
      const left = slotOpts.want - plan.slots.length;
      if (total() > enqueuedFirst && left > 0) {
        const more = await claimSlots(db, {
          ...slotOpts,
          want: left,
          covered: (slotOpts.covered ?? 0) + plan.slots.length,
        }).catch(giveBack);
        return {
          advanced: first.advanced,
          ready: more.ready,
          consumers: more.consumers,
          slots: [...plan.slots, ...more.slots],
          waiting: more.waiting,
        };
      }
      return { advanced: first.advanced, ...plan };
    },

    async horizonWaiting(tx) {
      const db = await executor();
      if (tx === undefined) {
        const [row] = await db.run<{ waiting: boolean }>(eventsAboveHorizon(), REPEATABLE);
        return row?.waiting === true;
      }
      const [row] = await db.run<{ passed: boolean }>(
        horizonPassed(parseOrThrow(xid, tx, "invalid_input", "tx")),
        REPEATABLE,
      );
      return row?.passed !== true;
    },

    async releaseSlot(slot) {
      await (await executor()).run(
        releaseConsumerSlot(parseOrThrow(slotNumber, slot, "invalid_input", "slot")),
        REPEATABLE,
      );
    },

    async readyKeys(cap) {
      parseOrThrow(readyKeysCap, cap, "invalid_input", "cap");
      const rows = await (await executor()).run<{ name: string; kind: "code" | "push"; ready: number }>(
        readyKeys(cap),
        REPEATABLE,
      );
      return Object.fromEntries(rows.map((r) => [r.name, { kind: r.kind, ready: r.ready }]));
    },
  };
}

/**
 * The dispatcher's plan (claimConsumerSlots), decoded: subscriptions with ready keys, the
 * consumers those want, and the slots claimed.
 */
async function claimSlots(
  db: Executor,
  options: Parameters<typeof claimConsumerSlots>[0],
): Promise<{ ready: [string, number][]; consumers: [string, number][]; slots: number[]; waiting: string | null }> {
  const rows = await db.run<ConsumerPlanRow>(claimConsumerSlots(options), REPEATABLE);
  const named = (count: (row: ConsumerPlanRow) => number | null) =>
    rows.flatMap((row) => (row.name === null ? [] : [[row.name, count(row) ?? 0] as [string, number]]));
  return {
    ready: named((row) => row.ready),
    consumers: named((row) => row.consumers),
    slots: rows.flatMap((row) => (row.slot === null ? [] : [row.slot])).sort((a, b) => a - b),
    waiting: rows.find((row) => row.waiting !== null)?.waiting ?? null,
  };
}
