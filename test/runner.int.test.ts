// serve's runner (src/node/runner.ts) in-process, on a real Corq and database: how many drains a
// wake-up starts for a backlog of ready keys.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createExecutor } from "../src/db/executor.js";
import { createRunner } from "../src/node/runner.js";
import { nextDue } from "../src/sql/consume/nextDue.js";
import { sleep, useCorq } from "./helpers/corq.js";
import { eventually } from "./helpers/stack.js";

const open = useCorq();

/** serve's runner over one code subscription, on a pool of its own; no safety-net tick within a test. */
function startRunner(
  corq: Parameters<typeof createRunner>[0]["corq"],
  url: string,
  options: { subscription: string; concurrency: number; keysPerClaim: number; log?: (line: string) => void },
) {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const runner = createRunner({
    corq,
    db: createExecutor(pool),
    codeSubscriptions: [options.subscription],
    concurrency: options.concurrency,
    keysPerClaim: options.keysPerClaim,
    replayKeys: 1,
    budgetMs: 10_000,
    safetyNetMs: 3_600_000,
    log: options.log ?? (() => undefined),
  });
  return { pool, runner };
}

describe("serve's runner", () => {
  it("a 'ready' wake-up over a backlog fills every consumer's claim: 2 consumers × 2 keys = 4 handlers at once", async () => {
    let running = 0;
    let most = 0;
    let handled = 0;
    const { corq, url } = await open({
      subscriptions: [
        {
          name: "slow",
          handle: async () => {
            most = Math.max(most, ++running);
            await sleep(300);
            running--;
            handled++;
          },
        },
      ],
    });
    for (let i = 0; i < 8; i++) await corq.append(`k${i}`, [{ name: "E", data: {} }]);
    await corq.advance(); // 8 keys ready before the runner starts: its check finds them
    const { pool, runner } = startRunner(corq, url, { subscription: "slow", concurrency: 2, keysPerClaim: 2 });
    try {
      runner.wake("ready");
      await eventually(async () => expect(handled).toBe(8), { timeoutMs: 10_000 });
      expect(most).toBe(4);
    } finally {
      await runner.stop({ boundMs: 1000, graceMs: 100 });
      await pool.end();
    }
  });

  it("the next due time counts a key that came due just now (after the drains' last claim), not one ready long ago", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.advance();
    const dueIn = async (recentMs: number) => {
      const [row] = await createExecutor(raw).run<{ due_in_ms: number | null }>(nextDue(["s"], { recentMs }));
      return row?.due_in_ms ?? null;
    };
    await raw.query("UPDATE corq.keys SET available_at = now() - interval '100 milliseconds'");
    expect(await dueIn(0)).toBeNull(); // what the runner read before: it slept to the safety net
    expect(await dueIn(250)).toBeLessThanOrEqual(0); // look now
    await raw.query("UPDATE corq.keys SET available_at = now() - interval '10 seconds'");
    expect(await dueIn(250)).toBeNull(); // a consumer looked then: no wake-up over and over
    await raw.query("UPDATE corq.keys SET available_at = now() + interval '10 seconds'");
    expect(await dueIn(250)).toBeGreaterThan(9000);
  });

  // a due time in ms past 2^31 (24.8 days) overflowed an int: every idle pass of serve's runner
  // logged "reading the next due time failed: integer out of range" after a long delay
  it("the next due time a year away is read (no integer overflow), and the runner logs nothing", async () => {
    const year = 366 * 24 * 3600 * 1000;
    const { corq, url, raw } = await open({
      subscriptions: [{ name: "s", maxDelayMs: year, handle: () => undefined }],
    });
    const lines: string[] = [];
    const { pool, runner } = startRunner(corq, url, {
      subscription: "s",
      concurrency: 1,
      keysPerClaim: 1,
      log: (line) => lines.push(line),
    });
    try {
      await corq.append("a", [{ name: "E", data: {}, delayMs: year }]);
      runner.wake("append");
      await eventually(async () => expect(await corq.key("s", "a")).toMatchObject({ status: "backoff", pending: 1 }), {
        timeoutMs: 10_000,
      });
      await raw.query("UPDATE corq.keys SET available_at = now() + interval '366 days'");
      const [row] = await createExecutor(raw).run<{ due_in_ms: number | null }>(nextDue(["s"]));
      expect(row?.due_in_ms).toBeGreaterThan(year - 60_000);
      expect(row?.due_in_ms).toBeLessThanOrEqual(year + 1000);
      runner.recheck(); // an idle pass reads the next due time
      await sleep(500);
      expect(lines).toEqual([]);
    } finally {
      await runner.stop({ boundMs: 1000, graceMs: 100 });
      await pool.end();
    }
  });

  it("a 'ready' wake-up starts one drain per keysPerClaim ready keys: 10 keys, 4 per claim, 3 drains of 8 slots", async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let running = 0;
    const { corq, url } = await open({
      subscriptions: [
        {
          name: "held",
          handle: async () => {
            running++;
            await held;
          },
        },
      ],
    });
    for (let i = 0; i < 10; i++) await corq.append(`k${i}`, [{ name: "E", data: {} }]);
    await corq.advance(); // 10 keys ready before the runner starts: its check finds them
    const { pool, runner } = startRunner(corq, url, { subscription: "held", concurrency: 8, keysPerClaim: 4 });
    try {
      runner.wake("ready");
      // every key's handler runs (and waits): the drains took them 4, 4 and 2
      await eventually(async () => expect(running).toBe(10), { timeoutMs: 10_000 });
      expect(runner.busy()).toBe(3);
    } finally {
      release();
      await runner.stop({ boundMs: 1000, graceMs: 100 });
      await pool.end();
    }
  });
});
