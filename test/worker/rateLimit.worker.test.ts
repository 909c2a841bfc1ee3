// A rate limit as its receiver sees it (docs/flow-control.md, "Rate limits"; issue 49 item 2):
// 5 per second by subscription, 20 keys appended at once, a real HTTP receiver. No window of a
// second at the receiver sees more than 5 deliveries start (one more allowed for the jitter
// between a claim and its request's arrival), from an idle bucket too; with `burst: 5` the first
// 5 go at once and still no window sees more than 5. In workerd (`npm start`) and on
// `npm run serve` (the "serve" project in vitest.config.ts).
// On Workers the stack has no cron of its own: the test fires the scheduled handler every 150 ms
// (overlapping runs: several dispatches claim at once), standing in for a wake-up at the due time.
import { describe, expect, it } from "vitest";
import { useReceiver } from "../helpers/receiver.js";
import { eventually, runtime, useStack } from "../helpers/stack.js";
import { gaps, mostInWindow } from "../helpers/windows.js";

const { state, api } = useStack({ vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" } });
const hook = useReceiver();

const KEYS = 20;
const LIMIT = { events: 5, perMs: 1000, by: "subscription" } as const;
// the jitter between a claim (where the bucket is charged) and the request's arrival: one start more
const JITTER = 1;

/** Fires the Worker's scheduled handler every `everyMs`, at most 3 runs in flight, until stopped. */
function ticking(everyMs: number) {
  let inFlight = 0;
  const timer = setInterval(() => {
    if (inFlight >= 3) return;
    inFlight++;
    state.stack
      .runCron()
      .catch(() => undefined)
      .finally(() => inFlight--);
  }, everyMs);
  return () => clearInterval(timer);
}

/** Creates `name` with the limit, appends one event to each of 20 keys at once, and returns when each arrived. */
async function deliverAll(name: string, burst?: number): Promise<number[]> {
  const created = await api("PUT", `/subscriptions/${name}`, {
    body: {
      events: [name],
      batchSize: 1,
      from: "now",
      rateLimit: { ...LIMIT, ...(burst === undefined ? {} : { burst }) },
      deliver: { url: hook.receiver.url },
    },
  });
  expect(created.status).toBe(201);
  expect(created.json.rateLimit).toEqual({ ...LIMIT, burst: burst ?? 1 });
  hook.secret = created.json.secret;
  const stop = runtime === "worker" ? ticking(150) : () => undefined;
  try {
    const appends = await Promise.all(
      Array.from({ length: KEYS }, (_, i) =>
        api("POST", `/streams/${name}-${i}/events`, { body: { events: [{ name, data: { i } }] } }),
      ),
    );
    expect(appends.every((a) => a.status === 201)).toBe(true);
    const mine = () => hook.receiver.deliveries.filter((d) => d.subscription === name);
    await eventually(async () => expect(new Set(mine().map((d) => d.key)).size).toBe(KEYS), { timeoutMs: 25_000 });
    expect(mine()).toHaveLength(KEYS); // each key once: nothing failed, nothing sent twice
    expect(mine().every((d) => d.signatureValid && d.attempt === 1)).toBe(true);
    return mine()
      .map((d) => d.receivedAt)
      .sort((a, b) => a - b);
  } finally {
    stop();
  }
}

describe(`rate limits at the receiver (${runtime})`, () => {
  it("5 per second, 20 keys at once, an idle bucket: no second at the receiver sees more than 5 start", async () => {
    const starts = await deliverAll("Smooth");
    const { most, from } = mostInWindow(starts, LIMIT.perMs);
    const spacing = gaps(starts);
    console.log(
      `${runtime} smooth: most in a second ${most} (from +${from - (starts[0] ?? 0)} ms), 20 in ${(starts.at(-1) ?? 0) - (starts[0] ?? 0)} ms, smallest gap ${Math.min(...spacing)} ms`,
    );
    expect(most).toBeLessThanOrEqual(LIMIT.events + JITTER);
    // smooth: one every 200 ms, never three within 100 ms (an idle bucket's burst of 5 did that)
    expect(mostInWindow(starts, 100).most).toBeLessThanOrEqual(2);
  });

  it("with burst 5 the first 5 go at once, and still no second sees more than 5 start", async () => {
    const starts = await deliverAll("Bursty", 5);
    const first = starts.slice(0, 5);
    const spread = (first.at(-1) ?? 0) - (first[0] ?? 0);
    const { most } = mostInWindow(starts, LIMIT.perMs);
    console.log(
      `${runtime} burst 5: first 5 within ${spread} ms, the 6th ${(starts[5] ?? 0) - (starts[0] ?? 0)} ms after the first, most in a second ${most}`,
    );
    expect(spread).toBeLessThan(150);
    expect(most).toBeLessThanOrEqual(LIMIT.events + JITTER);
    // the 6th waits for the first 5 to leave the window (the spacing alone would send it 200 ms after)
    expect((starts[5] ?? 0) - (starts[0] ?? 0)).toBeGreaterThan(LIMIT.perMs - 150);
    // 20 at 5 per second: the last a good 3 s after the first
    expect((starts.at(-1) ?? 0) - (starts[0] ?? 0)).toBeGreaterThan(3 * LIMIT.perMs - 150);
  });

  it("refuses a burst above the limit's events, or below 1, with a problem that names it", async () => {
    for (const burst of [0, 6, 1.5, "2"]) {
      const refused = await api("PUT", "/subscriptions/Refused", {
        body: { events: ["Refused"], rateLimit: { ...LIMIT, burst }, deliver: { url: hook.receiver.url } },
      });
      expect(refused.status).toBe(400);
      expect(refused.type).toContain("application/problem+json");
      expect(JSON.stringify(refused.json)).toMatch(/burst/);
    }
    expect((await api("GET", "/subscriptions/Refused")).status).toBe(404);
  });
});
