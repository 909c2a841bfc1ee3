import type { Executor } from "../db/executor.js";
import { present } from "../errors.js";
import { MAX_RETRY_AFTER_MS, type Subscription } from "../config.js";
import type { Settlement } from "../sql/consume/settleKeys.js";
import type { AckThrough, Lease } from "../sql/consume/ackBatch.js";
import type { BatchRecordRow } from "../sql/activity/activity.js";
import type { ConsumeResult, Corq, DeliveredEvent, Handler } from "../types.js";

/** A code subscription (its handler runs here) or a push subscription (batches are POSTed). */
export interface ConsumeTarget {
  name: string;
  code?: Subscription;
  /** Who claims: recorded on each lease (the keys API shows it). */
  holder?: string;
}

/** Who consumes: the one door to the database, the subscription, and the Corq its handlers get. */
export interface Consumer {
  executor: Executor;
  target: ConsumeTarget;
  corq: Corq;
}

export interface Claimed {
  lease: Lease;
  /** The database clock at the claim: the batch's start in the activity record. */
  claimedAt: Date;
  attempt: number;
  leaseMs: number;
  /**
   * Epoch ms on this machine's clock: when the claim was sent, plus leaseMs. The lease began when
   * the key row was locked, after that, so it is held at least until then (a settlement's retries
   * stop before it: retrySettle.ts).
   */
  leaseHeldUntil: number;
  incarnation: string;
  handle: Handler;
  events: DeliveredEvent[];
  txs: string[];
  /** Each event's trace context as it was appended (events.trace_context; null: untraced). */
  traceContexts: (string | null)[];
  /** Claimed as a replaying key (counts against the drain's replayKeys). */
  replaying: boolean;
}

/**
 * What a handler run decided: ack through an index of the batch, fail with an error, or give
 * the batch back (the drain was aborted and the handler threw: a graceful stop, not a failure).
 * A transactional handler's ack is already settled (`committed`) in the transaction of its
 * writes — or that transaction was rolled back because the lease was lost ("expired"); `at`:
 * when an acked one was done (its activity record, written after the COMMIT: committedRecords).
 */
export type Verdict =
  | { through: number; committed?: { outcome: "acked" | "expired"; pending: number; at?: Date } }
  | { error: string; released?: boolean; postponeMs?: number };

/** A batch whose handler is done, and what it decided. */
export interface Handled {
  claimed: Claimed;
  verdict: Verdict;
}

export const isReleased = (verdict: Verdict) => "error" in verdict && verdict.released === true;
export const committed = (verdict: Verdict) => ("committed" in verdict ? verdict.committed : undefined);

/** A verdict as the settle statement takes it. */
export function settlement(claimed: Claimed, verdict: Verdict): Settlement {
  const base = { key: claimed.lease.key, token: claimed.lease.token, claimedAt: claimed.claimedAt };
  if ("through" in verdict)
    return { ...base, count: verdict.through + 1, outcome: { through: throughOf(claimed, verdict.through) } };
  return {
    ...base,
    count: claimed.events.length,
    outcome: {
      error: verdict.error,
      headPosition: headPosition(claimed),
      ...(verdict.postponeMs !== undefined ? { postponeMs: verdict.postponeMs } : {}),
    },
  };
}

export const isPostponed = (verdict: Verdict) => "postponeMs" in verdict && verdict.postponeMs !== undefined;

/**
 * A "come back later" answer (`{ retryAfterMs, reason? }`) as a verdict: nothing acked, the
 * key waits that long (capped at MAX_RETRY_AFTER_MS) and no attempt is counted — within the
 * postponements' bounds (settleKeys.ts); `error` says why, in the keys view and, past the
 * bounds, as the failed attempt's reason. Undefined for any other answer. An answer we cannot
 * read (not a number, negative, or with ackedThrough too) fails the attempt.
 */
export function postponement(result: unknown): { error: string; postponeMs: number } | undefined {
  if (result === null || typeof result !== "object" || !Object.hasOwn(result, "retryAfterMs")) return undefined;
  const { retryAfterMs, reason } = result as { retryAfterMs: unknown; reason?: unknown };
  if (typeof retryAfterMs !== "number" || !Number.isFinite(retryAfterMs) || retryAfterMs < 0) {
    throw new Error("retryAfterMs must be a number of milliseconds, 0 or more");
  }
  if (Object.hasOwn(result, "ackedThrough")) throw new Error("give ackedThrough or retryAfterMs, not both");
  const postponeMs = Math.min(Math.ceil(retryAfterMs), MAX_RETRY_AFTER_MS);
  const why = typeof reason === "string" && reason !== "" ? reason.slice(0, 200) : `retryAfterMs ${postponeMs}`;
  return { error: `come back later: ${why}`, postponeMs };
}

/**
 * A transactional batch acked in its own transaction, as the activity record takes it: written
 * after its COMMIT (with the drain's other records, or on its own by consumeOne), never in it.
 */
export function committedRecords(claimed: Claimed, verdict: Verdict): BatchRecordRow[] {
  const at = committed(verdict)?.at;
  if (at === undefined || !("through" in verdict)) return [];
  const { subscriptionId, key } = claimed.lease;
  return [
    {
      subscriptionId,
      key,
      startedAt: claimed.claimedAt,
      finishedAt: at,
      events: verdict.through + 1,
      outcome: "acked",
    },
  ];
}

export function finish({ claimed, verdict }: Handled, outcome: ConsumeResult["outcome"]): ConsumeResult {
  return {
    key: claimed.lease.key,
    events: claimed.events.length,
    outcome,
    ...("error" in verdict ? { error: verdict.error } : {}),
  };
}

/** `index` is a place in the batch (ackedThroughIndex checked it), so both lookups find it. */
export function throughOf(claimed: Claimed, index: number): AckThrough {
  const event = present(claimed.events[index], "the acked-through event");
  return { tx: present(claimed.txs[index], "the acked-through event's tx"), position: event.position, seq: event.seq };
}

/** A batch is claimed only when its key has an event, so it has a first one. */
export const headPosition = (claimed: Claimed): number =>
  present(claimed.events[0], "the batch's first event").position;

/**
 * Index of the last acked event: the whole batch when there is no `ackedThrough`, else through
 * it. One rule for code handlers and push receivers: an integer, or an integer string, that is
 * a position of this batch; anything else (null, a float, other text, an object, a position
 * not in the batch) fails the attempt — never "ack all" on an answer we could not understand.
 * A batch may hold one position twice (events still queued when a rewind queued them again):
 * the first one is meant, so at most a shorter prefix is acked and the rest comes again.
 */
export function ackedThroughIndex(events: DeliveredEvent[], result: unknown): number {
  const through = (result as { ackedThrough?: unknown } | undefined)?.ackedThrough;
  if (through === undefined) return events.length - 1;
  const position = typeof through === "string" && /^\d{1,16}$/.test(through) ? Number(through) : through;
  const index = Number.isSafeInteger(position) ? events.findIndex((e) => e.position === position) : -1;
  if (index === -1) {
    // the value itself only when it is a number: a receiver's text stays out of lastError
    const shown = typeof position === "number" ? String(position) : through === null ? "null" : `(a ${typeof through})`;
    throw new Error(`ackedThrough ${shown} is not a position of this batch`);
  }
  return index;
}
