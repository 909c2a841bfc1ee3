// Rewind: queue a subscription's events again from a position (or the beginning), the whole
// subscription or one key — see src/sql/operate/rewind.ts (and its stage and requeue statements
// beside it) for what happens to each key.
//
// Never one transaction. A transaction that holds an xid holds the cluster's xmin horizon, and
// every subscription's advance reads only below it (docs/architecture.md, invariants 1 and 11):
// a rewind of 300,000 events as one transaction (43 s) held an unrelated subscription's
// deliveries for 44 s. So a rewind is a series of statements that each commit:
//
//   begin    the subscription is marked as rewinding, with a lease: its own advance waits
//            from then on (an advance in progress ends first: the mark waits for its row lock);
//   stage    the range read in log order, up to `chunk` events per statement (the advance's
//            batch size), each statement sized to take about 100 ms (chunkSizer.ts: the horizon
//            is free again that often): the events the subscription takes, with their keys,
//            into rewind_staged;
//   requeue  the staged events, sized the same way, in (key, log) order, queued again;
//   finish   the mark cleared; the caller advances once (the kicks left meanwhile).
//
// Per key, the replayed events get seqs in log order; no advance numbers a live event between
// two of them, and the range ends at the watermark, which stands still: the replay ends exactly
// where the key's later events begin. Other subscriptions advance as usual. Why stage: requeued
// straight from chunks of the log, a key's row was written once per chunk its events fall in —
// with 10,000 keys spread over a million events, a million key-row writes instead of 10,000
// (the rewind took 4 times as long as one statement did).
// A rewind that another one finds under way waits for it (they take turns). One whose holder
// is gone (its lease ran out: a crash, a Worker stopped) is taken over by the next advance of
// the subscription or the next rewind, and finished from its cursor: stopping half way would
// leave a key's replay short of where its later events begin.
import { chunkSizer } from "./chunkSizer.js";
import type { Executor } from "./db/executor.js";
import { CorqError, present } from "./errors.js";
import type { KeyStrategy } from "./config.js";
import { keyOf } from "./keyOf.js";
import type { EventRow } from "./sql/common/eventColumns.js";
import {
  beginRewind,
  finishRewind,
  takeOverRewind,
  type BeginRewindRow,
  type TakeOverRow,
} from "./sql/operate/rewind.js";
import { readStageChunk, stageChunk, writeStageChunk, type ChunkRow } from "./sql/operate/rewindStage.js";
import { analyzeStaged, requeueChunk, type RequeueChunkRow } from "./sql/operate/rewindRequeue.js";

type FunctionKey = Extract<KeyStrategy, { kind: "function" }>;

/**
 * How long a rewind holds its subscription's advance without a chunk committing; past it, the
 * next advance of the subscription (or the next rewind) takes it over and finishes it.
 */
export const REWIND_LEASE_MS = 30_000;

export interface RewindRequest {
  subscription: string;
  to: number | "beginning";
  key?: string;
}

export interface RewindOptions {
  /** The subscription's key function in this instance: a subscription keyed by a function needs it. */
  keyFunction?: FunctionKey;
  /** Events read per statement at most (the advance's batch size); each is sized to take about 100 ms. */
  chunk: number;
  leaseMs?: number;
  /**
   * Runs after each chunk committed, when more follow (tests hold a rewind there): its phase
   * (every stage chunk is followed by at least one requeue chunk), its number in that phase.
   */
  afterChunk?: (chunk: { phase: "stage" | "requeue"; n: number }) => Promise<void>;
}

interface Held {
  subscriptionId: number;
  token: string;
  /** The subscription's stored key strategy ("stream", a JSON path, "function"). */
  key: string;
  /** The one key rewound, or null. */
  rewindKey: string | null;
  /** The range is still to be staged (a rewind taken over may be past that). */
  staging: boolean;
}

export async function rewindSubscription(
  executor: Executor,
  request: RewindRequest,
  options: RewindOptions,
): Promise<{ requeued: number; subscriptionId: number }> {
  const token = crypto.randomUUID();
  const leaseMs = options.leaseMs ?? REWIND_LEASE_MS;
  for (let turn = 0; ; turn++) {
    const [row] = await executor.run<BeginRewindRow>(
      beginRewind({ ...request, key: request.key, token, leaseMs, functionKey: options.keyFunction !== undefined }),
    );
    if (!row) throw new CorqError("unknown_subscription", `no subscription named "${request.subscription}"`);
    if (row.from_tx === null) throw new CorqError("invalid_input", `to: no event at position ${request.to}`);
    if (row.key === "function" && options.keyFunction === undefined) {
      throw new CorqError(
        "conflict",
        `subscription "${request.subscription}" is keyed by a function this instance does not define; rewind it where its code runs`,
      );
    }
    if (row.begun) {
      const held = { subscriptionId: row.id, token, key: row.key, rewindKey: request.key ?? null, staging: true };
      return { requeued: await runChunks(executor, held, options), subscriptionId: row.id };
    }
    // another rewind of this subscription is under way: finish it if its holder is gone, else
    // wait for it (no statement waits: a lock wait in one would hold nothing, but it could not
    // tell a crashed holder from a slow one)
    if (row.rewinding !== "abandoned" || !(await resumeRewind(executor, row.id, options))) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(25 * 2 ** turn, 500)));
    }
  }
}

