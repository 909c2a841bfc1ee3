// A key function's key of one event, as the advance and a rewind compute it; and its tenant.
import { keyProblem, keyReasons, tenantReasons, type KeyStrategy } from "./config.js";
import { toError } from "./errors.js";
import { toStoredEvent, type EventRow } from "./sql/common/eventColumns.js";

type Named = "key" | "tenant";
/** What an event names: its text, nothing (undefined), or why it cannot be used (the event is skipped). */
type Naming = { text: string | undefined; invalid: null } | { text: null; invalid: string };

/**
 * A function's key (or tenant) of one event: its string or number if it keeps the key rule;
 * nothing (null / undefined); or, when the function throws or returns anything else, the reason.
 */
function named(what: Named, value: () => unknown): Naming {
  let result: unknown;
  try {
    result = value();
  } catch (thrown) {
    const error = toError(thrown);
    return { text: null, invalid: `${what} function threw ${error.name}: ${error.message}`.slice(0, 500) };
  }
  if (result === null || result === undefined) return { text: undefined, invalid: null };
  if (typeof result !== "number" && typeof result !== "string")
    return { text: null, invalid: `${what} function returned ${typeof result}` };
  const text = String(result);
  const problem = keyProblem(text, what === "key" ? keyReasons : tenantReasons);
  return problem === null ? { text, invalid: null } : { text: null, invalid: problem };
}

/**
 * The key of one event: the function's key if it keeps the key rule; nothing (null / undefined:
 * the event does not belong to this subscription); or no key and the reason — the event is
 * skipped, counted, and the advance goes on (one bad event never stalls a subscription).
 */
export function keyOf(
  strategy: Extract<KeyStrategy, { kind: "function" }>,
  row: EventRow,
): { key: string | null; invalid: string | null } {
  const { text, invalid } = named("key", () => strategy.fn(toStoredEvent(row)));
  return { key: text ?? null, invalid };
}

/**
 * An event's tenant as the advance stores it with a key made for it (storedTenant in
 * src/sql/advance/advanceSubscription.ts): null without a tenant strategy; "" when the event
 * names none; or, when it breaks the key rule (or the function throws or returns anything but
 * a string or a number), the reason its event is skipped. `fromPath` is the path's value as the
 * database read it (readAdvanceBatch), for a strategy that is not a function.
 */
export function tenantOf(
  strategy: KeyStrategy | null,
  row: EventRow,
  fromPath: string | null,
): { tenant: string | null; invalid: string | null } {
  if (strategy === null) return { tenant: null, invalid: null };
  const { text, invalid } = named("tenant", () =>
    strategy.kind === "function" ? strategy.fn(toStoredEvent(row)) : fromPath,
  );
  return { tenant: text === undefined ? "" : text, invalid };
}
