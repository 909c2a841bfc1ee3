// The log: append (with its one retry), the reads, and the erasure of a stream.
import { chunkSizer } from "../chunkSizer.js";
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
import {
  appendEvents,
  streamHead,
  type AppendRow,
  type Fence,
  type Idempotency,
  type StreamHeadRow,
} from "../sql/log/appendEvents.js";
import { eventExists, readLog } from "../sql/log/readLog.js";
import { readStream, type StreamRow } from "../sql/log/readStream.js";
import {
  afterRound,
  beginErasure,
  eraseRound,
  holdAdvancers,
  type AfterRoundRow,
  type BeginErasureRow,
  type EraseRoundRow,
} from "../sql/log/eraseStream.js";
import type { Corq } from "../types.js";
import type { CorqRuntime } from "../runtimeTypes.js";
import { limit, type PartDeps } from "./options.js";
import { traceAppend } from "../tracing.js";

const appendOptions = z.object({
  expectedVersion: expectedVersionSchema.optional(),
  // the IETF draft's header value, as API.md bounds it: 1–200 visible ASCII characters
  idempotencyKey: z
    .string()
    .regex(/^[\x21-\x7e]{1,200}$/, "1–200 visible ASCII characters")
    .optional(),
  // whose key it is (the HTTP API's caller: src/http/idempotencyScope.ts); the library's own: ''
  idempotencyScope: z
    .string()
    .regex(/^[\x21-\x7e]{0,100}$/, "0–100 visible ASCII characters")
    .default(""),
});

/** Postgres' serialization_failure: corq.idempotency_race(), an append with the same key committed meanwhile. */
const isIdempotencyRace = (error: unknown) => (error as { code?: unknown } | null)?.code === "40001";
// bounds as the columns hold them: a version is an int4, a position a bigint (read as a JSON number)
const readStreamOptions = z.object({
  from: z.number().int().min(0).max(INT4_MAX).default(0),
  limit: limit(10_000, 1000),
});
const readLogOptions = z.object({
  after: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  limit: limit(10_000, 1000),
});

/**
 * Events an erasure round takes at most: each round is one transaction that holds every
 * subscription's advancer lock, so it must stay short (API.md guarantee 7): 2,000 events with
 * their 4,000 queue rows in two subscriptions (beside 440,000 other queued rows) took 160–320 ms
 * a round on this 2-core machine at load 9–10, BEGIN and COMMIT included. So rounds are sized to
 * take about 100 ms each, from a first one of 500 (chunkSizer.ts).
 */
const ERASE_ROUND = 2000;

type LogPart = Pick<CorqRuntime, "append" | "readStream" | "readLog" | "streamPage" | "eraseStream">;
type Append = LogPart["append"];
type UntracedAppend = (
  stream: string,
  events: Parameters<Append>[1],
  options: Parameters<Append>[2],
  traceContext: string | null,
) => ReturnType<Append>;

/**
 * A routed append (src/cells/) that wrote nothing because this cell does not hold its slot at
 * the router's epoch (a stale router: it reads the directory again) or a move is taking the slot
 * away (`slot_moving`: retry shortly).
 */
function refuseUnfenced(fence: Fence, row: AppendRow) {
  if (row.fence_epoch === fence.epoch && row.fence_state === "owned") return;
  const details = { slot: fence.slot, epoch: fence.epoch, cellEpoch: row.fence_epoch ?? null };
  if (row.fence_epoch === fence.epoch && row.fence_state === "fenced")
    throw new CorqError("slot_moving", `slot ${fence.slot} is being moved to another cell; append again shortly`, {
      details,
    });
  throw new CorqError("wrong_cell", `this cell does not hold slot ${fence.slot} at epoch ${fence.epoch}`, { details });
}

