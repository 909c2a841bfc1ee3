import type { Executor } from "./db/executor.js";
import { CorqError, toError } from "./errors.js";
import type { Subscription } from "./config.js";
import { claimBatch, type ClaimRow } from "./sql/claimBatch.js";
import { ackBatch, type Lease } from "./sql/ackBatch.js";
import { failBatch } from "./sql/failBatch.js";
import { toStoredEvent, type EventRow } from "./sql/eventColumns.js";
import { pushHandler } from "./pushDelivery.js";
import type { ConsumeResult, Handler, StoredEvent } from "./types.js";
import type { Corq } from "./corq.js";

/**
 * Consumes one batch of a code subscription (`code` given: its handler runs here) or of a
 * push subscription (the batch is POSTed to its URL): claim ONE ready key with its batch
 * (1 statement), run the handler with no transaction open, then ack or fail (1 statement).
 * Invariant: once a key is claimed we MUST record an outcome for it (ack or fail); a thrown
 * handler is a failed attempt, never an escaped error. A lease that expired before the
 * outcome is recorded makes both a no-op ("expired"): the next holder gets the batch again.
 */
export async function consumeOne(
  executor: Executor,
  target: { name: string; code?: Subscription },
  corq: Corq,
): Promise<ConsumeResult | null> {
  const rows = await executor.run<ClaimRow>(claimBatch(target.name, target.code ? undefined : "push"));
  if (rows.length === 0) {
    if (target.code) return null; // defined in code, not registered yet: nothing to do
    throw new CorqError("unknown_subscription", `no subscription named "${target.name}"`);
  }
  const head = rows[0];
  if (head.key === null) return null;
  if (head.dies) return { key: head.key, events: 0, outcome: "dead", error: "lease expired on the last attempt" };

  const lease: Lease = { subscriptionId: head.subscription_id!, key: head.key, token: head.lease_token! };
  const batch = rows.map((row) => ({ event: toStoredEvent(row as EventRow), tx: row.tx! }));
  const events = batch.map((b) => b.event);
  const handle: Handler = target.code ? target.code.handle : pushHandler(head.deliver);

  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error("lease expired")), head.lease_ms);
  let through = -1;
  let error: string | undefined;
  try {
    const result = await handle(events, {
      subscription: target.name,
      key: head.key,
      attempt: head.attempts! + 1,
      signal: abort.signal,
      corq,
      run: executor.run,
    });
    through = ackedThroughIndex(events, result);
  } catch (thrown) {
    error = describe(thrown);
  } finally {
    clearTimeout(timer);
  }
  let outcome: ConsumeResult["outcome"];
  if (error === undefined) {
    const [row] = await executor.run<{ acked: number }>(
      ackBatch(lease, { tx: batch[through].tx, position: events[through].position }, through + 1),
    );
    outcome = row.acked === 1 ? "acked" : "expired";
  } else {
    const [row] = await executor.run<{ dead: boolean }>(failBatch(lease, error, events[0].position));
    outcome = row === undefined ? "expired" : row.dead ? "dead" : "retry";
  }
  return { key: head.key, events: events.length, outcome, ...(error ? { error } : {}) };
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
