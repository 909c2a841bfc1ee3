import type { SQL } from "drizzle-orm";
import { drizzleTransaction } from "./db/drizzleTransaction.js";
import type { Executor } from "./db/executor.js";
import { CorqError, present, toError } from "./errors.js";
import type { Subscription } from "./config.js";
import { claimBatch, settleAndClaim, type ClaimBy, type ClaimRow } from "./sql/consume/claimBatch.js";
import type { Settlement, SettledRow } from "./sql/consume/settleKeys.js";
import { ackBatch, ackInTransaction, type AckThrough, type Lease } from "./sql/consume/ackBatch.js";
import { failBatch } from "./sql/consume/failBatch.js";
import { releaseLease } from "./sql/consume/releaseLease.js";
import { recordBatches, type BatchRecordRow } from "./sql/activity/activity.js";
import type { BatchRecorder } from "./batchRecorder.js";
import { toStoredEvent, type EventRow } from "./sql/common/eventColumns.js";
import { pushHandler } from "./pushDelivery.js";
import type { ConsumeResult, DeliveredEvent, Handler, HandlerContext } from "./types.js";
import type { Corq } from "./types.js";

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

interface Claimed {
  lease: Lease;
  /** The database clock at the claim: the batch's start in the activity record. */
  claimedAt: Date;
  attempt: number;
  leaseMs: number;
  incarnation: string;
  handle: Handler;
  events: DeliveredEvent[];
  txs: string[];
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
type Verdict =
  | { through: number; committed?: { outcome: "acked" | "expired"; pending: number; at?: Date } }
  | { error: string; released?: boolean };

/**
 * The consumer loop's invariant: once a key is claimed we MUST record an outcome for it —
 * ack or fail, in the database — unless its lease is gone. A thrown handler is a failed
 * attempt, never an escaped error. Nothing is held open while the handler runs.
 *
 *   consumeOne   claim one key (1 statement) → handler → ack or fail (1 statement)
 *   drainKeys    claim up to keysPerClaim keys (1 statement) → their handlers run at once →
 *                as they finish, settle the finished ones (acks and failures, each fenced by
 *                its own lease) AND claim as many new keys in ONE statement → … → and the
 *                acked batches recorded for the dashboard (batchRecorder.ts: 1 statement per
 *                500 or per second, and at the drain's end unless the Corq holds them longer)
 * A graceful stop (DrainLimits.stop / abort) changes only what comes next: no new claim after
 * `stop`; after `abort`, a handler that gives up has its lease released (1 statement) instead
 * of failed — the one outcome recorded while the handler no longer runs.
 */
export async function consumeOne(consumer: Consumer): Promise<ConsumeResult | null> {
  const { executor, target } = consumer;
  let claim = await claimOnce(consumer, claimBatch(target.name, claimBy(target)));
  const expired = [...claim.expired];
  // Claimed, but every row the statement's snapshot saw had been acked by another consumer
  // while it waited (see claimBatch): the key was given back; claim afresh, a few times at most.
  for (let again = 0; claim.empty > 0 && again < 3; again++) {
    claim = await claimOnce(consumer, claimBatch(target.name, claimBy(target)));
    expired.push(...claim.expired);
  }
  // rare: the claim took over an expired lease (1 more statement, for the dashboard's timeline)
  if (expired.length > 0) await executor.run(recordBatches(expired)).catch(() => undefined);
  const [claimed] = claim.claimed;
  if (!claimed) return claim.dead[0] ?? null;
  const verdict = await handle(consumer, claimed);
  return finish(claimed, verdict, await record(executor, claimed, verdict));
}

export interface DrainLimits {
  /** epoch ms: no claim after it (batches already claimed are still handled and settled) */
  deadline: number;
  maxBatches: number;
  /** keys claimed per statement, and so handlers running at once, at most */
  keysPerClaim: number;
  /**
   * Of those, replaying keys at once, at most (the replay's share of this consumer; default
   * replayKeysFor(keysPerClaim)): the rest stays free for live keys while a replay runs.
   */
  replayKeys?: number;
  /** Claim nothing more once aborted; the batches in hand finish as usual. */
  stop?: AbortSignal;
  /** Aborts the running handlers' signal; a handler that then throws has its lease released. */
  abort?: AbortSignal;
}

/**
 * Consumes batches (up to keysPerClaim keys at a time, each its own lease and batch) until
 * nothing is ready, `deadline` (epoch ms) passes or `maxBatches` ran. Finished batches are
 * settled in the statement that claims the next keys; the acked ones go to `recorder`.
 */
export async function drainKeys(
  consumer: Consumer,
  limits: DrainLimits & { recorder: BatchRecorder },
): Promise<ConsumeResult[]> {
  const { recorder } = limits;
  try {
    return await drainLoop(consumer, limits);
  } finally {
    await recorder.drainEnded();
  }
}

/**
 * The drain's loop. One statement at a time; while it is out, handlers that finish queue
 * their verdicts, and the next statement settles all of them. So a finished batch waits for
 * at most the statement in flight and its own — never for a slow key still running beside
 * it (a slow key holds only its own slot: the others are claimed anew as they settle).
 */
async function drainLoop(
  consumer: Consumer,
  limits: DrainLimits & { recorder: BatchRecorder },
): Promise<ConsumeResult[]> {
  const { executor, target } = consumer;
  const { recorder } = limits;
  const results: ConsumeResult[] = [];
  const running = new Map<string, Promise<void>>();
  // the running keys that are replaying: a claim takes at most replayKeys minus these
  const replaying = new Set<string>();
  const replayKeys = limits.replayKeys ?? replayKeysFor(limits.keysPerClaim);
  const finished: { claimed: Claimed; verdict: Verdict }[] = [];
  let wake: (() => void) | undefined;
  // whether to claim without settling anything: not after a claim that found fewer keys than
  // it asked for, until a settlement says its key has more (or failed and may be ready again)
  let lookAgain = true;
  let emptyClaims = 0;
  const room = () =>
    Date.now() >= limits.deadline || limits.stop?.aborted === true
      ? 0
      : Math.max(
          0,
          Math.min(
            limits.keysPerClaim - running.size,
            limits.maxBatches - results.length - running.size - finished.length,
          ),
        );
  const start = (claimed: Claimed) => {
    const key = claimed.lease.key;
    if (claimed.replaying) replaying.add(key);
    running.set(
      key,
      handle(consumer, claimed, { stopping: limits.abort }).then((verdict) => {
        running.delete(key);
        replaying.delete(key);
        finished.push({ claimed, verdict });
        wake?.();
      }),
    );
  };
  try {
    for (;;) {
      const want = room();
      if (finished.length === 0 && (want === 0 || !lookAgain)) {
        if (running.size === 0) return results;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      // one turn of the event loop first: handlers that are done but for their last promise
      // callbacks (a no-op handler, a cached answer) join this statement instead of the next
      if (running.size > 0) await nextTurn();
      const done = finished.splice(0);
      // batches given back by a graceful abort: their leases released now (1 statement each)
      for (const { claimed, verdict } of done.filter((d) => isReleased(d.verdict))) {
        const released = await executor.run(releaseLease(claimed.lease));
        results.push(finish(claimed, verdict, released.length === 1 ? "released" : "expired"));
      }
      // batches a transactional handler acked in its own transaction (or lost): settled already
      for (const { claimed, verdict } of done) {
        const outcome = committed(verdict);
        if (!outcome) continue;
        results.push(finish(claimed, verdict, outcome.outcome));
        if (outcome.pending > 0) lookAgain = true;
      }
      await recorder.add(done.flatMap(({ claimed, verdict }) => committedRecords(claimed, verdict)));
      const settling = done.filter((d) => !isReleased(d.verdict) && !committed(d.verdict));
      if (settling.length === 0 && (want === 0 || !lookAgain)) continue;
      const by = { ...claimBy(target, want), replayLimit: Math.max(0, replayKeys - replaying.size) };
      const [firstSettling] = settling;
      const statement =
        firstSettling === undefined
          ? claimBatch(target.name, by)
          : settleAndClaim(target.name, by, {
              subscriptionId: firstSettling.claimed.lease.subscriptionId,
              settlements: settling.map(({ claimed, verdict }) => settlement(claimed, verdict)),
            });
      const claim = await claimOnce(consumer, statement);
      // what became of the settled batches
      const settled = new Map((claim.settled ?? []).map((row) => [row.key, row]));
      const acked: BatchRecordRow[] = [];
      lookAgain = claim.claimed.length + claim.dead.length + claim.empty >= want && want > 0;
      for (const { claimed, verdict } of settling) {
        const row = settled.get(claimed.lease.key);
        results.push(finish(claimed, verdict, row?.outcome ?? "expired"));
        if (row && (row.outcome === "retry" || (row.pending ?? 0) > 0)) lookAgain = true;
        if (row?.outcome === "acked") {
          const { subscriptionId: id, key } = claimed.lease;
          const events = "through" in verdict ? verdict.through + 1 : 0;
          acked.push({
            subscriptionId: id,
            key,
            startedAt: claimed.claimedAt,
            finishedAt: new Date(row.at),
            events,
            outcome: "acked",
          });
        }
      }
      results.push(...claim.dead);
      for (const claimed of claim.claimed) start(claimed);
      // a claim that came out empty gave its key back: claim afresh, a few times in a row at most
      emptyClaims = claim.empty > 0 ? emptyClaims + 1 : 0;
      if (claim.empty > 0 && emptyClaims <= 3) lookAgain = true;
      await recorder.add([...acked, ...claim.expired]);
    }
  } finally {
    // a statement failed: the batches still running finish (their leases will expire unsettled)
    // before the error goes up, so nothing runs on after the caller closes its connection
    await Promise.allSettled(running.values());
  }
}

/**
 * A consumer's share for replaying keys when not told: a quarter of its keys per claim, at
 * least one (one key per claim: the replay still goes after live keys, claim by claim).
 */
export const replayKeysFor = (keysPerClaim: number) => Math.max(1, Math.floor(keysPerClaim / 4));

const nextTurn = () =>
  new Promise<void>((resolve) => (typeof setImmediate === "function" ? setImmediate(resolve) : setTimeout(resolve, 0)));

const claimBy = (target: ConsumeTarget, limit = 1): ClaimBy => ({
  kind: target.code ? undefined : "push",
  limit,
  holder: target.holder,
});

/** A verdict as the settle statement takes it. */
function settlement(claimed: Claimed, verdict: Verdict): Settlement {
  const base = { key: claimed.lease.key, token: claimed.lease.token, claimedAt: claimed.claimedAt };
  if ("through" in verdict)
    return { ...base, count: verdict.through + 1, outcome: { through: throughOf(claimed, verdict.through) } };
  return {
    ...base,
    count: claimed.events.length,
    outcome: { error: verdict.error, headPosition: headPosition(claimed) },
  };
}

interface ClaimOutcome {
  /** the keys claimed, each with its batch */
  claimed: Claimed[];
  /** keys whose last lease expired on their last attempt: dead-lettered by the claim */
  dead: ConsumeResult[];
  /** keys claimed with an empty batch (everything acked meanwhile): given back */
  empty: number;
  /** with settleAndClaim: the settlements whose lease held */
  settled?: SettledRow[];
  expired: BatchRecordRow[];
}

/** Runs a claim statement and reads its rows: the batches per key, and what it settled. */
async function claimOnce({ executor, target }: Consumer, statement: SQL): Promise<ClaimOutcome> {
  const rows = await executor.run<ClaimRow>(statement);
  const [first] = rows;
  if (first === undefined) {
    // defined in code, not registered yet: nothing to do
    if (target.code) return { claimed: [], dead: [], empty: 0, expired: [] };
    throw new CorqError("unknown_subscription", `no subscription named "${target.name}"`);
  }
  const outcome: ClaimOutcome = {
    claimed: [],
    dead: [],
    empty: 0,
    settled: rows.find((row) => row.settled !== null)?.settled ?? undefined,
    expired: [],
  };
  const at = new Date(first.now);
  for (const { head, batch } of runsByKey(rows)) {
    if (head.key === null) continue; // nothing claimed
    // the claim took over a lease that had expired: that batch goes in the record as "expired"
    if (head.expired_until !== null) {
      const span = {
        startedAt: new Date(present(head.expired_from, "expired_from")),
        finishedAt: new Date(head.expired_until),
      };
      outcome.expired.push({
        subscriptionId: present(head.subscription_id, "subscription_id"),
        key: head.key,
        ...span,
        events: 0,
        outcome: "expired",
      });
    }
    if (head.dies) {
      outcome.dead.push({ key: head.key, events: 0, outcome: "dead", error: "lease expired on the last attempt" });
      continue;
    }
    const lease: Lease = {
      subscriptionId: present(head.subscription_id, "subscription_id"),
      key: head.key,
      token: present(head.lease_token, "lease_token"),
    };
    if (head.position === null) {
      await executor.run(releaseLease(lease));
      outcome.empty++;
      continue;
    }
    outcome.claimed.push({
      lease,
      claimedAt: at,
      attempt: present(head.attempts, "attempts") + 1,
      leaseMs: head.lease_ms,
      incarnation: head.incarnation,
      handle: target.code ? target.code.handle : pushHandler(head.deliver),
      events: batch.map((row) => ({
        ...toStoredEvent(row as EventRow),
        seq: Number(row.seq),
        replay: row.replay === true,
      })),
      txs: batch.map((row) => present(row.tx, "tx")),
      replaying: head.replaying === true,
    });
  }
  return outcome;
}

/** The claim's rows come grouped by key, each key's events in seq order: one run per key, never empty. */
function runsByKey(rows: ClaimRow[]): { head: ClaimRow; batch: ClaimRow[] }[] {
  const runs: { head: ClaimRow; batch: ClaimRow[] }[] = [];
  for (const row of rows) {
    const current = runs.at(-1);
    if (current !== undefined && current.head.key === row.key) current.batch.push(row);
    else runs.push({ head: row, batch: [row] });
  }
  return runs;
}

const isReleased = (verdict: Verdict) => "error" in verdict && verdict.released === true;
const committed = (verdict: Verdict) => ("committed" in verdict ? verdict.committed : undefined);

/** The lease was gone when the transactional handler's ack ran: its transaction is rolled back. */
class LeaseLost extends Error {
  constructor(readonly through: number) {
    super("the lease was lost before the batch was acked");
  }
}

async function handle(
  { executor, target, corq }: Consumer,
  claimed: Claimed,
  { stopping }: { stopping?: AbortSignal } = {},
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
  };
  try {
    if (target.code?.transactional) return await handleInTransaction(executor, claimed, context);
    const result = await claimed.handle(claimed.events, context);
    return { through: ackedThroughIndex(claimed.events, result) };
  } catch (thrown) {
    if (thrown instanceof LeaseLost) return { through: thrown.through, committed: { outcome: "expired", pending: 0 } };
    // a handler that gave up because the drain was aborted has not failed: its batch goes back
    return { error: describe(thrown), released: stopping?.aborted === true };
  } finally {
    clearTimeout(timer);
    stopping?.removeEventListener("abort", onStop);
  }
}

/**
 * A transactional handler's run: BEGIN on a connection of its own (on Workers and with
 * driver "neon-http", a session opened for this batch only) → the handler, writing through
 * `ctx.tx` / `ctx.run` → the ack, fenced by the lease, as the transaction's last statement →
 * COMMIT. So its writes and the ack commit together or not at all:
 *   - the handler throws (or its answer is not understood): ROLLBACK, and the failure is
 *     recorded outside the transaction, as for any handler (attempts, backoff, dead letter);
 *   - the lease was lost (expired, or the key taken over by another consumer): the fenced ack
 *     changes nothing, so ROLLBACK: no effect of this run remains ("expired", as today);
 *   - the process dies anywhere before COMMIT: Postgres rolls back; the batch comes again.
 * The ack locks the key row only at the end (a lock held across the handler would stall the
 * advance of that key); from then to COMMIT no one else can claim the key, so a lease that
 * holds at the ack holds at the commit.
 */
async function handleInTransaction(
  executor: Executor,
  claimed: Claimed,
  context: Omit<HandlerContext, "tx">,
): Promise<Verdict> {
  return executor.transaction(
    async (tx) => {
      const result = await claimed.handle(claimed.events, {
        ...context,
        run: tx.run,
        tx: drizzleTransaction(tx),
      });
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

/** Records a verdict on its own: 1 statement (ack, or fail with backoff / dead). */
async function record(executor: Executor, claimed: Claimed, verdict: Verdict): Promise<ConsumeResult["outcome"]> {
  const settled = committed(verdict);
  if (settled) {
    // telemetry, after the transaction's COMMIT (see ackInTransaction): a failed write is dropped
    const records = committedRecords(claimed, verdict);
    if (records.length > 0) await executor.run(recordBatches(records)).catch(() => undefined);
    return settled.outcome;
  }
  if ("through" in verdict) {
    const [row] = await executor.run<{ acked: number }>(
      ackBatch(claimed.lease, {
        through: throughOf(claimed, verdict.through),
        count: verdict.through + 1,
        claimedAt: claimed.claimedAt,
      }),
    );
    return present(row, "the ack's count row").acked === 1 ? "acked" : "expired";
  }
  const failed = failBatch(claimed.lease, {
    error: verdict.error,
    headPosition: headPosition(claimed),
    count: claimed.events.length,
    claimedAt: claimed.claimedAt,
  });
  const [row] = await executor.run<{ dead: boolean }>(failed);
  return row === undefined ? "expired" : row.dead ? "dead" : "retry";
}

/**
 * A transactional batch acked in its own transaction, as the activity record takes it: written
 * after its COMMIT (with the drain's other records, or on its own by consumeOne), never in it.
 */
function committedRecords(claimed: Claimed, verdict: Verdict): BatchRecordRow[] {
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

function finish(claimed: Claimed, verdict: Verdict, outcome: ConsumeResult["outcome"]): ConsumeResult {
  return {
    key: claimed.lease.key,
    events: claimed.events.length,
    outcome,
    ...("error" in verdict ? { error: verdict.error } : {}),
  };
}

/** `index` is a place in the batch (ackedThroughIndex checked it), so both lookups find it. */
function throughOf(claimed: Claimed, index: number): AckThrough {
  const event = present(claimed.events[index], "the acked-through event");
  return { tx: present(claimed.txs[index], "the acked-through event's tx"), position: event.position, seq: event.seq };
}

/** A batch is claimed only when its key has an event, so it has a first one. */
const headPosition = (claimed: Claimed): number => present(claimed.events[0], "the batch's first event").position;

/**
 * Index of the last acked event: the whole batch when there is no `ackedThrough`, else through
 * it. One rule for code handlers and push receivers: an integer, or an integer string, that is
 * a position of this batch; anything else (null, a float, other text, an object, a position
 * not in the batch) fails the attempt — never "ack all" on an answer we could not understand.
 * A batch may hold one position twice (events still queued when a rewind queued them again):
 * the first one is meant, so at most a shorter prefix is acked and the rest comes again.
 */
function ackedThroughIndex(events: DeliveredEvent[], result: unknown): number {
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
