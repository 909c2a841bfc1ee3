import { expect } from "vitest";
import { CorqError } from "../../src/index.js";

/** The CorqError `fn` throws (synchronously: a definition refused where it is made); fails the test if it throws none. */
export function refused(fn: () => unknown): CorqError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(CorqError);
    return error as CorqError;
  }
  throw new Error("expected a CorqError");
}
