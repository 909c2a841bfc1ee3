import type { Executor } from "./db/executor.js";
import { CorqError, isDatabaseUnavailable, present, toError } from "./errors.js";
import { keyText, type KeyStrategy, type Subscription } from "./config.js";
import {
  advanceSubscription,
  kicksPending,
  recordAdvanceError,
  waitForAdvancer,
  type AdvanceRow,
} from "./sql/advance/advanceSubscription.js";
import { readAdvanceBatch, writeAdvanceBatch, type KeyedEvent } from "./sql/advance/advanceByFunction.js";
import { syncSubscriptions, type SubscriptionRow } from "./sql/advance/syncSubscriptions.js";
import type { EventRow } from "./sql/common/eventColumns.js";
import { keyOf, tenantOf } from "./keyOf.js";
import { resumeRewind } from "./rewind.js";

type FunctionKey = Extract<KeyStrategy, { kind: "function" }>;

export interface AdvanceOptions {
  /** Events scanned per statement; a subscription is advanced in rounds until it is caught up. */
  batchSize: number;
  /**
   * A wake-up (after an append, the cron): return at once where another advancer is at work —
   * it runs again for this kick. Without it, wait for that advancer: when the call returns,
   * every event committed before it is enqueued.
   */
  coalesce?: boolean;
  /**
   * Only the subscriptions whose filter takes one of these event names (an append's kick: the
   * others have nothing new to enqueue; the cron moves their watermarks). Default: all.
   */
  eventNames?: string[];
}

// Every statement of the advance may be sent again on a connection error whether or not it
// committed (src/db/retries.ts): a round moves the watermark it reads under the subscription's
// lock, so a second send advances from where the first left off; a batch's write is a
// compare-and-set on the watermark it read (a second send applies nothing, and the next read
// goes on); the rest read, wait on a lock, or upsert.
const REPEATABLE = { repeatable: true } as const;

/**
 * Registers this instance's code subscriptions and lists every subscription (one statement).
 * Refuses a code subscription whose name a push subscription already has.
 */
export async function syncCodeSubscriptions(
  executor: Executor,
  code: Map<string, Subscription>,
  options: { kick: false | { names?: string[] } } = { kick: false },
): Promise<SubscriptionRow[]> {
  const rows = await executor.run<SubscriptionRow>(
    syncSubscriptions(
      [...code.values()].map((s) => ({ ...s, key: keyText(s.key), tenant: s.tenant && keyText(s.tenant) })),
      options,
    ),
    REPEATABLE,
  );
  const clash = rows.find((row) => row.kind !== "code" && code.has(row.name));
  if (clash)
    throw new CorqError(
      "invalid_config",
      `subscription "${clash.name}" already exists as a ${clash.kind} subscription`,
    );
  return rows;
}

/**
 * Moves the log into the queues of this instance's code subscriptions and of every push
 * subscription, in two steps: the first pass over the subscriptions (`advanced`: the events
 * enqueued per subscription that advanced), then `recheck()` — where this call did the
 * advancing, it runs again for the kicks that others left meanwhile, until none is pending
 * (adding to `advanced`). The caller's own events are enqueued after the first step; the second
 * only serves others' kicks, so a dispatcher can run it beside its next statement.
 * One subscription's failure (say, a key function that throws on every event's data, or a
 * statement the database refuses) is recorded on that subscription (stats show it) and does
 * not hold back the others, nor the caller's dispatch; only a database that is gone is thrown.
 */
export async function advanceOnce(
  executor: Executor,
  code: Map<string, Subscription>,
  options: AdvanceOptions,
): Promise<{ advanced: Record<string, number>; recheck: () => Promise<void> }> {
  // registers, lists, and kicks every advancer: committed before any round below, so an
  // advancer already at work sees the kick when it re-checks
  const names = options.eventNames;
  const rows = await syncCodeSubscriptions(executor, code, { kick: { names } });
  const takes = (row: SubscriptionRow) =>
    names === undefined || row.events.includes("*") || row.events.some((e) => names.includes(e));
  const targets = rows.filter((row) => (code.has(row.name) || row.kind === "push") && takes(row));
  // One subscription after another on one connection: on Workers each parallel statement
  // would open another connection (a TCP+TLS+auth handshake), which costs far more than the
  // few milliseconds a caught-up subscription takes.
  const advanced: Record<string, number> = {};
  const advanceAll = async (some: SubscriptionRow[]) => {
    const held: number[] = [];
    for (const row of some) {
      const definition = code.get(row.name);
      try {
        if (definition?.key.kind === "function") {
          advanced[row.name] =
            (advanced[row.name] ?? 0) +
            (await advanceByFunction(executor, row.id, {
              key: definition.key,
              tenant: definition.tenant,
              events: definition.events,
              streams: definition.streams,
              limit: options.batchSize,
            }));
          continue;
        }
        const round = await advanceInSql(executor, {
          subscriptionId: row.id,
          limit: options.batchSize,
          coalesce: options.coalesce ?? false,
        });
        advanced[row.name] = (advanced[row.name] ?? 0) + round.enqueued;
        if (round.held) held.push(row.id);
      } catch (thrown) {
        const error = toError(thrown);
        if (isDatabaseUnavailable(error)) throw error;
        await executor.run(recordAdvanceError(row.id, `${error.name}: ${error.message}`.slice(0, 2000)));
      }
    }
    return held;
  };
  // Where this call did the advancing, others that found it at work left a kick and returned:
  // run again for them until no kick is pending (bounded: the cron is the safety net).
  let held = await advanceAll(targets);
  const recheck = async () => {
    for (let pass = 0; held.length > 0 && pass < 10; pass++) {
      const pending = new Set((await executor.run<{ id: number }>(kicksPending(held), REPEATABLE)).map((r) => r.id));
      held = await advanceAll(targets.filter((row) => pending.has(row.id)));
    }
  };
  return { advanced, recheck };
}

