import type { Executor } from "./db/executor.js";
import { toError } from "./errors.js";
import type { Subscription } from "./config.js";
import { claimBatch, type ClaimRow } from "./sql/claimBatch.js";
import { ackBatch, type Lease } from "./sql/ackBatch.js";
import { failBatch } from "./sql/failBatch.js";
import { toStoredEvent, type EventRow } from "./sql/eventColumns.js";
import type { ConsumeResult, StoredEvent } from "./types.js";
import type { Corq } from "./corq.js";

/** Where a handler's outcome is recorded: ack (a prefix of) the batch, or fail it. */
export interface BatchSink {
  ack(through: { tx: string; position: number }, count: number): Promise<boolean>;
  fail(error: string, headPosition: number): Promise<"retry" | "dead" | "expired">;
}

/**
 * Consumes one batch: claim ONE ready key with its batch (1 statement), run the handler with
 * no transaction open, then ack or fail (1 statement). Invariant: once a key is claimed we
 * MUST record an outcome for it (ack or fail) unless the lease is gone; a thrown handler is a
 * failed attempt, never an escaped error. A lease that expired before the ack makes both
 * a no-op ("expired"): the next holder gets the batch again.
 */
export async function consumeOne(
  executor: Executor,
  subscription: Subscription,
  corq: Corq,
): Promise<ConsumeResult | null> {
  const rows = await executor.run<ClaimRow>(claimBatch(subscription.name));
  if (rows.length === 0) return null;
  const head = rows[0];
  if (head.dies) return { key: head.key, events: 0, outcome: "dead", error: "lease expired on the last attempt" };

  const lease: Lease = { subscriptionId: head.subscription_id, key: head.key, token: head.lease_token! };
  const batch = rows.map((row) => ({ event: toStoredEvent(row as EventRow), tx: row.tx! }));
  const events = batch.map((b) => b.event);
  const sink = leaseSink(executor, lease);

  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error("lease expired")), subscription.leaseMs);
  let outcome: ConsumeResult["outcome"];
  let error: string | undefined;
  try {
    const result = await subscription.handle(events, {
      subscription: subscription.name,
      key: head.key,
      attempt: head.attempts + 1,
      signal: abort.signal,
      corq,
      run: executor.run,
    });
    const through = ackedThroughIndex(events, result);
    outcome = (await sink.ack({ tx: batch[through].tx, position: events[through].position }, through + 1))
      ? "acked"
      : "expired";
  } catch (thrown) {
    error = describe(thrown);
    outcome = await sink.fail(error, events[0].position);
  } finally {
    clearTimeout(timer);
  }
  return { key: head.key, events: events.length, outcome, ...(error ? { error } : {}) };
}

export function leaseSink(executor: Executor, lease: Lease): BatchSink {
  return {
    async ack(through, count) {
      const [row] = await executor.run<{ acked: number }>(ackBatch(lease, through, count));
      return row.acked === 1;
    },
    async fail(error, headPosition) {
      const [row] = await executor.run<{ dead: boolean }>(failBatch(lease, error, headPosition));
      return row === undefined ? "expired" : row.dead ? "dead" : "retry";
    },
  };
}

/** Index of the last acked event: the whole batch, or through `ackedThrough`, which must be in it. */
function ackedThroughIndex(events: StoredEvent[], result: unknown): number {
  const through = (result as { ackedThrough?: unknown } | undefined)?.ackedThrough;
  if (through === undefined) return events.length - 1;
  const index = events.findIndex((e) => e.position === through);
  if (index === -1) throw new Error(`ackedThrough ${String(through)} is not a position of this batch`);
  return index;
}

function describe(thrown: unknown): string {
  const error = toError(thrown);
  return `${error.name}: ${error.message}`.slice(0, 4000);
}
