// src/http/jsonNesting.ts: a body's nesting is measured before JSON.parse builds it.
import { describe, expect, it } from "vitest";
import { MAX_BODY_NESTING, nestsDeeperThan } from "../src/http/jsonNesting.js";

describe("nestsDeeperThan", () => {
  it("counts objects and arrays inside one another, up to the limit and one past it", () => {
    const nested = (levels: number) => `${'[{"a":'.repeat(levels / 2)}1${"}]".repeat(levels / 2)}`;
    expect([nested(10), nested(12)].map((text) => nestsDeeperThan(text, 10))).toEqual([false, true]);
    expect(nestsDeeperThan("[".repeat(500_000), MAX_BODY_NESTING)).toBe(true);
  });

  it("does not count brackets inside strings, escaped quotes included", () => {
    const texts = [
      JSON.stringify({ a: "[[[[[[[[[[[[" }),
      JSON.stringify({ a: '\\"[[[[[[[[[[[[', b: ['"{{{{{{{{{{{{{'] }),
      JSON.stringify(["\\", "[[[[[[[[[[[[[[[[[["]),
    ];
    expect(texts.map((text) => nestsDeeperThan(text, 3))).toEqual([false, false, false]);
  });

  it("siblings do not add up: depth, not count", () => {
    expect(nestsDeeperThan(JSON.stringify(Array.from({ length: 1000 }, () => [[1]])), 3)).toBe(false);
    expect(nestsDeeperThan(JSON.stringify(Array.from({ length: 1000 }, () => [[[1]]])), 3)).toBe(true);
  });
});
