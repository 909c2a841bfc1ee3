// The cost of an idempotency key on an append (issue 32's target: ≤ 20% of an append's time):
// single-event appends by the library, each to its own stream, with and without
// `idempotencyKey`, in alternating rounds on one database (so both see the same table sizes
// and the same machine), one at a time (the time of an append, not a throughput).
import { loadavg } from "node:os";
import { createCorq } from "../src/index.js";
import { percentile } from "./stats.js";

export interface IdempotencyRun {
  appends: number;
  plainP50Ms: number;
  keyedP50Ms: number;
  plainMeanMs: number;
  keyedMeanMs: number;
  /** keyed p50 ÷ plain p50 − 1 */
  cost: number;
  load: { start: number; end: number };
}

export async function idempotencyCost(databaseUrl: string, { appends }: { appends: number }): Promise<IdempotencyRun> {
  const loadStart = loadavg()[0] ?? 0;
  const corq = createCorq({ databaseUrl, poolSize: 1 });
  try {
    await corq.migrate();
    const plain: number[] = [];
    const keyed: number[] = [];
    const round = 100;
    // a warm-up of both, not counted
    for (let i = 0; i < 200; i++)
      await corq.append(`warm-${i}`, [{ name: "E", data: { i } }], i % 2 ? { idempotencyKey: `warm-${i}` } : {});
    for (let n = 0; n < appends; n += round) {
      for (const [times, withKey] of [
        [plain, false],
        [keyed, true],
      ] as const) {
        for (let i = n; i < n + round; i++) {
          const started = performance.now();
          await corq.append(
            `${withKey ? "keyed" : "plain"}-${i}`,
            [{ name: "E", data: { i } }],
            withKey ? { idempotencyKey: `key-${i}` } : {},
          );
          times.push(performance.now() - started);
        }
      }
    }
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const plainP50Ms = percentile(sorted(plain), 50);
    const keyedP50Ms = percentile(sorted(keyed), 50);
    return {
      appends,
      plainP50Ms,
      keyedP50Ms,
      plainMeanMs: mean(plain),
      keyedMeanMs: mean(keyed),
      cost: keyedP50Ms / plainP50Ms - 1,
      load: { start: loadStart, end: loadavg()[0] ?? 0 },
    };
  } finally {
    await corq.close();
  }
}