export function createLog({
  executor,
  settings,
  wake,
  advance,
}: PartDeps & {
  /** After an append in a transaction of its own commits, with `notify` (src/corq/wakes.ts). */
  wake: () => void;
  /** The advance, for the kicks that waited while an erasure round held the advancer locks. */
  advance: Corq["advance"];
}): LogPart {
  const { notify, statementOptions } = settings;
  const page = async (stream: string, readOpts: { from?: number; limit?: number }) => {
    parseOrThrow(streamName, stream, "invalid_input", "stream");
    const { from, limit: max } = parseOrThrow(readStreamOptions, readOpts, "invalid_input", "options");
    const rows = await (await executor()).run<StreamRow>(readStream(stream, from, max));
    const events = rows.filter((row) => row.position !== null).map((row) => toStoredEvent(row as EventRow));
    const erasedThrough = rows[0]?.erased_through ?? null;
    return { events, version: rows[0]?.stream_version ?? null, erased: erasedThrough !== null };
  };
  const log: Omit<LogPart, "append"> & { append: UntracedAppend } = {
    // traceContext: what each event keeps as the context it was appended under (src/tracing.ts)
    async append(stream, events, appendOpts = {}, traceContext = null) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const input = parseEvents(events);
      const { expectedVersion, idempotencyKey, idempotencyScope } = parseOrThrow(
        appendOptions,
        {
          expectedVersion: appendOpts.expectedVersion,
          idempotencyKey: appendOpts.idempotencyKey,
          idempotencyScope: appendOpts.idempotencyScope,
        },
        "invalid_input",
        "options",
      );
      // the fingerprint covers what was sent (CLARIFICATIONS: the events and expectedVersion as sent)
      const idempotency: Idempotency | undefined =
        idempotencyKey === undefined
          ? undefined
          : {
              scope: idempotencyScope,
              key: idempotencyKey,
              sent: JSON.stringify([events, expectedVersion ?? null]),
              ttlMs: settings.idempotencyTtlMs,
            };
      const db = appendOpts.tx ? createExecutor(appendOpts.tx, statementOptions) : await executor();
      // Twice at most, for an append in a transaction of its own with an expectedVersion: the
      // statement's snapshot predates its wait for the stream, so an append that committed
      // meanwhile can leave it comparing with a stale version — refused, though the version it
      // waited for is the one expected. Run again, it sees the stream as it is now.
      for (let attempt = 1; ; attempt++) {
        let appended: AppendRow | undefined;
        try {
          [appended] = await db.run<AppendRow>(
            appendEvents(stream, input, {
              expectedVersion,
              notify: notify && appendOpts.tx !== undefined,
              idempotency,
              traceContext,
              fence: appendOpts.fence,
            }),
          );
        } catch (error) {
          // An append with the key committed after this statement began: nothing was written.
          // Run again (its row is visible now); in the caller's transaction, which the failure
          // aborted, the caller must.
          if (!isIdempotencyRace(error) || attempt >= 3) throw error;
          if (appendOpts.tx)
            throw new CorqError(
              "idempotency_in_flight",
              `an append to "${stream}" with this idempotency key committed meanwhile; run the transaction again`,
              { cause: error, details: { stream } },
            );
          continue;
        }
        const row = present(appended, "the append's result row");
        if (appendOpts.fence) refuseUnfenced(appendOpts.fence, row);
        if (row.version !== null) {
          if (notify && !appendOpts.tx) wake();
          return { stream, version: row.version, positions: row.positions.map(Number) };
        }
        if (idempotency) {
          if (row.prior_version !== null && row.prior_version !== undefined) {
            if (!row.prior_same)
              throw new CorqError(
                "idempotency_key_reused",
                `idempotency key "${idempotency.key}" was used for another append to "${stream}" within the window`,
                { details: { stream } },
              );
            const positions = (row.prior_positions ?? []).map(Number);
            return { stream, version: row.prior_version, positions, replayed: true };
          }
          if (row.free === false)
            throw new CorqError(
              "idempotency_in_flight",
              `an append to "${stream}" with idempotency key "${idempotency.key}" is still in flight`,
              { details: { stream } },
            );
        }
        const [head] = await db.run<StreamHeadRow>(streamHead(stream));
        const current = head?.version ?? null;
        const versionHeld = expectedVersion === undefined || (current ?? -1) === expectedVersion;
        // an idempotent append's key may have committed after this statement began: look once more
        if (!versionHeld && idempotency && attempt === 1) continue;
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
      return (await page(stream, readOpts)).events;
    },

    async streamPage(stream, readOpts = {}) {
      const { events, version, erased } = await page(stream, readOpts);
      // the shape of a stream never erased stays as it was: { stream, events }
      return erased && version !== null ? { stream, events, erased: true, version } : { stream, events };
    },

    async eraseStream(stream) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const db = await executor();
      if ((await db.run<BeginErasureRow>(beginErasure(stream))).length === 0) {
        throw new CorqError("unknown_stream", `no stream named "${stream}"`);
      }
      // Rounds until one erases less than a full round (src/sql/log/eraseStream.ts), and once
      // more when a subscription was created meanwhile (the round after sweeps what it queued).
      let erased = 0;
      // each round sized to take about 100 ms: it holds every advancer lock and an xid while it runs
      const sizes = chunkSizer({ max: ERASE_ROUND });
      for (;;) {
        const size = sizes.size;
        const { round, held } = await db.transaction(async (tx) => {
          const locked = await tx.run<{ id: number }>(holdAdvancers());
          const [row] = await tx.run<EraseRoundRow>(eraseRound(stream, size));
          return { round: present(row, "the erasure round's row"), held: locked.map((r) => r.id) };
        });
        sizes.took(round.elapsed_ms);
        erased += round.erased;
        const [after] = await db.run<AfterRoundRow>(afterRound(held));
        const { kicked, created } = present(after, "the erasure's check row");
        // advances that came while the round held the advancer locks left a kick and returned
        if (kicked) await advance({ coalesce: true });
        if (round.erased < size && !created) return { erased };
      }
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
  return {
    ...log,
    // the append as a `send` span, its retries included, when a tracer is registered
    append: (stream, events, appendOpts = {}) =>
      traceAppend(
        {
          stream,
          count: Array.isArray(events) ? events.length : 0,
          parent: appendOpts.trace,
          attributes: {
            ...(appendOpts.tx ? { "corq.outbox": true } : {}),
            ...(appendOpts.idempotencyKey === undefined ? {} : { "corq.idempotent": true }),
          },
        },
        (traceContext) => log.append(stream, events, appendOpts, traceContext),
        (result) => ({ "corq.stream.version": result.version, ...(result.replayed ? { "corq.replayed": true } : {}) }),
      ),
  };
}
