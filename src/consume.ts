import type { SQL } from "drizzle-orm";
import type { Executor } from "./db/executor.js";
import { CorqError, toError } from "./errors.js";
import type { Subscription } from "./config.js";
import { ackAndClaim, claimBatch, type ClaimRow } from "./sql/claimBatch.js";
import { ackBatch, type Lease } from "./sql/ackBatch.js";
import { failBatch } from "./sql/failBatch.js";
import { releaseLease } from "./sql/releaseLease.js";
import { recordBatches, type BatchRecordRow } from "./sql/activity.js";
import { toStoredEvent, type EventRow } from "./sql/eventColumns.js";
import { pushHandler } from "./pushDelivery.js";
import type { ConsumeResult, Handler, StoredEvent } from "./types.js";
import type { Corq } from "./corq.js";

/** A code subscription (its handler runs here) or a push subscription (batches are POSTed). */
export interface ConsumeTarget {
  name: string;
  code?: Subscription;
}

interface Claimed {
  lease: Lease;
  /** The database clock at the claim: the batch's start in the activity record. */
  claimedAt: Date;
  attempt: number;
  leaseMs: number;
  handle: Handler;
  events: StoredEvent[];
  txs: string[];
}

/**
 * What a handler run decided: ack through an index of the batch, fail with an error, or give
 * the batch back (the drain was aborted and the handler threw: a graceful stop, not a failure).
 */
type Verdict = { through: number } | { error: string; released?: boolean };

/** A drain's limits; `stop` and `abort` are the graceful stop (Corq.drain). */
export interface DrainLimits {
  deadline: number;
  maxBatches: number;
  /** Claim nothing more once aborted; the batch in hand finishes as usual. */
  stop?: AbortSignal;
  /** Aborts the running handler's signal; if it then throws, its lease is released. */
  abort?: AbortSignal;
}

/**
 * The consumer loop's invariant: once a key is claimed we MUST record an outcome for it —
 * ack or fail, in the database — unless its lease is gone. A thrown handler is a failed
 * attempt, never an escaped error. Nothing is held open while the handler runs.
 *
 *   consumeOne   claim (1 statement) → handler → ack or fail (1 statement)
 *   drainKeys    claim → handler → ack+claim the next (1 statement) → handler → … → ack,
 *                and the acked batches recorded for the dashboard (1 statement per 500 or
 *                per second)
 * A graceful stop (DrainLimits.stop / abort) changes only what comes next: no new claim after
 * `stop`; after `abort`, a handler that gives up has its lease released (1 statement) instead
 * of failed — the one outcome recorded while the handler no longer runs.
 */
export async function consumeOne(executor: Executor, target: ConsumeTarget, corq: Corq): Promise<ConsumeResult | null> {
  const { claimed, result, expired } = await runClaim(executor, target, claimBatch(target.name, kindFilter(target)));
  // rare: the claim took over an expired lease (1 more statement, for the dashboard's timeline)
  if (expired.length > 0) await executor.run(recordBatches(expired)).catch(() => undefined);
  if (!claimed) return result;
  const verdict = await handle(executor, target, claimed, corq);
  return finish(claimed, verdict, await record(executor, claimed, verdict));
}

/**
 * Consumes batch after batch (each its own key claim) until nothing is ready, `deadline`
 * (epoch ms) passes or `maxBatches` ran. A successful batch is acked in the same statement
 * that claims the next one.
 */
export async function drainKeys(
  executor: Executor,
  target: ConsumeTarget,
  corq: Corq,
  limits: DrainLimits,
): Promise<ConsumeResult[]> {
  // batches acked by ack+claim statements and expired leases taken over, recorded for the
  // dashboard every 500 or every second (telemetry: a failed write is dropped)
  const buffered: BatchRecordRow[] = [];
  let since = 0;
  const flush = async () => {
    if (buffered.length > 0) await executor.run(recordBatches(buffered.splice(0))).catch(() => undefined);
  };
  try {
    return await drainLoop(executor, target, corq, limits, async (records) => {
      if (records.length === 0) return;
      if (buffered.length === 0) since = Date.now();
      buffered.push(...records);
      if (buffered.length >= 500 || Date.now() - since >= 1000) await flush();
    });
  } finally {
    await flush();
  }
}

