// Chunks sized to take about 100 ms each (src/chunkSizer.ts): from the rate of the last one, at
// most doubling, within [min, max].
import { describe, expect, it } from "vitest";
import { chunkSizer } from "../src/chunkSizer.js";

/** The sizes a sizer gives when each chunk takes `msPerRow` per row. */
function sizes(options: Parameters<typeof chunkSizer>[0], msPerRow: number, chunks: number): number[] {
  const sizer = chunkSizer(options);
  const seen: number[] = [];
  for (let i = 0; i < chunks; i++) {
    seen.push(sizer.size);
    sizer.took(sizer.size * msPerRow);
  }
  return seen;
}

describe("chunkSizer", () => {
  it("grows by doubling while chunks are fast, up to max", () => {
    // 0.01 ms a row: 10,000 rows would fit in 100 ms; max 5,000
    expect(sizes({ first: 500, max: 5000 }, 0.01, 5)).toEqual([500, 1000, 2000, 4000, 5000]);
  });

  it("shrinks at once to what fits in 100 ms when chunks are slow", () => {
    // 0.2 ms a row (5,000 rows: 1 s, as a loaded machine took): 500 rows fit
    expect(sizes({ first: 5000, max: 5000 }, 0.2, 3)).toEqual([5000, 500, 500]);
  });

  it("never goes below min, nor above max, nor starts outside them", () => {
    expect(sizes({ first: 500, min: 100, max: 5000 }, 10, 2)).toEqual([500, 100]);
    expect(sizes({ first: 50_000, max: 2000 }, 0, 2)).toEqual([2000, 2000]);
    // a caller's chunk smaller than the default min (tests use 2): that is the size
    expect(sizes({ first: 2, max: 2 }, 1000, 2)).toEqual([2, 2]);
  });

  it("starts at 500 when not told, or at max when that is less", () => {
    expect(sizes({ max: 5000 }, 0.01, 2)).toEqual([500, 1000]);
    expect(sizes({ max: 200 }, 0.01, 2)).toEqual([200, 200]);
  });

  it("takes another target", () => {
    expect(sizes({ first: 1000, max: 10_000, targetMs: 50 }, 0.1, 2)).toEqual([1000, 500]);
  });
});
