// Running one operation in every cell at once (createCells and the HTTP adapter, cellsRuntime):
// each cell's failure is its own — the others finish, and a cell that is down holds none back.
import { CorqError, present } from "../errors.js";
import type { CorqRuntime } from "../runtimeTypes.js";

export interface Fleet {
  names: string[];
  cell(name: string): CorqRuntime;
}

/** Every cell's answer or error, in the cells' order. */
export async function settleEvery<T>(
  { names, cell }: Fleet,
  fn: (corq: CorqRuntime, name: string) => Promise<T>,
): Promise<{ name: string; result: PromiseSettledResult<T> }[]> {
  const results = await Promise.allSettled(names.map((name) => fn(cell(name), name)));
  return names.map((name, index) => ({ name, result: present(results[index], "a cell's answer") }));
}

/** Every cell's answer by name; once all have answered, the first error is thrown naming its cell. */
export async function everyCell<T>(
  fleet: Fleet,
  fn: (corq: CorqRuntime, name: string) => Promise<T>,
): Promise<Map<string, T>> {
  const results = new Map<string, T>();
  for (const { name, result } of await settleEvery(fleet, fn)) {
    if (result.status === "rejected") throw inCell(name, result.reason);
    results.set(name, result.value);
  }
  return results;
}

/** A cell's CorqError, its message and problem naming the cell; anything else as it is. */
export function inCell(name: string, error: unknown): unknown {
  if (!(error instanceof CorqError)) return error;
  return new CorqError(error.code, `cell "${name}": ${error.message}`, {
    cause: error,
    details: error.details,
    extra: { ...error.extra, cell: name },
  });
}

export const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