async function drainLoop(
  executor: Executor,
  target: ConsumeTarget,
  corq: Corq,
  limits: DrainLimits,
  onRecords: (records: BatchRecordRow[]) => Promise<void>,
): Promise<ConsumeResult[]> {
  const results: ConsumeResult[] = [];
  const claimNext = async () => {
    const claim = await runClaim(executor, target, claimBatch(target.name, kindFilter(target)));
    await onRecords(claim.expired);
    return claim;
  };
  const stopped = () => limits.stop?.aborted === true;
  const more = () => results.length < limits.maxBatches && Date.now() < limits.deadline && !stopped();
  if (stopped()) return results;
  let next = await claimNext();
  for (;;) {
    if (!next.claimed) {
      // nothing claimed: done — unless an ack+claim just acked a key that has more (it could
      // not claim that key itself), or a claim dead-lettered a key whose last lease expired
      if (next.ackedPending && more()) {
        next = await claimNext();
        continue;
      }
      if (!next.result) return results;
      results.push(next.result); // a key whose last lease expired was dead-lettered by the claim
      if (!more()) return results;
      next = await claimNext();
      continue;
    }
    const claimed: Claimed = next.claimed;
    const verdict = await handle(executor, target, claimed, corq, limits.abort);
    if ("error" in verdict || results.length + 1 >= limits.maxBatches || Date.now() >= limits.deadline || stopped()) {
      results.push(finish(claimed, verdict, await record(executor, claimed, verdict)));
      if (!more()) return results;
      next = await claimNext();
      continue;
    }
    const ack = { lease: claimed.lease, through: throughOf(claimed, verdict.through), count: verdict.through + 1 };
    next = await runClaim(executor, target, ackAndClaim(target.name, kindFilter(target), ack));
    results.push(finish(claimed, verdict, next.acked ? "acked" : "expired"));
    const { subscriptionId, key } = claimed.lease;
    const done: BatchRecordRow[] =
      next.acked && next.at
        ? [
            {
              subscriptionId,
              key,
              startedAt: claimed.claimedAt,
              finishedAt: next.at,
              events: ack.count,
              outcome: "acked",
            },
          ]
        : [];
    await onRecords([...done, ...next.expired]);
  }
}

const kindFilter = (target: ConsumeTarget) => (target.code ? undefined : ("push" as const));

/** Runs a claim statement and reads its rows into a batch (or a result without one). */
async function runClaim(executor: Executor, target: ConsumeTarget, statement: SQL): Promise<ClaimOutcome> {
  const first = await claimOnce(executor, target, statement);
  // Claimed, but every row the statement's snapshot saw had been acked by another consumer
  // while it waited (see claimBatch): the key was given back; claim afresh, a few times at most.
  let outcome = first;
  for (let again = 0; outcome.retry && again < 3; again++) {
    const next = await claimOnce(executor, target, claimBatch(target.name, kindFilter(target)));
    outcome = { ...next, expired: [...outcome.expired, ...next.expired] };
  }
  // what the first statement said of the ack it carried stays
  return { ...outcome, acked: first.acked, ackedPending: first.ackedPending, at: first.at };
}

interface ClaimOutcome {
  claimed?: Claimed;
  result: ConsumeResult | null;
  /** ack+claim: whether the previous batch was acked, and how many events its key still has */
  acked?: boolean;
  ackedPending?: number;
  at?: Date;
  expired: BatchRecordRow[];
  /** the claim came out empty and gave its key back */
  retry?: boolean;
}

