// The chaos suite's checker must be able to say no: loss, reordering and duplicates are counted.
import { describe, expect, it } from "vitest";
import { killFigures, seededRandom, tally } from "./helpers/chaos.js";

describe("chaos tally", () => {
  const expected = new Map([
    ["a", [1, 3, 5]],
    ["b", [2, 4]],
  ]);
  const d = (key: string, ...positions: number[]) => positions.map((position) => ({ key, position }));

  it("finds nothing wrong in a clean run", () => {
    expect(tally(expected, [...d("a", 1, 3), ...d("b", 2), ...d("a", 5), ...d("b", 4)])).toEqual({
      events: 5,
      lost: 0,
      order: 0,
      dup: 0,
    });
  });

  it("counts lost events, keys out of order, and redeliveries (which do not count as reordering)", () => {
    expect(tally(expected, [...d("a", 1, 5), ...d("b", 2, 4)])).toMatchObject({ lost: 1, order: 0 });
    expect(tally(expected, [...d("a", 3, 1, 5), ...d("b", 4, 2)])).toMatchObject({ lost: 0, order: 2 });
    expect(tally(expected, [...d("a", 1, 3, 1, 3, 5), ...d("b", 2, 4, 4)])).toEqual({
      events: 5,
      lost: 0,
      order: 0,
      dup: 3,
    });
  });

  it("kill figures: overlapping batches of one key are double claims; a duplicate must follow a kill", () => {
    const at = (ms: number) => new Date(ms);
    const run = (pid: number, key: string, position: number, start: number, end: number) => ({
      pid,
      key,
      position,
      started_at: at(start),
      finished_at: at(end),
    });
    // a: process 1 then process 2, one after the other; b: process 2 then 3, overlapping
    const handled = [run(1, "a", 1, 0, 10), run(2, "a", 1, 20, 30), run(2, "b", 2, 0, 10), run(3, "b", 2, 5, 15)];
    expect(killFigures(handled, new Set([1]))).toEqual({ doubleClaims: 1, dupWithoutCrash: 1 });
    expect(killFigures(handled, new Set([1, 2]))).toEqual({ doubleClaims: 1, dupWithoutCrash: 0 });
    expect(killFigures(handled.slice(0, 3), new Set([1]))).toEqual({ doubleClaims: 0, dupWithoutCrash: 0 });
  });
});

describe("seededRandom", () => {
  it("draws the same sequence from one seed, another from another, all in [0, 1)", () => {
    const draws = (seed: number) => Array.from({ length: 20 }, seededRandom(seed));
    expect(draws(7)).toEqual(draws(7));
    expect(draws(7)).not.toEqual(draws(8));
    expect(draws(7).every((x) => x >= 0 && x < 1)).toBe(true);
  });
});
