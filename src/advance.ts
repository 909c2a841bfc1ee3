import type { Executor } from "./db/executor.js";
import { CorqError, toError } from "./errors.js";
import { keyText, parseKey, type KeyStrategy, type Subscription } from "./config.js";
import { advanceSubscription, type AdvanceRow } from "./sql/advanceSubscription.js";
import { readAdvanceBatch, writeAdvanceBatch, type KeyedEvent } from "./sql/advanceByFunction.js";
import { syncSubscriptions, type SubscriptionRow } from "./sql/syncSubscriptions.js";
import { toStoredEvent, type EventRow } from "./sql/eventColumns.js";

export interface AdvanceOptions {
  /** Events scanned per statement; a subscription is advanced in rounds until it is caught up. */
  batchSize: number;
}

/**
 * Registers this instance's code subscriptions and lists every subscription (one statement).
 * Refuses a code subscription whose name a push subscription already has.
 */
export async function syncCodeSubscriptions(
  executor: Executor,
  code: Map<string, Subscription>,
): Promise<SubscriptionRow[]> {
  const rows = await executor.run<SubscriptionRow>(
    syncSubscriptions([...code.values()].map((s) => ({ ...s, key: keyText(s.key) }))),
  );
  const clash = rows.find((row) => row.kind !== "code" && code.has(row.name));
  if (clash) throw new CorqError("invalid_config", `subscription "${clash.name}" already exists as a ${clash.kind} subscription`);
  return rows;
}

/**
 * Moves the log into the queues of this instance's code subscriptions and of every push
 * subscription. Returns the number of events enqueued per subscription.
 */
export async function advance(
  executor: Executor,
  code: Map<string, Subscription>,
  options: AdvanceOptions,
): Promise<Record<string, number>> {
  const rows = await syncCodeSubscriptions(executor, code);
  const targets = rows.filter((row) => code.has(row.name) || row.kind === "push");
  // One subscription after another on one connection: on Workers each parallel statement
  // would open another connection (a TCP+TLS+auth handshake), which costs far more than the
  // few milliseconds a caught-up subscription takes. One failing (say, a key function that
  // throws) does not hold back the others; the first error is rethrown after all ran.
  const advanced: Record<string, number> = {};
  let failure: unknown;
  for (const row of targets) {
    const definition = code.get(row.name);
    const key = definition ? definition.key : parseKey(row.key);
    const events = definition ? definition.events : row.events;
    try {
      advanced[row.name] = await advanceOne(executor, row.id, { key, events, limit: options.batchSize });
    } catch (error) {
      failure ??= error;
    }
  }
  if (failure !== undefined) throw toError(failure);
  return advanced;
}

async function advanceOne(
  executor: Executor,
  subscriptionId: number,
  options: { key: KeyStrategy; events: string[]; limit: number },
): Promise<number> {
  let enqueued = 0;
  for (;;) {
    const round =
      options.key.kind === "function"
        ? await advanceByFunction(executor, subscriptionId, { ...options, key: options.key })
        : (await executor.run<AdvanceRow>(advanceSubscription(subscriptionId, { ...options, key: options.key })))[0];
    enqueued += round.enqueued;
    if (round.scanned < options.limit) return enqueued;
  }
}

/** A key computed in JS: one read, one compare-and-set write (retried if another advancer won). */
async function advanceByFunction(
  executor: Executor,
  subscriptionId: number,
  options: { key: Extract<KeyStrategy, { kind: "function" }>; events: string[]; limit: number },
): Promise<AdvanceRow> {
  const rows = await executor.run<EventRow & { matches: boolean; watermark_tx: string; watermark_position: string }>(
    readAdvanceBatch(subscriptionId, options.events, options.limit),
  );
  if (rows.length === 0) return { scanned: 0, enqueued: 0 };
  const matched: KeyedEvent[] = rows
    .filter((row) => row.matches)
    .map((row) => ({ tx: row.tx, position: Number(row.position), key: keyOf(options.key, row) }));
  const last = rows[rows.length - 1];
  const [{ applied }] = await executor.run<{ applied: number }>(
    writeAdvanceBatch(
      subscriptionId,
      { tx: rows[0].watermark_tx, position: Number(rows[0].watermark_position) },
      { tx: last.tx, position: Number(last.position) },
      matched,
    ),
  );
  // Lost the race to a concurrent advancer: report a full round so the caller reads again.
  if (applied === 0) return { scanned: options.limit, enqueued: 0 };
  return { scanned: rows.length, enqueued: matched.filter((m) => m.key !== null).length };
}

function keyOf(strategy: Extract<KeyStrategy, { kind: "function" }>, row: EventRow): string | null {
  const key = strategy.fn(toStoredEvent(row));
  if (key === null || key === undefined) return null;
  if (typeof key === "number" || typeof key === "string") return String(key);
  throw new CorqError("invalid_config", `key function returned ${typeof key}, expected a string (event ${row.position})`);
}