async function claimOnce(executor: Executor, target: ConsumeTarget, statement: SQL): Promise<ClaimOutcome> {
  const rows = await executor.run<ClaimRow>(statement);
  if (rows.length === 0) {
    if (target.code) return { result: null, expired: [] }; // defined in code, not registered yet: nothing to do
    throw new CorqError("unknown_subscription", `no subscription named "${target.name}"`);
  }
  const head = rows[0];
  const acked = head.acked === null ? undefined : head.acked === 1;
  const ackedPending = head.acked_pending ?? undefined;
  const at = new Date(head.now);
  if (head.key === null) return { result: null, acked, ackedPending, at, expired: [] };
  // the claim took over a lease that had expired: that batch goes in the record as "expired"
  const expired: BatchRecordRow[] = [];
  if (head.expired_until !== null) {
    const span = { startedAt: new Date(head.expired_from!), finishedAt: new Date(head.expired_until) };
    expired.push({ subscriptionId: head.subscription_id!, key: head.key, ...span, events: 0, outcome: "expired" });
  }
  if (head.dies) {
    const result: ConsumeResult = {
      key: head.key,
      events: 0,
      outcome: "dead",
      error: "lease expired on the last attempt",
    };
    return { result, acked, ackedPending, at, expired };
  }
  const lease: Lease = { subscriptionId: head.subscription_id!, key: head.key, token: head.lease_token! };
  if (head.position === null) {
    await executor.run(releaseLease(lease));
    return { result: null, acked, ackedPending, at, expired, retry: true };
  }
  return {
    claimed: {
      lease,
      claimedAt: at,
      attempt: head.attempts! + 1,
      leaseMs: head.lease_ms,
      handle: target.code ? target.code.handle : pushHandler(head.deliver),
      events: rows.map((row) => toStoredEvent(row as EventRow)),
      txs: rows.map((row) => row.tx!),
    },
    result: null,
    acked,
    ackedPending,
    at,
    expired,
  };
}

async function handle(
  executor: Executor,
  target: ConsumeTarget,
  claimed: Claimed,
  corq: Corq,
  stopping?: AbortSignal,
): Promise<Verdict> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error("lease expired")), claimed.leaseMs);
  const onStop = () => abort.abort(new Error("the consumer is stopping"));
  if (stopping?.aborted) onStop();
  else stopping?.addEventListener("abort", onStop, { once: true });
  try {
    const result = await claimed.handle(claimed.events, {
      subscription: target.name,
      key: claimed.lease.key,
      attempt: claimed.attempt,
      signal: abort.signal,
      corq,
      run: executor.run,
    });
    return { through: ackedThroughIndex(claimed.events, result) };
  } catch (thrown) {
    // a handler that gave up because the drain was aborted has not failed: its batch goes back
    return { error: describe(thrown), released: stopping?.aborted === true };
  } finally {
    clearTimeout(timer);
    stopping?.removeEventListener("abort", onStop);
  }
}

/** Records a verdict on its own: 1 statement (ack, or fail with backoff / dead). */
async function record(executor: Executor, claimed: Claimed, verdict: Verdict): Promise<ConsumeResult["outcome"]> {
  if ("through" in verdict) {
    const [row] = await executor.run<{ acked: number }>(
      ackBatch(claimed.lease, throughOf(claimed, verdict.through), verdict.through + 1, claimed.claimedAt),
    );
    return row.acked === 1 ? "acked" : "expired";
  }
  if (verdict.released) {
    const released = await executor.run(releaseLease(claimed.lease));
    return released.length === 1 ? "released" : "expired";
  }
  const failed = failBatch(
    claimed.lease,
    verdict.error,
    claimed.events[0].position,
    claimed.events.length,
    claimed.claimedAt,
  );
  const [row] = await executor.run<{ dead: boolean }>(failed);
  return row === undefined ? "expired" : row.dead ? "dead" : "retry";
}

function finish(claimed: Claimed, verdict: Verdict, outcome: ConsumeResult["outcome"]): ConsumeResult {
  return {
    key: claimed.lease.key,
    events: claimed.events.length,
    outcome,
    ...("error" in verdict ? { error: verdict.error } : {}),
  };
}

const throughOf = (claimed: Claimed, index: number) => ({
  tx: claimed.txs[index],
  position: claimed.events[index].position,
});

/**
 * Index of the last acked event: the whole batch when there is no `ackedThrough`, else through
 * it. One rule for code handlers and push receivers: an integer, or an integer string, that is
 * a position of this batch; anything else (null, a float, other text, an object, a position
 * not in the batch) fails the attempt — never "ack all" on an answer we could not understand.
 */
function ackedThroughIndex(events: StoredEvent[], result: unknown): number {
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

function describe(thrown: unknown): string {
  const error = toError(thrown);
  return `${error.name}: ${error.message}`.slice(0, 4000);
}
