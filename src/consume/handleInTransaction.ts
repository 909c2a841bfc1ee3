import { drizzleTransaction } from "../db/drizzleTransaction.js";
import type { Executor } from "../db/executor.js";
import { present } from "../errors.js";
import { ackInTransaction } from "../sql/consume/ackBatch.js";
import type { HandlerContext } from "../types.js";
import { ackedThroughIndex, postponement, throughOf, type Claimed, type Verdict } from "./claimed.js";

/** The handler asked to come back later: its transaction is rolled back, nothing acked. */
export class Postponed extends Error {
  constructor(readonly verdict: { error: string; postponeMs: number }) {
    super(verdict.error);
  }
}

/** The lease was gone when the transactional handler's ack ran: its transaction is rolled back. */
export class LeaseLost extends Error {
  constructor(readonly through: number) {
    super("the lease was lost before the batch was acked");
  }
}

/**
 * A transactional handler's run: BEGIN on a connection of its own (on Workers and with
 * driver "neon-http", a session opened for this batch only) → the handler, writing through
 * `ctx.tx` / `ctx.run` → the ack, fenced by the lease, as the transaction's last statement →
 * COMMIT. So its writes and the ack commit together or not at all:
 *   - the handler throws (or its answer is not understood): ROLLBACK, and the failure is
 *     recorded outside the transaction, as for any handler (attempts, backoff, dead letter);
 *   - it answers `{ retryAfterMs }`: ROLLBACK (nothing it wrote is kept, nothing acked), and the
 *     postponement is recorded outside the transaction;
 *   - the lease was lost (expired, or the key taken over by another consumer): the fenced ack
 *     changes nothing, so ROLLBACK: no effect of this run remains ("expired", as today);
 *   - the process dies anywhere before COMMIT: Postgres rolls back; the batch comes again.
 * The ack locks the key row only at the end (a lock held across the handler would stall the
 * advance of that key); from then to COMMIT no one else can claim the key, so a lease that
 * holds at the ack holds at the commit.
 */
export async function handleInTransaction(
  claimed: Claimed,
  { executor, context }: { executor: Executor; context: Omit<HandlerContext, "tx"> },
): Promise<Verdict> {
  return executor.transaction(
    async (tx) => {
      const result = await claimed.handle(claimed.events, {
        ...context,
        run: tx.run,
        tx: drizzleTransaction(tx),
      });
      const later = postponement(result);
      if (later) throw new Postponed(later);
      const through = ackedThroughIndex(claimed.events, result);
      const [row] = await tx.run<{ acked: number; pending: number | null; at: string | null }>(
        ackInTransaction(claimed.lease, { through: throughOf(claimed, through), count: through + 1 }),
      );
      const { acked, pending, at } = present(row, "the ack's count row");
      if (acked !== 1) throw new LeaseLost(through);
      const done = new Date(present(at, "the ack's time"));
      return { through, committed: { outcome: "acked" as const, pending: pending ?? 0, at: done } };
    },
    { dedicated: true },
  );
}