/**
 * Takes over a rewind of the subscription whose lease ran out and finishes it; false when
 * there is none (it ended, another took it over) or it needs a key function this caller has not.
 */
export async function resumeRewind(
  executor: Executor,
  subscriptionId: number,
  options: RewindOptions,
): Promise<boolean> {
  const token = crypto.randomUUID();
  const [row] = await executor.run<TakeOverRow>(
    takeOverRewind({
      subscriptionId,
      token,
      leaseMs: options.leaseMs ?? REWIND_LEASE_MS,
      functionKey: options.keyFunction !== undefined,
    }),
  );
  if (!row) return false;
  const held = { subscriptionId, token, key: row.key, rewindKey: row.rewind_key, staging: row.staging };
  await runChunks(executor, held, options);
  return true;
}

/** The chunks of a rewind `held.token` holds, to the end of its range; then its end. The events requeued. */
async function runChunks(executor: Executor, held: Held, options: RewindOptions): Promise<number> {
  const leaseMs = options.leaseMs ?? REWIND_LEASE_MS;
  const { subscriptionId, token } = held;
  const sized = () => chunkSizer({ max: options.chunk });
  const staging = sized();
  for (let n = 1; held.staging; ) {
    const limit = staging.size;
    const chunk =
      held.key === "function"
        ? await stageByFunction(executor, held, { ...options, chunk: limit })
        : present(
            (
              await executor.run<ChunkRow>(
                stageChunk({
                  subscriptionId,
                  token,
                  limit,
                  leaseMs,
                  oneStream: held.key === "stream" ? (held.rewindKey ?? undefined) : undefined,
                }),
              )
            )[0],
            "the stage chunk's row",
          );
    staging.took(chunk.elapsed_ms);
    if (chunk.stale) continue; // an erasure round committed after the chunk's read: read it again
    if (chunk.held === 0) throw lostLease(leaseMs);
    await options.afterChunk?.({ phase: "stage", n: n++ });
    if (chunk.scanned < limit) break;
  }
  await executor.run(analyzeStaged());
  let requeued = 0;
  let after: { key: string; tx: string; position: number } | null = null;
  const requeueing = sized();
  for (let n = 1; ; n++) {
    const limit = requeueing.size;
    const rows: RequeueChunkRow[] = await executor.run<RequeueChunkRow>(
      requeueChunk({ subscriptionId, token, limit, leaseMs, after }),
    );
    const chunk: RequeueChunkRow = present(rows[0], "the requeue chunk's row");
    requeueing.took(chunk.elapsed_ms);
    if (chunk.held === 0) throw lostLease(leaseMs);
    requeued += chunk.requeued;
    if (chunk.scanned < limit || chunk.last_key === null || chunk.last_tx === null) break;
    after = { key: chunk.last_key, tx: chunk.last_tx, position: Number(chunk.last_position) };
    await options.afterChunk?.({ phase: "requeue", n });
  }
  await executor.run(finishRewind(subscriptionId, token));
  return requeued;
}

const lostLease = (leaseMs: number) =>
  new CorqError(
    "conflict",
    `the rewind went ${leaseMs} ms without a chunk and was taken over (or the subscription was deleted); whoever took it over finishes it`,
  );

/** A chunk of staging where a function computes the keys: read, the keys computed here, written. */
async function stageByFunction(executor: Executor, held: Held, options: RewindOptions): Promise<ChunkRow> {
  const strategy = options.keyFunction;
  if (strategy === undefined)
    throw new CorqError("conflict", "a rewind of a function-keyed subscription needs its key function");
  // read, keys computed here, written: timed whole, by this clock (the write alone holds an xid)
  const started = Date.now();
  const rows = await executor.run<EventRow & { matches: boolean; erase_epoch: string | number }>(
    readStageChunk({ subscriptionId: held.subscriptionId, token: held.token, limit: options.chunk }),
  );
  const keyed = rows
    .filter((row) => row.matches)
    .map((row) => ({ tx: row.tx, position: Number(row.position), key: keyOf(strategy, row).key }))
    .filter((row): row is { tx: string; position: number; key: string } => row.key !== null)
    .filter((row) => held.rewindKey === null || row.key === held.rewindKey);
  const last = rows.at(-1);
  const [written] = await executor.run<{ held: number; stale: boolean }>(
    writeStageChunk({
      subscriptionId: held.subscriptionId,
      token: held.token,
      leaseMs: options.leaseMs ?? REWIND_LEASE_MS,
      last: last === undefined ? null : { tx: last.tx, position: Number(last.position) },
      keyed,
      done: rows.length < options.chunk,
      // nothing read, nothing to stage: no epoch to compare with
      eraseEpoch: rows[0] === undefined ? undefined : Number(rows[0].erase_epoch),
    }),
  );
  const { held: stillHeld, stale } = present(written, "the stage chunk's write");
  return { scanned: rows.length, held: stillHeld, stale, elapsed_ms: Date.now() - started };
}
