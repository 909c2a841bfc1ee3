// The log: append (with its one retry) and the reads.
import { z } from "zod";
import {
  expectedVersion as expectedVersionSchema,
  INT4_MAX,
  parseEvents,
  parseOrThrow,
  streamName,
} from "../config.js";
import { createExecutor } from "../db/executor.js";
import { CorqError, present } from "../errors.js";
import { toStoredEvent, type EventRow } from "../sql/common/eventColumns.js";
import { appendEvents, streamHead, type AppendRow, type StreamHeadRow } from "../sql/log/appendEvents.js";
import { eventExists, readLog } from "../sql/log/readLog.js";
import { readStream } from "../sql/log/readStream.js";
import type { Corq } from "../types.js";
import { limit, type PartDeps } from "./options.js";

const appendOptions = z.object({ expectedVersion: expectedVersionSchema.optional() });
// bounds as the columns hold them: a version is an int4, a position a bigint (read as a JSON number)
const readStreamOptions = z.object({
  from: z.number().int().min(0).max(INT4_MAX).default(0),
  limit: limit(10_000, 1000),
});
const readLogOptions = z.object({
  after: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  limit: limit(10_000, 1000),
});

export function createLog({
  executor,
  settings,
  wake,
}: PartDeps & {
  /** After an append in a transaction of its own commits, with `notify` (src/corq/appendWakes.ts). */
  wake: () => void;
}): Pick<Corq, "append" | "readStream" | "readLog"> {
  const { notify, statementOptions } = settings;
  return {
    async append(stream, events, appendOpts = {}) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const input = parseEvents(events);
      const { expectedVersion } = parseOrThrow(
        appendOptions,
        { expectedVersion: appendOpts.expectedVersion },
        "invalid_input",
        "options",
      );
      const db = appendOpts.tx ? createExecutor(appendOpts.tx, statementOptions) : await executor();
      // Twice at most, for an append in a transaction of its own with an expectedVersion: the
      // statement's snapshot predates its wait for the stream, so an append that committed
      // meanwhile can leave it comparing with a stale version — refused, though the version it
      // waited for is the one expected. Run again, it sees the stream as it is now.
      for (let attempt = 1; ; attempt++) {
        const [appended] = await db.run<AppendRow>(
          appendEvents(stream, input, { expectedVersion, notify: notify && appendOpts.tx !== undefined }),
        );
        const row = present(appended, "the append's result row");
        if (row.version !== null) {
          if (notify && !appendOpts.tx) wake();
          return { stream, version: row.version, positions: row.positions.map(Number) };
        }
        const [head] = await db.run<StreamHeadRow>(streamHead(stream));
        const current = head?.version ?? null;
        const versionHeld = expectedVersion === undefined || (current ?? -1) === expectedVersion;
        if (!versionHeld) {
          const actual = current === null ? "does not exist" : `is at version ${current}`;
          throw new CorqError("version_conflict", `stream "${stream}" ${actual}, expected ${expectedVersion}`, {
            details: { stream, expectedVersion, actualVersion: current ?? -1 },
            extra: { currentVersion: current },
          });
        }
        // refused for order: only a caller's transaction can be older than the stream's last
        // append (appendEvents takes an append's own transaction id once the stream's turn came)
        if (appendOpts.tx || attempt === 2)
          throw new CorqError(
            "order_conflict",
            `stream "${stream}" has an event from a newer transaction than this one; append again in a new transaction ` +
              "(within a stream, events are delivered in version order)",
            { details: { stream }, extra: { currentVersion: current } },
          );
      }
    },

    async readStream(stream, readOpts = {}) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const { from, limit: max } = parseOrThrow(readStreamOptions, readOpts, "invalid_input", "options");
      const rows = await (await executor()).run<EventRow>(readStream(stream, from, max));
      return rows.map(toStoredEvent);
    },

    async readLog(readOpts = {}) {
      const { after, limit: max } = parseOrThrow(readLogOptions, readOpts, "invalid_input", "options");
      const db = await executor();
      const rows = await db.run<EventRow>(readLog(after, max));
      if (rows.length === 0 && after > 0 && (await db.run(eventExists(after))).length === 0) {
        throw new CorqError("invalid_input", `after: no event at position ${after}`);
      }
      const events = rows.map(toStoredEvent);
      return { events, next: events.at(-1)?.position ?? null };
    },
  };
}
