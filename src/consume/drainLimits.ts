import type { Subscription } from "../config.js";

/** Which parts a subscription's claims need: none of the tenant, cap and rate-limit parts (plain), the fair pick alone, or all. */
export interface ClaimParts {
  plain: boolean;
  fairOnly: boolean;
}

/**
 * The parts a subscription's first claim sends, before any claim said: a code subscription's
 * from its definition (what the advance registers); a push one's are not known here, and most
 * have none of them, so it starts plain. Either way the claim checks against the subscription's
 * row and takes nothing if it is wrong, saying which parts it needs (claimBatch.ts, ClaimBy.plain):
 * one statement more, once per Corq, for a push subscription with a tenant, a cap or a rate limit.
 */
export function claimPartsOf(code: Subscription | undefined): ClaimParts {
  if (!code) return { plain: true, fairOnly: false };
  const bounded = code.rateLimit !== null || code.maxLeasedKeys !== null || code.maxLeasedKeysPerTenant !== null;
  return { plain: code.tenant === null && !bounded, fairOnly: code.tenant !== null && !bounded };
}

export interface DrainLimits {
  /** epoch ms: no claim after it (batches already claimed are still handled and settled) */
  deadline: number;
  maxBatches: number;
  /** keys claimed per statement, and so handlers running at once, at most */
  keysPerClaim: number;
  /**
   * Of those, replaying keys at once, at most (the replay's share of this consumer; default
   * replayKeysFor(keysPerClaim)): the rest stays free for live keys while a replay runs.
   */
  replayKeys?: number;
  /** Claim nothing more once aborted; the batches in hand finish as usual. */
  stop?: AbortSignal;
  /** Aborts the running handlers' signal; a handler that then throws has its lease released. */
  abort?: AbortSignal;
  /**
   * Which parts the subscription's claims need, as last known (the Corq keeps one per
   * subscription, across drains and consumes; claimPartsOf before any claim): no tenant, rate
   * limit or cap (`plain`), or a tenant and neither (`fairOnly`). The drain claims that way from
   * its first statement — safe, since such a claim checks it itself and takes nothing from a
   * subscription that is not so (any more), and the drain then claims as its rows say.
   */
  plainHint?: ClaimParts;
  /** Counted by the drain as it claims: the keys its claims found over their rate limit (sent to wait for room). */
  tally?: { limited: number };
}

/**
 * A consumer's share for replaying keys when not told: a quarter of its keys per claim, at
 * least one (one key per claim: the replay still goes after live keys, claim by claim).
 */
export const replayKeysFor = (keysPerClaim: number) => Math.max(1, Math.floor(keysPerClaim / 4));
