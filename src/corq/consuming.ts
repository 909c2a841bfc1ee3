// Consumption: claim a key and run its batch (consume), or many at once until a budget is spent (drain).
import { z } from "zod";
import type { BatchRecorder } from "../batchRecorder.js";
import { parseOrThrow, subscriptionName } from "../config.js";
import { consumeOne, drainKeys } from "../consume.js";
import type { ClaimParts } from "../consume/drainLimits.js";
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
  // per subscription: whether its last claim found it plain or fair only (DrainLimits.plainHint); kept once
  // a drain of it succeeded, so names that match no subscription leave nothing behind
  const plainHints = new Map<string, ClaimParts>();
  return {
    async consume(name) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      return consumeOne({ executor: await executor(), target: { name, code: code.get(name), holder }, corq: corq() });
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
      const plainHint: ClaimParts = plainHints.get(name) ?? { plain: false, fairOnly: false };
      const results = await drainKeys(consumer, {
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
      };
    },
  };
}