/**
 * Rounds of one statement (stream or JSON-path key) until the subscription is caught up, or
 * none at all when another advancer is at work on it (held: false). A subscription being
 * rewound is not advanced, coalesced or not: the rewind advances it when it ends (waiting here
 * would hold up every subscription after it in this pass). A rewind whose holder is gone is
 * taken over and finished first.
 */
async function advanceInSql(
  executor: Executor,
  { subscriptionId, limit, coalesce }: { subscriptionId: number; limit: number; coalesce: boolean },
): Promise<{ enqueued: number; held: boolean }> {
  let enqueued = 0;
  for (;;) {
    const [row] = await executor.run<AdvanceRow>(advanceSubscription(subscriptionId, limit), REPEATABLE);
    const round = present(row, "the advance round's row");
    if (round.held === 0 && round.rewinding !== null) {
      if (round.rewinding === "abandoned" && (await resumeRewind(executor, subscriptionId, { chunk: limit }))) continue;
      return { enqueued, held: false };
    }
    if (round.held === 0) {
      if (coalesce) return { enqueued, held: enqueued > 0 };
      await executor.run(waitForAdvancer(subscriptionId), REPEATABLE);
      continue;
    }
    enqueued += round.enqueued;
    if (round.scanned < limit) return { enqueued, held: true };
  }
}

/**
 * A key computed in JS, in rounds of one read and one compare-and-set write (retried if
 * another advancer won), until the subscription is caught up.
 */
async function advanceByFunction(
  executor: Executor,
  subscriptionId: number,
  options: {
    key: FunctionKey;
    tenant: KeyStrategy | null;
    events: string[];
    streams: string[] | null;
    limit: number;
  },
): Promise<number> {
  let enqueued = 0;
  for (;;) {
    const rows = await executor.run<
      EventRow & {
        matches: boolean;
        watermark_tx: string;
        watermark_position: string;
        erase_epoch: string | number;
        rewinding: AdvanceRow["rewinding"];
        tenant_value: string | null;
        queued_deliver_at: Date | string | null;
      }
    >(
      readAdvanceBatch(subscriptionId, { names: options.events, streams: options.streams, limit: options.limit }),
      REPEATABLE,
    );
    const [first] = rows;
    const last = rows.at(-1);
    if (!first || !last) return enqueued;
    if (first.rewinding !== null) {
      // being rewound: the rewind advances it when it ends (see advanceInSql)
      if (
        first.rewinding === "abandoned" &&
        (await resumeRewind(executor, subscriptionId, { chunk: options.limit, keyFunction: options.key }))
      )
        continue;
      return enqueued;
    }
    const matched: KeyedEvent[] = rows
      .filter((row) => row.matches)
      .map((row) => {
        const keyed = keyOf(options.key, row);
        const tenant = tenantOf(options.tenant, row, row.tenant_value);
        // an event whose tenant breaks the key rule is skipped, as one whose key does
        const invalid = keyed.invalid ?? (keyed.key === null ? null : tenant.invalid);
        return {
          tx: row.tx,
          position: Number(row.position),
          // capped at the subscription's maxDelayMs (readAdvanceBatch), not the event's own
          deliver_at: row.queued_deliver_at === null ? null : new Date(row.queued_deliver_at).toISOString(),
          key: invalid === null ? keyed.key : null,
          invalid,
          tenant: tenant.tenant,
        };
      });
    const [written] = await executor.run<{ applied: number }>(
      writeAdvanceBatch(subscriptionId, {
        read: {
          tx: first.watermark_tx,
          position: Number(first.watermark_position),
          eraseEpoch: Number(first.erase_epoch),
        },
        last: { tx: last.tx, position: Number(last.position) },
        matched,
      }),
      REPEATABLE,
    );
    // lost the race to a concurrent advancer: read again from the watermark it left
    if (present(written, "the advance batch's write result").applied === 0) continue;
    enqueued += matched.filter((m) => m.key !== null).length;
    if (rows.length < options.limit) return enqueued;
  }
}
