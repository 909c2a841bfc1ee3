import { recordBatches, type BatchRecordRow } from "./sql/activity/activity.js";
import { claimBatch, settleAndClaim } from "./sql/consume/claimBatch.js";
import { releaseLease } from "./sql/consume/releaseLease.js";
import type { BatchRecorder } from "./batchRecorder.js";
import type { ConsumeResult } from "./types.js";
import { claimBy, claimOnce, type ClaimOutcome } from "./consume/claimOnce.js";
import { mayResend } from "./db/retries.js";
import {
  committed,
  committedRecords,
  finish,
  isReleased,
  settlement,
  type Claimed,
  type Consumer,
  type Handled,
} from "./consume/claimed.js";
import { replayKeysFor, type ClaimParts, type DrainLimits } from "./consume/drainLimits.js";
import { handle, record } from "./consume/handle.js";
import { retrySettle, SENT_ONCE, settleDeadline } from "./consume/retrySettle.js";

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
 * A settlement that fails on a connection error is sent again — alone, fenced, on a new
 * connection — while its lease holds (consume/retrySettle.ts): a dropped connection costs a retry,
 * not a lease; past the lease the error goes up and the lease expires unsettled.
 * A graceful stop (DrainLimits.stop / abort) changes only what comes next: no new claim after
 * `stop`; after `abort`, a handler that gives up has its lease released (1 statement) instead
 * of failed — the one outcome recorded while the handler no longer runs.
 */
