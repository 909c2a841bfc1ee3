import { mayResend, sendWithRetries } from "../db/retries.js";
import { toError } from "../errors.js";
import type { Claimed } from "./claimed.js";

/**
 * The time by which a settlement of these batches stops being sent again: the latest of their
 * leases (a batch whose lease ran out meanwhile is settled by nothing: its fence), less a margin
 * — a tenth of the lease, at most 1 s — so the last attempt reaches the key row while the lease
 * still holds. Epoch ms on this machine's clock (Claimed.leaseHeldUntil).
 */
export function settleDeadline(batches: Claimed[]): number {
  return Math.max(...batches.map((b) => b.leaseHeldUntil - Math.min(1000, b.leaseMs / 10)));
}

/**
 * Sends a settlement (an ack, a fail, a postponement, a lease released), and when it fails on a
 * connection error (src/db/retries.ts: a terminated backend, a restart, no connection slot, Neon's
 * compute unreachable — or a deadlock) sends `again` (default: the same) after 50, 100, 200 … ms
 * (capped at 1 s, jittered) while `until` (settleDeadline) is ahead. Each attempt is a statement
 * of its own, so the executor takes a new pooled connection for it (a failed client is destroyed,
 * never reused; over Neon's HTTP path each statement is a request of its own). `send` and `again`
 * send their statement once (RunOptions.retryUntil 0): this is the one retry loop around them.
 *
 * Safe because every settlement is fenced by its lease token and an unexpired lease, checked when
 * the key row is locked: a retry of a settlement that did commit (the answer was lost, not the
 * statement) changes nothing and reads as "expired"; one whose lease has run out changes nothing.
 * Past `until` it gives up with a warning: the lease then expires unsettled and the batch comes
 * again after it, as before (DESIGN invariant 14).
 */
export async function retrySettle<T>(
  send: () => Promise<T>,
  options: { until: number; what: string; again?: () => Promise<T> },
): Promise<T> {
  try {
    return await sendWithRetries(send, { until: options.until, repeatable: true, again: options.again });
  } catch (error) {
    if (mayResend(error, true))
      console.warn(
        `corq: ${options.what} failed on a connection error and could not be sent again within the lease; ` +
          `the lease expires unsettled and the batch comes again after it: ${toError((error as { cause?: unknown }).cause ?? error).message}`,
      );
    throw error;
  }
}

/** What a statement inside retrySettle is sent with: once, the loop is retrySettle's. */
export const SENT_ONCE = { retryUntil: 0 } as const;
