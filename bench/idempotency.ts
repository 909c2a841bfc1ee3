// The cost of an idempotency key on an append (issue 32's target: ≤ 20% of an append's time):
// single-event appends by the library, each to its own stream, with and without
// `idempotencyKey`, in alternating rounds on one database (so both see the same table sizes
// and the same machine), one at a time (the time of an append, not a throughput).
import { loadavg } from "node:os";
import { createCorq } from "../src/index.js";
import { startServe } from "../src/node/serve.js";
import { percentile } from "./stats.js";

export interface IdempotencyRun {
  appends: number;
  plainP50Ms: number;
  keyedP50Ms: number;
  plainMeanMs: number;
  keyedMeanMs: number;
  /** keyed p50 ÷ plain p50 − 1 */
  cost: number;
  /** the same over HTTP (POST /streams/:stream/events to one serve process, with and without the header) */
  http: { plainP50Ms: number; keyedP50Ms: number; cost: number };
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
    const http = await overHttp(databaseUrl, appends);
    return {
      http: {
        plainP50Ms: percentile(sorted(http.plain), 50),
        keyedP50Ms: percentile(sorted(http.keyed), 50),
        cost: percentile(sorted(http.keyed), 50) / percentile(sorted(http.plain), 50) - 1,
      },
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

const TOKEN = "bench-admin-token-0123456789abcdef0123";

/** The same alternation over HTTP: one serve process (the API only), one request at a time. */
async function overHttp(databaseUrl: string, appends: number) {
  const serve = await startServe({
    subscriptions: [],
    env: { DATABASE_URL: databaseUrl, PORT: "0", CORQ_ADMIN_TOKEN: TOKEN },
    role: "api",
    log: () => undefined,
  });
  const plain: number[] = [];
  const keyed: number[] = [];
  const post = async (stream: string, key?: string) => {
    const started = performance.now();
    const response = await fetch(`${serve.url}/streams/${stream}/events`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TOKEN}`,
        "content-type": "application/json",
        ...(key === undefined ? {} : { "idempotency-key": key }),
      },
      body: JSON.stringify({ events: [{ name: "E", data: { stream } }] }),
    });
    await response.arrayBuffer();
    if (response.status !== 201) throw new Error(`append over HTTP: ${response.status}`);
    return performance.now() - started;
  };
  try {
    for (let i = 0; i < 200; i++) await post(`hwarm-${i}`, i % 2 ? `hwarm-${i}` : undefined);
    for (let n = 0; n < appends; n += 100) {
      for (let i = n; i < n + 100; i++) plain.push(await post(`hplain-${i}`));
      for (let i = n; i < n + 100; i++) keyed.push(await post(`hkeyed-${i}`, `hkey-${i}`));
    }
    return { plain, keyed };
  } finally {
    await serve.stop();
  }
}
