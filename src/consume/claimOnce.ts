import type { SQL } from "drizzle-orm";
import type { RunOptions } from "../db/executor.js";
import { CorqError, present } from "../errors.js";
import type { ClaimBy, ClaimRow } from "../sql/consume/claimBatch.js";
import type { SettledRow } from "../sql/consume/settleKeys.js";
import type { Lease } from "../sql/consume/ackBatch.js";
import { releaseLease } from "../sql/consume/releaseLease.js";
import type { BatchRecordRow } from "../sql/activity/activity.js";
import { toStoredEvent, type EventRow } from "../sql/common/eventColumns.js";
import { pushHandler } from "../pushDelivery.js";
import type { ConsumeResult } from "../types.js";
import type { Claimed, Consumer, ConsumeTarget } from "./claimed.js";
import type { ClaimParts } from "./drainLimits.js";

export const claimBy = (target: ConsumeTarget, limit = 1): ClaimBy => ({
  kind: target.code ? undefined : "push",
  limit,
  holder: target.holder,
});

export interface ClaimOutcome {
  /** the keys claimed, each with its batch */
  claimed: Claimed[];
  /** keys whose last lease expired on their last attempt: dead-lettered by the claim */
  dead: ConsumeResult[];
  /** keys claimed with an empty batch (everything acked meanwhile): given back */
  empty: number;
  /** keys picked but over their rate limit: not leased, they wait for its room */
  limited: number;
  /**
   * The parts the subscription's claims need, as its row says: none of the tenant, rate limit and
   * caps (`plain`: ClaimBy.plain), or the tenant alone (`fairOnly`); undefined when there is no
   * such subscription (a code subscription not registered yet): nothing to learn.
   */
  parts?: ClaimParts;
  /** with settleAndClaim: the settlements whose lease held */
  settled?: SettledRow[];
  expired: BatchRecordRow[];
}

/**
 * Runs a claim statement and reads its rows: the batches per key, and what it settled.
 *
 * A claim is repeatable (src/db/retries.ts): sent again on a connection error, and on a deadlock
 * (40P01: seen on PostgreSQL 15 with a rewind's requeue chunk locking the same key rows), which
 * rolled all of it back. The settlements it carries are fenced by their leases; the keys it
 * claims are only keys with no live lease. A claim that committed with its answer lost leased
 * keys nobody sees: they wait out their lease (the one case a dropped connection costs a lease;
 * its window is the round trip of the answer). `runOptions`: retrySettle's (SENT_ONCE), whose
 * loop sends it again instead.
 */
export async function claimOnce(
  { executor, target }: Consumer,
  statement: SQL,
  runOptions: RunOptions = { repeatable: true },
): Promise<ClaimOutcome> {
  // the leases' clock starts before the statement is sent (each attempt's, when sent again)
  let sentAt = 0;
  const rows = await executor.run<ClaimRow>(statement, {
    ...runOptions,
    onSend: () => {
      sentAt = Date.now();
    },
  });
  const [first] = rows;
  if (first === undefined) {
    // defined in code, not registered yet: nothing to do
    if (target.code) return { claimed: [], dead: [], empty: 0, limited: 0, expired: [] };
    throw new CorqError("unknown_subscription", `no subscription named "${target.name}"`);
  }
  const outcome: ClaimOutcome = {
    claimed: [],
    dead: [],
    empty: 0,
    limited: first.limited,
    parts: { plain: first.plain === true, fairOnly: first.fair_only === true },
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
    if (batch.length === 0) {
      await executor.run(releaseLease(lease), { repeatable: true });
      outcome.empty++;
      continue;
    }
    outcome.claimed.push({
      lease,
      claimedAt: at,
      attempt: present(head.attempts, "attempts") + 1,
      leaseMs: head.lease_ms,
      leaseHeldUntil: sentAt + head.lease_ms,
      incarnation: head.incarnation,
      handle: target.code ? target.code.handle : pushHandler(head.deliver),
      events: batch.map(toClaimedEvent),
      txs: batch.map((row) => present(row.tx, "tx")),
      traceContexts: batch.map((row) => row.trace_context ?? null),
      replaying: head.replaying === true,
    });
  }
  return outcome;
}

const toClaimedEvent = (row: ClaimRow): Claimed["events"][number] =>
  Object.assign(toStoredEvent(row as EventRow), { seq: Number(row.seq), replay: row.replay === true });

/**
 * The claim's rows come in key order, each key's row first (seq null), then its events in seq
 * order (claimBatch's "Rows"): one run per key, its batch possibly empty.
 */
function runsByKey(rows: ClaimRow[]): { head: ClaimRow; batch: ClaimRow[] }[] {
  const runs: { head: ClaimRow; batch: ClaimRow[] }[] = [];
  for (const row of rows) {
    if (row.seq === null) runs.push({ head: row, batch: [] });
    else present(runs.at(-1), "the key row before its events").batch.push(row);
  }
  return runs;
}
