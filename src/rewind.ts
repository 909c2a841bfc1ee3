// Rewind: queue a subscription's events again from a position (or the beginning), the whole
// subscription or one key — see src/sql/operate/rewind.ts for what happens to each key. One
// transaction (an interactive one: on Workers it opens a WebSocket session for itself):
//
//   hold      the advancer's lock of the subscription (an advance in progress ends first);
//   target    the subscription row, locked, and the event the rewind starts at;
//   stage     (function keys only) the range read in rounds, keys computed here, staged;
//   requeue   one statement: the keys locked in key order, their events queued again.
//
// The advancer's lock keeps the watermark and the keys' seq counters still while the rewind
// numbers its events, so the requeued range ends exactly where later events begin: no event
// past the range is delivered between the requeued ones. Advances that came meanwhile found the
// lock taken and left a kick: the caller advances once after (kicksPending).
import type { SQL } from "drizzle-orm";
import type { Executor } from "./db/executor.js";
import { CorqError, present } from "./errors.js";
import { keyOf } from "./advance.js";
import type { KeyStrategy, Subscription } from "./config.js";
import { holdAdvancer } from "./sql/advance/advanceSubscription.js";
import type { EventRow } from "./sql/common/eventColumns.js";
import {
  createStage,
  matchedInSql,
  readRewindRange,
  requeue,
  rewindTarget,
  stageKeys,
  staged,
  type RequeueRow,
  type RewindRange,
  type RewindTargetRow,
} from "./sql/operate/rewind.js";

/** Events read per round when a key function computes the keys. */
const STAGE_ROUND = 5000;

export interface RewindRequest {
  subscription: string;
  to: number | "beginning";
  key?: string;
}

export async function rewindSubscription(
  executor: Executor,
  request: RewindRequest,
  options: { code?: Subscription },
): Promise<{ requeued: number; keys: number; subscriptionId: number }> {
  return executor.transaction(async (tx) => {
    const [held] = await tx.run<{ id: number }>(holdAdvancer(request.subscription));
    if (!held) throw new CorqError("unknown_subscription", `no subscription named "${request.subscription}"`);
    const id = held.id;
    const [target] = await tx.run<RewindTargetRow>(rewindTarget(request.subscription, request.to));
    if (!target || target.id !== id) {
      throw new CorqError("unknown_subscription", `no subscription named "${request.subscription}"`);
    }
    if (target.from_tx === null) throw new CorqError("invalid_input", `to: no event at position ${request.to}`);
    const range: RewindRange = {
      subscriptionId: id,
      from: { tx: target.from_tx, position: request.to === "beginning" ? 0 : request.to },
      key: request.key,
    };
    const matched: SQL =
      target.key === "function"
        ? await stageByFunction(tx, { range, subscription: request.subscription, code: options.code })
        : matchedInSql(range, target.key === "stream");
    const [row] = await tx.run<RequeueRow>(requeue(id, matched));
    const { requeued, keys } = present(row, "the requeue's count row");
    return { requeued, keys, subscriptionId: id };
  });
}

/**
 * A function key: reads the range in rounds, computes each matching event's key in JS, stages
 * the keyed ones; returns the staged rows as the requeue's source.
 */
async function stageByFunction(
  tx: Executor,
  { range, subscription, code }: { range: RewindRange; subscription: string; code: Subscription | undefined },
): Promise<SQL> {
  const strategy = code?.key;
  if (strategy?.kind !== "function") {
    throw new CorqError(
      "conflict",
      `subscription "${subscription}" is keyed by a function this instance does not define; rewind it where its code runs`,
    );
  }
  await stage(tx, range, strategy);
  return staged(range.key);
}

async function stage(tx: Executor, range: RewindRange, strategy: Extract<KeyStrategy, { kind: "function" }>) {
  await tx.run(createStage());
  let after: { tx: string; position: number } | null = null;
  for (;;) {
    const rows: (EventRow & { matches: boolean })[] = await tx.run(readRewindRange(range, after, STAGE_ROUND));
    const keyed = rows
      .filter((row) => row.matches)
      .map((row) => ({ tx: row.tx, position: Number(row.position), key: keyOf(strategy, row).key }))
      .filter((row): row is { tx: string; position: number; key: string } => row.key !== null)
      .filter((row) => range.key === undefined || row.key === range.key);
    if (keyed.length > 0) await tx.run(stageKeys(keyed));
    const last = rows.at(-1);
    if (rows.length < STAGE_ROUND || last === undefined) return;
    after = { tx: last.tx, position: Number(last.position) };
  }
}
