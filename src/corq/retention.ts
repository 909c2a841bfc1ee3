// Retention of the log: the policy (read, set, seeded by createCorq's `retention` option) and
// the passes that remove what it allows, chunk by chunk (src/sql/lifecycle/retention.ts).
import { chunkSizer } from "../chunkSizer.js";
import { z } from "zod";
import { parseOrThrow } from "../config.js";
import { CorqError, present } from "../errors.js";
import { retentionInput, storedPolicy } from "../retentionPolicy.js";
import {
  chunkSettings,
  lockPolicy,
  lockSubscriptions,
  readRetention,
  removeChunk,
  requeuedRemoved,
  rewindBelowHorizon,
  toRetention,
  writeRetention,
  type ChunkRow,
  type RetentionRow,
} from "../sql/lifecycle/retention.js";
import type { Executor } from "../db/executor.js";
import type { Corq } from "../types.js";
import type { PartDeps } from "./options.js";

/**
 * Events looked at per chunk. Measured on this machine (docs/architecture.md, "Retention"): a
 * chunk removing 2,000 events took 0.05 s with the machine to itself and 0.1–0.25 s at load 10
 * on its 2 cores (5,000: 0.13 s, and 0.4–0.6 s with p99 1.2 s at load 10) — well under the
 * second a corq transaction may last (guarantee 7), whatever else runs.
 */
export const RETENTION_CHUNK = 2000;
/**
 * How long a chunk waits for a lock (a subscription row an advance or a rewind holds) before it
 * gives up: longer than an advance's statement, far shorter than a long rewind.
 */
export const RETENTION_LOCK_WAIT_MS = 300;
/** Chunks rolled back in a row because a rewind queued their events meanwhile, before the pass stops. */
const RACES_PER_PASS = 3;

/** Thrown inside a chunk's transaction to roll it back: a rewind queued, staged or may stage an event it removed. */
class Requeued extends Error {}

/**
 * One chunk, one short transaction (src/sql/lifecycle/retention.ts, at the top): the policy
 * row, the removal, the subscription rows, the check that no rewind queued what was removed.
 */
async function chunkOnce(db: Executor, sizes: { sweep: number; recheck: number }): Promise<ChunkRow> {
  return db.transaction(async (tx) => {
    await tx.run(chunkSettings(RETENTION_LOCK_WAIT_MS));
    await tx.run(lockPolicy());
    const row = present((await tx.run<ChunkRow>(removeChunk(sizes)))[0], "the chunk's count row");
    if (row.deleted === 0) return row;
    await tx.run(lockSubscriptions());
    const last = { tx: row.last_tx ?? "0", position: Number(row.last_position) };
    const [check] = await tx.run<{ requeued: boolean }>(requeuedRemoved((row.positions ?? []).map(Number), last));
    if (check?.requeued) throw new Requeued();
    return row;
  });
}

const runOptions = z.object({
  /** Chunks at most (each its own transaction). */
  maxChunks: z.number().int().min(1).max(1_000_000).default(1000),
  /** Start no chunk after this many ms (the chunk under way finishes). */
  budgetMs: z.number().int().min(0).max(3_600_000).default(10_000),
  /** Events per chunk at most (each sized to take about 100 ms: chunkSizer.ts). */
  chunkSize: z.number().int().min(1).max(100_000).default(RETENTION_CHUNK),
});

// lock_not_available (lock_timeout), deadlock_detected: another operation holds what a chunk needs; the next pass goes on
const BUSY_STATES = new Set(["55P03", "40P01"]);
const busy = (error: unknown) => BUSY_STATES.has(String((error as { code?: unknown }).code));

export function createRetention({
  executor,
  settings,
}: PartDeps): Pick<Corq, "retention" | "setRetention" | "runRetention"> {
  const option = settings.retention;
  const read = async (db: Executor) =>
    toRetention(present((await db.run<RetentionRow>(readRetention(option)))[0], "the retention row"));

  return {
    async retention() {
      return read(await executor());
    },

    async setRetention(input) {
      const policy = storedPolicy(parseOrThrow(retentionInput, input, "invalid_input", "retention"));
      const [row] = await (await executor()).run<RetentionRow>(writeRetention(policy, option));
      return toRetention(present(row, "the retention row"));
    },

    async runRetention(opts = {}) {
      const { stop, ...bounds } = opts;
      const { maxChunks, budgetMs, chunkSize } = parseOrThrow(runOptions, bounds, "invalid_input", "options");
      const db = await executor();
      const policy = await read(db);
      if (policy.maxAgeMs === null) return { deleted: 0, horizon: policy.horizon, done: true };
      const started = Date.now(); // a time box for this call, not state: the database keeps the clock
      let deleted = 0;
      let horizon = policy.horizon;
      const more = (chunk: number) =>
        chunk < maxChunks && !stop?.aborted && (chunk === 0 || Date.now() - started < budgetMs);
      // The pass's first chunk also re-checks held events; the others sweep on, and once the sweep
      // has caught up, re-check the rest of the held events (not every chunk: the queue that
      // holds them rarely changes between two chunks, and each re-check reads them all again).
      let sweeping = true;
      let recheckDue = true;
      let races = 0;
      // each chunk sized to take about 100 ms (the horizon is free again that often), up to chunkSize
      const sizes = chunkSizer({ max: chunkSize });
      for (let chunk = 0; more(chunk); chunk++) {
        const recheck = recheckDue && (chunk === 0 || !sweeping);
        const size = sizes.size;
        let row: ChunkRow;
        try {
          row = await chunkOnce(db, { sweep: sweeping ? size : 0, recheck: recheck ? size : 0 });
          sizes.took(row.elapsed_ms);
        } catch (error) {
          // rolled back: done again (its removal now sees the rewind's queue rows), a few times at most
          if (error instanceof Requeued && ++races < RACES_PER_PASS) continue;
          if (busy(error) || error instanceof Requeued) return { deleted, horizon, done: false };
          throw error;
        }
        deleted += row.deleted;
        horizon = row.horizon === null ? null : Number(row.horizon);
        if (sweeping) sweeping = row.sweep_more;
        if (recheck) recheckDue = row.recheck_more;
        if (!row.active || (!sweeping && !recheckDue)) return { deleted, horizon, done: true };
      }
      return { deleted, horizon, done: false };
    },
  };
}

/**
 * Refuses (retained_away, 409) a rewind to a position below the retention horizon: the events
 * from there on are no longer all in the log. Called before the rewind, at its call site.
 */
export async function refuseRewindBelowHorizon(db: Executor, to: number): Promise<void> {
  const [row] = await db.run<{ horizon: string | number | null; below: boolean }>(rewindBelowHorizon(to));
  if (!row?.below) return;
  const horizon = row.horizon === null ? null : Number(row.horizon);
  const why =
    horizon !== null && to < horizon
      ? `retention removed events below position ${horizon} (the horizon)`
      : "retention removed an event that comes after it in log order (its transaction committed later)";
  throw new CorqError(
    "retained_away",
    `the events from position ${to} on are no longer all in the log: ${why}; rewind to a position at or above the horizon whose events are all there`,
    { extra: { horizon } },
  );
}
