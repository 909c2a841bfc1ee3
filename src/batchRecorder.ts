import type { BatchRecordRow } from "./sql/activity/activity.js";

/**
 * The acked batches a Corq's drains hand to the activity record (the dashboard's timeline, the
 * /metrics histogram), written in one statement per 500 or per `holdMs` — telemetry: a failed
 * write is dropped, never retried or thrown.
 *
 *   holdMs = 0   (the default) a drain's batches are written by the time the drain returns, so
 *                an invocation that ends with its drain (a Worker) leaves nothing unwritten
 *   holdMs > 0   they may wait that long in memory, across drains (a long-lived process: one
 *                statement a second instead of one per drain; measured in bench/serveProbe.ts);
 *                close() writes what waits, and a crash loses at most that much of the record
 */
export interface BatchRecorder {
  add(records: BatchRecordRow[]): Promise<void>;
  /** A drain returns: with holdMs = 0, everything waiting is written now. */
  drainEnded(): Promise<void>;
  /** Writes what waits and stops the timer. */
  close(): Promise<void>;
}

const MAX_WAITING = 500;

export function createBatchRecorder(
  write: (records: BatchRecordRow[]) => Promise<unknown>,
  { holdMs }: { holdMs: number },
): BatchRecorder {
  const waiting: BatchRecordRow[] = [];
  let since = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const flush = async () => {
    clearTimeout(timer);
    timer = undefined;
    if (waiting.length > 0) await write(waiting.splice(0)).catch(() => undefined);
  };
  // a long drain (holdMs = 0) writes every second on its way
  const maxAgeMs = holdMs > 0 ? holdMs : 1000;
  return {
    async add(records) {
      if (records.length === 0) return;
      if (waiting.length === 0) {
        since = Date.now();
        if (holdMs > 0) {
          timer = setTimeout(() => void flush(), holdMs);
          // a waiting record never keeps a process alive (close() writes it on the way out)
          (timer as { unref?: () => void }).unref?.();
        }
      }
      waiting.push(...records);
      if (waiting.length >= MAX_WAITING || Date.now() - since >= maxAgeMs) await flush();
    },
    async drainEnded() {
      if (holdMs === 0) await flush();
    },
    close: flush,
  };
}
