// A key function's key of one event, as the advance and a rewind compute it.
import { keyProblem, tenantReasons, type KeyStrategy } from "./config.js";
import { toError } from "./errors.js";
import { toStoredEvent, type EventRow } from "./sql/common/eventColumns.js";

/**
 * The key of one event: the function's string (or number) if it keeps the key rule; nothing
 * (null / undefined: the event does not belong to this subscription); or, when the function
 * throws or returns anything else, no key and the reason — the event is skipped, counted,
 * and the advance goes on (one bad event never stalls a subscription).
 */
export function keyOf(
  strategy: Extract<KeyStrategy, { kind: "function" }>,
  row: EventRow,
): { key: string | null; invalid: string | null } {
  let key: unknown;
  try {
    key = strategy.fn(toStoredEvent(row));
  } catch (thrown) {
    const error = toError(thrown);
    return { key: null, invalid: `key function threw ${error.name}: ${error.message}`.slice(0, 500) };
  }
  if (key === null || key === undefined) return { key: null, invalid: null };
  if (typeof key !== "number" && typeof key !== "string")
    return { key: null, invalid: `key function returned ${typeof key}` };
  const text = String(key);
  const problem = keyProblem(text);
  return problem ? { key: null, invalid: problem } : { key: text, invalid: null };
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
  let value: unknown = fromPath;
  if (strategy.kind === "function") {
    try {
      value = strategy.fn(toStoredEvent(row));
    } catch (thrown) {
      const error = toError(thrown);
      return { tenant: null, invalid: `tenant function threw ${error.name}: ${error.message}`.slice(0, 500) };
    }
  }
  if (value === null || value === undefined) return { tenant: "", invalid: null };
  if (typeof value !== "number" && typeof value !== "string")
    return { tenant: null, invalid: `tenant function returned ${typeof value}` };
  const text = String(value);
  const problem = keyProblem(text, tenantReasons);
  return problem ? { tenant: null, invalid: problem } : { tenant: text, invalid: null };
}
