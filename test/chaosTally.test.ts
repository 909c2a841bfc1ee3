// The chaos suite's checker must be able to say no: loss, reordering and duplicates are counted.
import { describe, expect, it } from "vitest";
import { tally } from "./helpers/chaos.js";

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
});
