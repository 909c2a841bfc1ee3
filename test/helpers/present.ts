// An index read in a test states what it expects to be there (test/ and bench/ are type-checked
// with noUncheckedIndexedAccess): a missing row or element fails with a message that names it,
// where a `!` would let `undefined` travel on into a TypeError that names nothing.

/** `value`, typed as present; throws naming `what` when the row, element or field the test expects is missing. */
export function present<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw new Error(`expected ${what}, and there is none`);
  return value;
}
