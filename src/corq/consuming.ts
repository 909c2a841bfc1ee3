// Consumption: claim a key and run its batch (consume), or many at once until a budget is spent (drain).
import { z } from "zod";
import type { BatchRecorder } from "../batchRecorder.js";
import { parseOrThrow, subscriptionName } from "../config.js";
import { consumeOne, drainKeys } from "../consume.js";
import { claimPartsOf, type ClaimParts } from "../consume/drainLimits.js";
import type { Corq } from "../types.js";
import type { PartDeps } from "./options.js";

/** Keys a drain claims per statement when not told (bench/RESULTS.md, "Keys per claim"). */
export const DEFAULT_KEYS_PER_CLAIM = 16;
export const MAX_KEYS_PER_CLAIM = 256;
const drainOptions = z.object({
  budgetMs: z.number().int().min(0).max(900_000).default(10_000),
  maxBatches: z.number().int().min(1).default(1_000_000),
  keysPerClaim: z.number().int().min(1).max(MAX_KEYS_PER_CLAIM).default(DEFAULT_KEYS_PER_CLAIM),
  // at least one: a consumer that never takes a replaying key would leave a replay to others
  replayKeys: z.number().int().min(1).max(MAX_KEYS_PER_CLAIM).optional(),
});

export function createConsuming({
  executor,
  settings,
  recorder,
  corq,
}: PartDeps & {
  /** Where a drain's acked batches go (the activity record). */
  recorder: BatchRecorder;
  /** The Corq handlers are given (HandlerContext.corq; push finds its transport by it): the facade, once built. */
  corq: () => Corq;
}): Pick<Corq, "consume" | "drain"> {
  const { code, holder } = settings;
  // per subscription: the parts its claims need (DrainLimits.plainHint), from its definition and
  // then as its last claim found; kept once a consume or drain of it succeeded, so names that match
  // no subscription leave nothing behind
  const plainHints = new Map<string, ClaimParts>();
  const partsOf = (name: string) => plainHints.get(name) ?? claimPartsOf(code.get(name));
  return {
    async consume(name) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const consumer = { executor: await executor(), target: { name, code: code.get(name), holder }, corq: corq() };
      const parts = partsOf(name);
      const result = await consumeOne(consumer, parts);
      plainHints.set(name, parts);
      return result;
    },

    async drain(name, drainOpts = {}) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const { stop, abort, ...limits } = drainOpts;
      const { budgetMs, maxBatches, keysPerClaim, replayKeys } = parseOrThrow(
        drainOptions,
        limits,
        "invalid_input",
        "options",
      );
      const consumer = { executor: await executor(), target: { name, code: code.get(name), holder }, corq: corq() };
      const plainHint = partsOf(name);
      const tally = { limited: 0 };
      const results = await drainKeys(consumer, {
        tally,
        recorder,
        deadline: Date.now() + budgetMs,
        maxBatches,
        keysPerClaim,
        replayKeys,
        stop,
        abort,
        plainHint,
      });
      plainHints.set(name, plainHint);
      return {
        first: results[0] ?? null,
        batches: results.length,
        events: results.reduce((sum, r) => sum + r.events, 0),
        waiting: tally.limited + results.filter((r) => r.outcome === "retry" || r.outcome === "postponed").length,
      };
    },
  };
}
