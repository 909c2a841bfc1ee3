// What one consumed batch came to (Corq.consume, Corq.drain).

/**
 * "expired": the lease ran out before the outcome was recorded; nothing changed, the batch comes again.
 * "released": a drain was aborted (a graceful stop) and the handler gave up: the lease was given
 * back at once and the batch comes again, no attempt counted.
 * "postponed": the handler (or the push receiver, 429/503 with Retry-After) asked to come back
 * later: nothing acked, the key waits that long, no attempt counted (docs/flow-control.md).
 */
export type Outcome = "acked" | "retry" | "dead" | "expired" | "released" | "postponed";

export interface ConsumeResult {
  key: string;
  /** Number of events handed to the handler. */
  events: number;
  outcome: Outcome;
  error?: string;
}
