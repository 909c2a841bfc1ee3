// Wake-ups at the due time on Workers (src/http/wakeUps.ts, functions/wakeUps.ts): the Worker in
// workerd with this repository's wrangler.toml (its CORQ_WAKE_UPS Durable Object) and the cron at
// its deployed pace, once a minute. A delay, a backoff and a rate limit's room each end while
// nothing is appended; without the wake-ups each would wait for the next cron (up to 60 s).
// The bounds are the targets; the cron-only behaviour lands 10-60 s late and fails them.
import { describe, expect, it } from "vitest";
import { useReceiver, type Delivery } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

const { state, api } = useStack({ vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" }, cronIntervalMs: 60_000 });
const hook = useReceiver();

async function subscribe(name: string, settings: Record<string, unknown>) {
  const created = await api("PUT", `/subscriptions/${name}`, {
    body: {
      events: [name],
      key: "data.k",
      from: "now",
      deliver: { url: hook.receiver.url, timeoutMs: 5000 },
      ...settings,
    },
  });
  expect(created.status).toBe(201);
  hook.secret = created.json.secret;
}

const deliveriesOf = (name: string): Delivery[] => hook.receiver.deliveries.filter((d) => d.subscription === name);

async function append(name: string, events: Record<string, unknown>[]): Promise<number> {
  const sentAt = Date.now();
  const answer = await api("POST", `/streams/${name}-1/events`, { body: { events } });
  expect(answer.status).toBe(201);
  return sentAt;
}

describe("wake-ups at the due time, with the cron once a minute", () => {
  it("the stack has the binding: GET /doctor does not say that wake-ups wait for the cron", async () => {
    const { json } = await api("GET", "/doctor");
    expect(json.findings.map((f: { code: string }) => f.code)).not.toContain("wake_ups_wait_for_cron");
  });

  it("a delayed event (3 s) is delivered 3.0-4.0 s after its append", async () => {
    await subscribe("wake-delay", {});
    const appendedAt = await append("wake-delay", [{ name: "wake-delay", data: { k: "a" }, delayMs: 3000 }]);
    await eventually(async () => expect(deliveriesOf("wake-delay")).toHaveLength(1), { timeoutMs: 10_000 });
    const late = (deliveriesOf("wake-delay")[0]?.receivedAt ?? 0) - appendedAt;
    console.log(`wake-ups: delay 3000 ms delivered after ${late} ms`);
    expect(late).toBeGreaterThanOrEqual(3000);
    expect(late).toBeLessThanOrEqual(4000);
  }, 30_000);

  it("a key that failed once (backoff.initialMs 1,000) is delivered again 1.0-2.0 s later", async () => {
    await subscribe("wake-backoff", { backoff: { initialMs: 1000, maxMs: 60_000, factor: 2 } });
    hook.receiver.behave((d) =>
      d.subscription === "wake-backoff" && deliveriesOf("wake-backoff").length === 1 ? { status: 500 } : undefined,
    );
    try {
      await append("wake-backoff", [{ name: "wake-backoff", data: { k: "b" } }]);
      await eventually(async () => expect(deliveriesOf("wake-backoff")).toHaveLength(2), { timeoutMs: 10_000 });
    } finally {
      hook.receiver.behave(() => undefined);
    }
    const [failed, again] = deliveriesOf("wake-backoff");
    const after = (again?.receivedAt ?? 0) - (failed?.finishedAt ?? Number.POSITIVE_INFINITY);
    console.log(`wake-ups: backoff 1000 ms delivered again after ${after} ms`);
    expect(again?.attempt).toBe(2);
    expect(after).toBeGreaterThanOrEqual(1000);
    expect(after).toBeLessThanOrEqual(2000);
  }, 30_000);

  it("a rate limit of 5 per second drains 20 queued keys in 3-5 s", async () => {
    await subscribe("wake-rate", { rateLimit: { events: 5, perMs: 1000, by: "subscription" } });
    const events = Array.from({ length: 20 }, (_, i) => ({ name: "wake-rate", data: { k: `r${i}` } }));
    const appendedAt = await append("wake-rate", events);
    await eventually(async () => expect(new Set(deliveriesOf("wake-rate").map((d) => d.key)).size).toBe(20), {
      timeoutMs: 12_000,
    });
    const took = Math.max(...deliveriesOf("wake-rate").map((d) => d.receivedAt)) - appendedAt;
    const offsets = deliveriesOf("wake-rate").map((d) => d.receivedAt - appendedAt);
    console.log(`wake-ups: 20 keys at 5 per second drained in ${took} ms (deliveries at ${offsets.join(", ")} ms)`);
    expect(took).toBeGreaterThanOrEqual(3000);
    expect(took).toBeLessThanOrEqual(5000);
  }, 30_000);

  it("a consumer invocation that leaves a key in backoff (3 s) wakes the deployment at its time", async () => {
    // every consumer slot held: no kick or wake-up consumes; this test's own consumer (slot 1) does,
    // and its end is the only one that knows of the backoff. First the consumers above end (one
    // that ends frees its slot).
    await eventually(
      async () => {
        const { rows } = await state.db.query("SELECT slot FROM corq.consumer_slots WHERE busy_until > now()");
        expect(rows).toEqual([]);
      },
      { timeoutMs: 20_000 },
    );
    await state.db.query("UPDATE corq.consumer_slots SET busy_until = now() + interval '1 hour'");
    try {
      await subscribe("wake-consumer", { backoff: { initialMs: 3000, maxMs: 60_000, factor: 2 } });
      hook.receiver.behave((d) =>
        d.subscription === "wake-consumer" && deliveriesOf("wake-consumer").length === 1 ? { status: 500 } : undefined,
      );
      await append("wake-consumer", [{ name: "wake-consumer", data: { k: "c" } }]);
      // enqueued by the append's kick (in its background)
      await eventually(async () => {
        const { rows } = await state.db.query(
          "SELECT 1 FROM corq.keys k JOIN corq.subscriptions s ON s.id = k.subscription_id WHERE s.name = 'wake-consumer' AND k.available_at IS NOT NULL",
        );
        expect(rows).toHaveLength(1);
      });
      const consumed = await api("POST", "/consume/wake-consumer", {
        headers: { "corq-slot": "1", "corq-budget-ms": "5000" },
      });
      expect(consumed.json).toMatchObject({ batches: 1 });
      await eventually(async () => expect(deliveriesOf("wake-consumer")).toHaveLength(2), { timeoutMs: 10_000 });
    } finally {
      hook.receiver.behave(() => undefined);
      await state.db.query("UPDATE corq.consumer_slots SET busy_until = NULL");
    }
    const [failed, again] = deliveriesOf("wake-consumer");
    const after = (again?.receivedAt ?? 0) - (failed?.finishedAt ?? Number.POSITIVE_INFINITY);
    console.log(`wake-ups: backoff 3000 ms (a consumer invocation's) delivered again after ${after} ms`);
    expect(after).toBeGreaterThanOrEqual(3000);
    expect(after).toBeLessThanOrEqual(4000);
  }, 45_000);

  it("nothing due, nothing woken: once the work above is done, no wake-up runs a statement", async () => {
    // the last consumers finish (a slot freed, a last look, the next due time)
    await eventually(
      async () => {
        const before = state.stack.httpStatements();
        await new Promise((resolve) => setTimeout(resolve, 1000));
        expect(state.stack.httpStatements() - before).toBe(0);
      },
      { timeoutMs: 10_000 },
    );
    const before = state.stack.httpStatements();
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(state.stack.httpStatements() - before).toBe(0);
  }, 20_000);
});
