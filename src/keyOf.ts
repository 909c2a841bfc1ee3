// A key function's key of one event, as the advance and a rewind compute it.
import { keyProblem, type KeyStrategy } from "./config.js";
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
