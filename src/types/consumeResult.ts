// What one consumed batch came to (Corq.consume, Corq.drain).

/**
 * "expired": the lease ran out before the outcome was recorded; nothing changed, the batch comes again.
 * "released": a drain was aborted (a graceful stop) and the handler gave up: the lease was given
 * back at once and the batch comes again, no attempt counted.
 */
export type Outcome = "acked" | "retry" | "dead" | "expired" | "released";

export interface ConsumeResult {
  key: string;
  /** Number of events handed to the handler. */
  events: number;
  outcome: Outcome;
  error?: string;
}
