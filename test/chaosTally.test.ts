// The chaos suite's checker must be able to say no: loss, reordering and duplicates are counted.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { killFigures, seededRandom, tally, watchScenario } from "./helpers/chaos.js";
import { until } from "./helpers/until.js";

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

// A soak cut short (a time limit) printed nothing about why: a scenario says what went wrong the
// moment it sees it, one line on stderr, before its assertions and teardown.
describe("watchScenario", () => {
  const watched = (testTimeoutMs = 60_000) => {
    const lines: string[] = [];
    const watch = watchScenario("kills", { seed: 42, testTimeoutMs, write: (line) => lines.push(line) });
    return { watch, lines };
  };

  it("says what is wrong at once, with the scenario and the seed, on one line; says nothing when all is well", () => {
    const { watch, lines } = watched();
    expect(watch.expectZero({ lost: 0, order: 0 })).toBe(true);
    expect(watch.expectEqual("kills", 3, 3)).toBe(true);
    expect(lines).toEqual([]);
    expect(watch.expectZero({ lost: 2, order: 0, double_claims: 1 })).toBe(false);
    expect(watch.expectEqual("kills", 2, 3)).toBe(false);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^chaos FAILED kills seed=42: lost=2 double_claims=1 \(at \d+\.\d s\)\n$/);
    expect(lines[1]).toMatch(/^chaos FAILED kills seed=42: kills: 2, expected 3 /);
  });

  it("a wait that gives up says what it waited for and the last error, then throws it", async () => {
    const { watch, lines } = watched();
    await expect(
      watch.waitFor("all 10 events handled", async () => expect(7).toBe(10), { timeoutMs: 50, intervalMs: 10 }),
    ).rejects.toThrow("expected 7 to be 10");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^chaos FAILED kills seed=42: timeout after \d+\.\d s waiting for all 10 events handled: .*expected 7 to be 10/,
    );
    expect(lines[0]?.trimEnd()).not.toContain("\n");
  });

  it("a wait for progress lasts as long as the count climbs, and gives up (saying where it stood) once it stalls", async () => {
    const { watch, lines } = watched();
    // one step at each look (however slow the machine): no stall, whatever the time between looks
    let count = 0;
    await watch.waitForProgress("10 kills", () => ++count, 10, { stallMs: 100, intervalMs: 5 });
    expect(count).toBe(10);
    expect(lines).toEqual([]);

    const stuckAt = 3;
    await expect(watch.waitForProgress("10 kills", () => stuckAt, 10, { stallMs: 100, intervalMs: 5 })).rejects.toThrow(
      "no progress waiting for 10 kills: 3 of 10",
    );
    expect(lines).toEqual([
      expect.stringMatching(/^chaos FAILED kills seed=42: no progress for 0\.1 s waiting for 10 kills: 3 of 10 after /),
    ]);
  });

  it("a child that exits unless the scenario caused it is reported as it exits", async () => {
    const { watch, lines } = watched();
    const crashing = spawn(process.execPath, ["-e", "process.exit(3)"]);
    watch.watchChild(crashing, "consumer 1", () => false);
    const killed = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"]);
    watch.watchChild(killed, "consumer 2", (_code, signal) => signal === "SIGKILL");
    killed.kill("SIGKILL");
    await Promise.all([once(crashing, "exit"), once(killed, "exit")]);
    expect(lines).toEqual([
      expect.stringMatching(
        /^chaos FAILED kills seed=42: consumer 1 \(pid \d+\) exited unexpectedly: code=3 signal=null/,
      ),
    ]);
  });

  it("a scenario still running just before the test's limit says which step it is in", async () => {
    const { watch, lines } = watched(2100); // the watchdog fires 2 s before the limit: after 100 ms
    watch.step("waiting for 12 kills at a commit");
    await until(() => lines.length > 0, { timeoutMs: 5000, message: "the watchdog never spoke" });
    expect(lines[0]).toMatch(
      /^chaos FAILED kills seed=42: still waiting for 12 kills at a commit after \d+\.\d s: the test's limit is 2\.1 s/,
    );
  });
});
