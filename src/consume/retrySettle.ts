import { isTransient, toError } from "../errors.js";
import type { Claimed } from "./claimed.js";

// The first wait after a settlement failed on a connection error, doubling per attempt up to the
// cap: a restarted or resumed server answers in well under a second here (a pg_terminate_backend
// ends one connection, the next connect succeeds at once), and a batch's lease is 30 s by default.
const FIRST_WAIT_MS = 50;
const MAX_WAIT_MS = 1000;

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
 * connection error (isTransient: a terminated backend, a restart, no connection slot, Neon's
 * compute unreachable) sends `again` (default: the same) after 50, 100, 200 … ms (capped at 1 s,
 * ±half jittered) while `until` (settleDeadline) is ahead. Each attempt is a statement of its
 * own, so the executor takes a new pooled connection for it (a failed client is destroyed, never
 * reused; over Neon's HTTP path each statement is a request of its own).
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
  const { until, what, again = send } = options;
  let attempt = send;
  for (let waitMs = FIRST_WAIT_MS; ; waitMs = Math.min(MAX_WAIT_MS, waitMs * 2)) {
    try {
      return await attempt();
    } catch (error) {
      if (!isTransient(error)) throw error;
      const wait = waitMs / 2 + Math.random() * (waitMs / 2);
      if (Date.now() + wait >= until) {
        console.warn(
          `corq: ${what} failed on a connection error and could not be sent again within the lease; ` +
            `the lease expires unsettled and the batch comes again after it: ${toError((error as { cause?: unknown }).cause ?? error).message}`,
        );
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
      attempt = again;
    }
  }
}
