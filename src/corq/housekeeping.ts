// Housekeeping: what the runtimes run now and then (the Worker's cron, `serve`'s safety net once
// a minute) so that nothing corq keeps grows with time alone — idle key rows compacted (seqs
// never reused: src/sql/common/keySeqFloor.ts) and the operational tables pruned.
import { z } from "zod";
import { parseOrThrow } from "../config.js";
import { present } from "../errors.js";
import type { CorqRuntime } from "../runtimeTypes.js";
import { ACTIVITY_KEPT_MS } from "../sql/activity/activity.js";
import { compactIdleKeys, type CompactedRow } from "../sql/housekeeping/compactIdleKeys.js";
import { pruneOperational, type PrunedRow } from "../sql/housekeeping/pruneOperational.js";
import type { PartDeps } from "./options.js";

// Key rows deleted per statement: each chunk commits in tens of milliseconds (no long transaction,
// and the subscription rows it holds are held that long), and 4 chunks a pass keep up with 20,000
// keys going idle a minute on Workers within a handful of subrequests.
const CHUNK = 5000;
const chunksOption = z.object({ maxChunks: z.number().int().min(1).max(1000).default(4) });

export function createHousekeeping({ executor, settings }: PartDeps): Pick<CorqRuntime, "housekeeping"> {
  return {
    async housekeeping(options = {}) {
      const { maxChunks } = parseOrThrow(chunksOption, options, "invalid_input", "options");
      const db = await executor();
      const [pruned] = await db.run<PrunedRow>(
        pruneOperational({
          activityOlderThanMs: ACTIVITY_KEPT_MS,
          idempotencyTtlMs: settings.idempotencyTtlMs,
          tenantIdleMs: settings.keyIdleMs,
        }),
      );
      const { activity, sessions, webhook_ids, idempotency_keys } = present(pruned, "the prune counts");
      let keys = 0;
      let busy = 0;
      // chunk after chunk while a chunk was full (more may be idle); what is left, next pass
      for (let chunk = 0; chunk < maxChunks; chunk++) {
        const [row] = await db.run<CompactedRow>(compactIdleKeys({ idleMs: settings.keyIdleMs, limit: CHUNK }));
        const compacted = present(row, "the compaction count");
        keys += compacted.deleted;
        busy = compacted.busy;
        if (compacted.deleted < CHUNK) break;
      }
      return {
        keys,
        busySubscriptions: busy,
        activity,
        sessions,
        webhookIds: webhook_ids,
        idempotencyKeys: idempotency_keys,
      };
    },
  };
}