export async function consumeOne(consumer: Consumer, parts: ClaimParts): Promise<ConsumeResult | null> {
  const { executor, target } = consumer;
  // the claim a drain's one-key claim is: only the parts the subscription needs (ClaimParts)
  const claimWith = async () => {
    const by = { ...claimBy(target), plain: parts.plain, fairOnly: parts.fairOnly };
    const claim = await claimOnce(consumer, claimBatch(target.name, by));
    const found = claim.parts;
    if (found === undefined) return { claim, wrongParts: false }; // no such subscription (yet)
    Object.assign(parts, found);
    return { claim, wrongParts: (by.plain && !found.plain) || (by.fairOnly && !found.fairOnly) };
  };
  let { claim, wrongParts } = await claimWith();
  const expired = [...claim.expired];
  // Claimed, but every row the statement's snapshot saw had been acked by another consumer
  // while it waited (see claimBatch): the key was given back; or the key picked was over its
  // rate limit and now waits; or the claim had the wrong parts for the subscription and took
  // nothing: claim afresh, a few times at most.
  for (let again = 0; (claim.empty > 0 || claim.limited > 0 || wrongParts) && again < 3; again++) {
    ({ claim, wrongParts } = await claimWith());
    expired.push(...claim.expired);
  }
  // rare: the claim took over an expired lease (1 more statement, for the dashboard's timeline)
  if (expired.length > 0) await executor.run(recordBatches(expired)).catch(() => undefined);
  const [claimed] = claim.claimed;
  if (!claimed) return claim.dead[0] ?? null;
  const verdict = await handle(consumer, claimed);
  return finish({ claimed, verdict }, await record(consumer, { claimed, verdict }));
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
  const finished: Handled[] = [];
  let wake: (() => void) | undefined;
  // whether to claim without settling anything: not after a claim that found fewer keys than
  // it asked for, until a settlement says its key has more (or failed and may be ready again)
  let lookAgain = true;
  let emptyClaims = 0;
  // the last settle+claim failed on a connection error and its settle was sent again alone
  let retriedAlone = false;
  // the subscription had no tenant, rate limit or cap at the last claim: the next claims leave
  // those parts out (ClaimBy.plain); without a hint from an earlier drain the first claim is in
  // full, and finds out
  let plain = limits.plainHint?.plain ?? false;
  // likewise with a tenant and no rate limit or cap: the fair pick stays (ClaimBy.fairOnly)
  let fairOnly = limits.plainHint?.fairOnly ?? false;
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
        const released = await retrySettle(() => executor.run(releaseLease(claimed.lease), SENT_ONCE), {
          until: settleDeadline([claimed]),
          what: `the release of key "${claimed.lease.key}"`,
        });
        results.push(finish({ claimed, verdict }, released.length === 1 ? "released" : "expired"));
      }
      // batches a transactional handler acked in its own transaction (or lost): settled already
      for (const { claimed, verdict } of done) {
        const outcome = committed(verdict);
        if (!outcome) continue;
        results.push(finish({ claimed, verdict }, outcome.outcome));
        if (outcome.pending > 0) lookAgain = true;
      }
      await recorder.add(done.flatMap(({ claimed, verdict }) => committedRecords(claimed, verdict)));
      const settling = done.filter((d) => !isReleased(d.verdict) && !committed(d.verdict));
      if (settling.length === 0 && (want === 0 || !lookAgain)) continue;
      const by = { ...claimBy(target, want), replayLimit: Math.max(0, replayKeys - replaying.size), plain, fairOnly };
      const [firstSettling] = settling;
      const settle = firstSettling && {
        subscriptionId: firstSettling.claimed.lease.subscriptionId,
        settlements: settling.map(({ claimed, verdict }) => settlement(claimed, verdict)),
      };
      // A settle+claim that fails on a connection error is sent again as the settle ALONE (limit
      // 0), on a new connection, while the batches' leases hold (retrySettle); the next turn
      // claims. The whole statement again could not double-lease a key either (a claim takes only
      // keys with no live lease, locked FOR UPDATE SKIP LOCKED) — but if the lost statement did
      // commit (its answer was what was lost), the keys it leased are ours and unseen: they wait
      // out their lease whatever we do, and a claim in the retry would lease more keys on a
      // connection that is failing. The settlements are fenced: a second send of one that
      // committed changes nothing (and reads as "expired").
      let claim: ClaimOutcome;
      if (settle === undefined) {
        try {
          claim = await claimOnce(consumer, claimBatch(target.name, by));
        } catch (error) {
          // a claim alone that failed on a connection error even when sent again (within the
          // executor's window): with batches still running the drain waits for them and settles
          // them (that statement is sent again within their leases) rather than leave their
          // leases to expire unsettled; with none running the error goes up
          if (running.size === 0 || !mayResend(error, true)) throw error;
          lookAgain = false;
          continue;
        }
      } else
        claim = await retrySettle(() => claimOnce(consumer, settleAndClaim(target.name, by, settle), SENT_ONCE), {
          until: settleDeadline(settling.map((d) => d.claimed)),
          what: `the settlement of ${settling.length} batch(es) of "${target.name}"`,
          again: () => {
            retriedAlone = true;
            return claimOnce(
              consumer,
              settleAndClaim(target.name, { ...by, limit: 0, replayLimit: 0 }, settle),
              SENT_ONCE,
            );
          },
        });
      // what became of the settled batches
      const settled = new Map((claim.settled ?? []).map((row) => [row.key, row]));
      const acked: BatchRecordRow[] = [];
      // a full pick: more may be ready (keys over their rate limit now wait, and are not picked again)
      lookAgain = claim.claimed.length + claim.dead.length + claim.empty + claim.limited >= want && want > 0;
      if (limits.tally) limits.tally.limited += claim.limited;
      // the settle was sent again alone: it claimed nothing, the next statement does
      if (retriedAlone) lookAgain = want > 0;
      retriedAlone = false;
      // a plain (fair-only) claim of a subscription that is not plain (fair only) by now took
      // nothing: the next claim has the parts its row said (none said: no such subscription yet)
      if (claim.parts !== undefined) {
        if (((by.plain && !claim.parts.plain) || (by.fairOnly && !claim.parts.fairOnly)) && want > 0) lookAgain = true;
        ({ plain, fairOnly } = claim.parts);
        if (limits.plainHint) Object.assign(limits.plainHint, claim.parts);
      }
      for (const { claimed, verdict } of settling) {
        const row = settled.get(claimed.lease.key);
        results.push(finish({ claimed, verdict }, row?.outcome ?? "expired"));
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
    // a statement failed (a settlement after its retries: retrySettle): the batches still running
    // finish (their leases will expire unsettled) before the error goes up, so nothing runs on
    // after the caller closes its connection;
    // those a transactional handler committed meanwhile are done, and recorded as such
    await Promise.allSettled(running.values());
    await recorder.add(finished.flatMap(({ claimed, verdict }) => committedRecords(claimed, verdict)));
  }
}

const nextTurn = () =>
  new Promise<void>((resolve) => (typeof setImmediate === "function" ? setImmediate(resolve) : setTimeout(resolve, 0)));
