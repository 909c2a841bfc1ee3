/** Which parts a subscription's claims need: none of the tenant, cap and rate-limit parts (plain), the fair pick alone, or all. */
export interface ClaimParts {
  plain: boolean;
  fairOnly: boolean;
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
   * What the last claim of this subscription found (the Corq keeps one per subscription, across
   * drains): whether it had no tenant, rate limit or cap (`plain`), or a tenant and neither
   * (`fairOnly`). A drain that starts with one of them claims that way from its first statement —
   * safe, since such a claim checks it itself and takes nothing from a subscription that is not so
   * any more, and the drain then claims in full.
   */
  plainHint?: ClaimParts;
}

/**
 * A consumer's share for replaying keys when not told: a quarter of its keys per claim, at
 * least one (one key per claim: the replay still goes after live keys, claim by claim).
 */
export const replayKeysFor = (keysPerClaim: number) => Math.max(1, Math.floor(keysPerClaim / 4));
