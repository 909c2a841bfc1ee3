import type { SQL } from "drizzle-orm";
import { present, toError } from "../errors.js";
import { ackBatch } from "../sql/consume/ackBatch.js";
import { failBatch } from "../sql/consume/failBatch.js";
import { recordBatches } from "../sql/activity/activity.js";
import { settleAndClaim, type ClaimRow } from "../sql/consume/claimBatch.js";
import { claimBy } from "./claimOnce.js";
import { retrySettle, SENT_ONCE, settleDeadline } from "./retrySettle.js";
import type { ConsumeResult } from "../types.js";
import {
  ackedThroughIndex,
  committed,
  committedRecords,
  headPosition,
  isPostponed,
  postponement,
  settlement,
  throughOf,
  type Claimed,
  type Consumer,
  type Handled,
  type Verdict,
} from "./claimed.js";
import { handleInTransaction, LeaseLost, Postponed } from "./handleInTransaction.js";
import { validated } from "../eventSchemas.js";
import { traceBatch, type SpanOutcome } from "../tracing.js";
import type { TraceHeaders } from "../types.js";

/** Runs a claimed batch's handler: a `process <subscription>` span when a tracer is registered (src/tracing.ts). */
export async function handle(
  consumer: Consumer,
  claimed: Claimed,
  options: { stopping?: AbortSignal } = {},
): Promise<Verdict> {
  const { lease, attempt, traceContexts } = claimed;
  return traceBatch(
    { subscription: consumer.target.name, key: lease.key, attempt, traceContexts },
    (trace) => run(consumer, claimed, { ...options, trace }),
    onSpan,
  );
}

async function run(
  { executor, target, corq }: Consumer,
  claimed: Claimed,
  { stopping, trace }: { stopping?: AbortSignal; trace?: TraceHeaders },
): Promise<Verdict> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error("lease expired")), claimed.leaseMs);
  const onStop = () => abort.abort(new Error("the consumer is stopping"));
  if (stopping?.aborted) onStop();
  else stopping?.addEventListener("abort", onStop, { once: true });
  const context = {
    subscription: target.name,
    incarnation: claimed.incarnation,
    key: claimed.lease.key,
    attempt: claimed.attempt,
    signal: abort.signal,
    corq,
    run: executor.run,
    ...(trace ? { trace } : {}),
  };
  try {
    // the subscription's schemas first (its batch fails as a handler's would), before any transaction opens
    const validators = target.code?.validators;
    const events = validators ? await validated(claimed.events, validators) : claimed.events;
    if (target.code?.transactional) return await handleInTransaction({ ...claimed, events }, { executor, context });
    const result = await claimed.handle(events, context);
    return postponement(result) ?? { through: ackedThroughIndex(claimed.events, result) };
  } catch (thrown) {
    if (thrown instanceof LeaseLost) return { through: thrown.through, committed: { outcome: "expired", pending: 0 } };
    if (thrown instanceof Postponed) return thrown.verdict;
    // a handler that gave up because the drain was aborted has not failed: its batch goes back
    return { error: describe(thrown), released: stopping?.aborted === true };
  } finally {
    clearTimeout(timer);
    stopping?.removeEventListener("abort", onStop);
  }
}

/**
 * Records a verdict on its own: 1 statement (ack, fail with backoff / dead, or postpone), sent
 * again on a new connection if it fails on a connection error while the lease holds (retrySettle).
 */
export async function record(
  { executor, target }: Consumer,
  { claimed, verdict }: Handled,
): Promise<ConsumeResult["outcome"]> {
  const settled = committed(verdict);
  if (settled) {
    // telemetry, after the transaction's COMMIT (see ackInTransaction): a failed write is dropped
    const records = committedRecords(claimed, verdict);
    if (records.length > 0) await executor.run(recordBatches(records)).catch(() => undefined);
    return settled.outcome;
  }
  // each statement below is fenced by the lease: sent again on a connection error while it holds
  const retried = <T>(what: string, query: SQL) =>
    retrySettle(() => executor.run<T>(query, SENT_ONCE), {
      until: settleDeadline([claimed]),
      what: `the ${what} of key "${claimed.lease.key}"`,
    });
  if ("through" in verdict) {
    const [row] = await retried<{ acked: number }>(
      "ack",
      ackBatch(claimed.lease, {
        through: throughOf(claimed, verdict.through),
        count: verdict.through + 1,
        claimedAt: claimed.claimedAt,
      }),
    );
    return present(row, "the ack's count row").acked === 1 ? "acked" : "expired";
  }
  if (isPostponed(verdict)) {
    // the settle statement, claiming nothing: postponements are decided there (their bounds)
    const statement = settleAndClaim(target.name, claimBy(target, 0), {
      subscriptionId: claimed.lease.subscriptionId,
      settlements: [settlement(claimed, verdict)],
    });
    const rows = await retried<ClaimRow>("postponement", statement);
    const [settled] = rows.find((row) => row.settled !== null)?.settled ?? [];
    return settled?.outcome ?? "expired";
  }
  const failed = failBatch(claimed.lease, {
    error: verdict.error,
    headPosition: headPosition(claimed),
    count: claimed.events.length,
    claimedAt: claimed.claimedAt,
  });
  const [row] = await retried<{ dead: boolean }>("failure", failed);
  return row === undefined ? "expired" : row.dead ? "dead" : "retry";
}

/** A verdict on its span: a failed attempt is an error (its type: the thrown error's name); the rest are attributes. */
function onSpan(verdict: Verdict): SpanOutcome {
  if ("through" in verdict) {
    const attributes = { "corq.acked_count": verdict.through + 1 };
    if (verdict.committed?.outcome !== "expired") return { attributes };
    return { attributes, error: { type: "lease_lost", message: "the lease was lost before the batch was acked" } };
  }
  if (verdict.released) return { attributes: { "corq.released": true } };
  if (verdict.postponeMs !== undefined) return { attributes: { "corq.retry_after_ms": verdict.postponeMs } };
  return { error: { type: /^(\w+): /.exec(verdict.error)?.[1] ?? "Error", message: verdict.error } };
}

function describe(thrown: unknown): string {
  const error = toError(thrown);
  return `${error.name}: ${error.message}`.slice(0, 4000);
}
