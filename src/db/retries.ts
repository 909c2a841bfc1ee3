// A statement that failed on a connection error is sent again on a new connection after a short
// jittered wait, while its deadline is ahead (issue 48: a Neon compute that suspends, restarts or
// wakes; a backend terminated; a pooler that lost its server). Whether it is sent again depends
// on what the error proves and on the statement:
//   - an error that proves the statement did not commit (errors.ts `neverCommitted`: 57P01, a
//     refused connect, a deadlock…): any statement, an append too;
//   - a connection that closed while the statement was out (errors.ts `isTransient`: ECONNRESET,
//     08006, an HTTP 5xx): only a statement that is safe to repeat whether or not it committed
//     (`repeatable`): lease-fenced settlements, claims, advances, the dispatcher's slots, reads.
//     An append is not (it would be stored twice; with an Idempotency-Key the client's own retry
//     is safe), nor an operator's write (a token created twice).
import { isTransient, neverCommitted } from "../errors.js";

/** How long the executor sends a statement again (ExecutorOptions.retries). */
export interface RetryPolicy {
  /** From the first send, ms (default DEFAULT_RETRY_WITHIN_MS); 0: sent once. */
  withinMs?: number;
  /**
   * Asked before each resend: false stops (the Worker: while the invocation has subrequests to
   * spare — each resend over Neon's HTTP path is one).
   */
  allowed?: () => boolean;
}

/** A few seconds: a backend terminated or a pooler's server lost takes one reconnect; a restart, a second or two. */
export const DEFAULT_RETRY_WITHIN_MS = 5000;

// The first wait, doubling per attempt up to the cap, each jittered down to half
const FIRST_WAIT_MS = 50;
const MAX_WAIT_MS = 1000;

export interface SendAgain<T> {
  /** Epoch ms: no resend starts after it. */
  until: number;
  /** Safe to send again after an error that leaves unknown whether it committed. */
  repeatable: boolean;
  allowed?: () => boolean;
  /** What to send on the retries (default: the same as the first). */
  again?: () => Promise<T>;
}

/** Whether an error lets a statement be sent again (see the top of this file). */
export function mayResend(error: unknown, repeatable: boolean): boolean {
  return neverCommitted(error) || (repeatable && isTransient(error));
}

/** Sends `send`, and again (see above) until it succeeds, fails for good, or `until` passes; the last error goes up. */
export async function sendWithRetries<T>(send: () => Promise<T>, options: SendAgain<T>): Promise<T> {
  let attempt = send;
  for (let waitMs = FIRST_WAIT_MS; ; waitMs = Math.min(MAX_WAIT_MS, waitMs * 2)) {
    try {
      return await attempt();
    } catch (error) {
      const wait = waitMs / 2 + Math.random() * (waitMs / 2);
      if (!mayResend(error, options.repeatable) || Date.now() + wait >= options.until) throw error;
      if (options.allowed && !options.allowed()) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait));
      attempt = options.again ?? send;
    }
  }
}
