// Push subscriptions delivering to a real local HTTP receiver.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { useCorq, sleep } from "./helpers/corq.js";
import { firstDeliveries, startReceiver } from "./helpers/receiver.js";
import { reportScenario, tally } from "./helpers/chaos.js";

const open = useCorq();
let secret: string | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => (receiver = await startReceiver(() => secret)));
afterAll(() => receiver.close());
beforeEach(() => receiver.reset());

const push = (extra: Record<string, unknown> = {}) => ({
  deliver: { url: receiver.url, timeoutMs: 2000 },
  ...extra,
});

/** Consume with `n` concurrent consumers until nothing is ready for `quietMs`; fails after `timeoutMs`. */
async function consumeAll(corq: { consume(name: string): Promise<unknown> }, name: string, n = 1, quietMs = 0, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  await Promise.all(
    Array.from({ length: n }, async () => {
      let idleSince = Date.now();
      for (;;) {
        if (Date.now() > deadline) throw new Error(`"${name}" still had batches ready after ${timeoutMs} ms`);
        if ((await corq.consume(name)) !== null) idleSince = Date.now();
        else if (Date.now() - idleSince >= quietMs) return;
        else await sleep(10);
      }
    }),
  );
}

describe("push subscriptions", () => {
  it("delivers every event of every key, per key in order, signed, one in-flight delivery per key", async () => {
    const { corq, another } = await open({ poolSize: 10 });
    const expected = new Map<string, number[]>();
    for (let round = 0; round < 5; round++) {
      const events = Array.from({ length: 40 }, (_, r) => ({ name: "Arrived", data: { roomId: `room-${r}`, round } }));
      const { positions } = await corq.append(`visitors-${round % 2}`, events);
      positions.forEach((p, r) => expected.set(`room-${r}`, [...(expected.get(`room-${r}`) ?? []), p]));
    }
    const created = await corq.putSubscription("rooms-hook", push({ key: "data.roomId", batchSize: 3 }));
    expect(created.created).toBe(true);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    secret = created.secret;
    expect(created.subscription).toMatchObject({ name: "rooms-hook", kind: "push", key: "data.roomId", deliver: { url: receiver.url, timeoutMs: 2000 } });
    expect(JSON.stringify(created.subscription)).not.toContain(created.secret);

    expect(await corq.advance()).toEqual({ "rooms-hook": 200 });
    receiver.behave(() => ({ delayMs: Math.random() * 5 }));
    const consumers = Array.from({ length: 8 }, () => another({ poolSize: 1 }));
    await Promise.all(consumers.map((c) => consumeAll(c, "rooms-hook")));

    expect(receiver.overlaps).toBe(0);
    expect(receiver.deliveries.every((d) => d.signatureValid)).toBe(true);
    expect(firstDeliveries(receiver.deliveries)).toEqual(expected);
    const first = receiver.deliveries[0];
    expect(first).toMatchObject({ subscription: "rooms-hook", attempt: 1, id: expect.stringMatching(/^msg_[0-9a-f]{32}$/) });
    expect(first.events[0]).toEqual({
      position: expect.any(Number), stream: expect.any(String), version: expect.any(Number), name: "Arrived",
      data: expect.any(Object), meta: {}, createdAt: expect.any(String),
    });
    expect(Math.abs(first.timestamp - Date.now() / 1000)).toBeLessThan(60);
    expect(await corq.subscription("rooms-hook")).toMatchObject({ pending: 0, keys: { ready: 0, leased: 0, backoff: 0, dead: 0 } });
  });

  it("replays the existing log with from: beginning, and not with from: now", async () => {
    const { corq } = await open();
    await corq.append("old", [{ name: "E", data: {} }]);
    secret = (await corq.putSubscription("replay", push({ from: "beginning" }))).secret;
    const now = await corq.putSubscription("fresh", push({ from: "now", deliver: { url: receiver.url, secret: secret! } }));
    expect(now.secret).toBe(secret); // a caller-chosen secret
    await corq.append("new", [{ name: "E", data: {} }]);
    expect(await corq.advance()).toEqual({ replay: 2, fresh: 1 });
    await consumeAll(corq, "replay");
    await consumeAll(corq, "fresh");
    const streams = (name: string) => receiver.deliveries.filter((d) => d.subscription === name).map((d) => d.key);
    expect(streams("replay").sort()).toEqual(["new", "old"]);
    expect(streams("fresh")).toEqual(["new"]);
  });

  it("retries a failing key with backoff, dead-letters it alone, and resumes it in order on retry or skip", async () => {
    const { corq } = await open();
    secret = (await corq.putSubscription("p", push({ maxAttempts: 3, backoff: { initialMs: 30, maxMs: 100, factor: 2 } }))).secret;
    const poison = await corq.append("poison", [{ name: "E", data: { n: 1 } }, { name: "E", data: { n: 2 } }, { name: "E", data: { n: 3 } }]);
    for (let i = 0; i < 10; i++) await corq.append(`ok-${i}`, [{ name: "E", data: {} }]);
    await corq.advance();
    let failing = true;
    receiver.behave((d) => (d.key === "poison" && failing ? { status: 503, body: { error: "down" } } : undefined));
    await consumeAll(corq, "p", 2, 400);
    expect((await corq.subscription("p")).keys).toMatchObject({ dead: 1, ready: 0, backoff: 0 });
    const attempts = receiver.deliveries.filter((d) => d.key === "poison");
    expect(attempts.map((d) => d.attempt)).toEqual([1, 2, 3]);
    // the retries carry the head event alone, under one stable webhook-id
    expect(attempts.map((d) => d.events.length)).toEqual([3, 1, 1]);
    expect(attempts[1].id).toBe(attempts[2].id);
    const otherKeysDone = new Set(receiver.deliveries.filter((d) => d.key.startsWith("ok-")).map((d) => d.key)).size;
    expect(otherKeysDone).toBe(10);
    const [dead] = await corq.deadLetters({ subscription: "p" });
    expect(dead).toMatchObject({ key: "poison", position: poison.positions[0], attempts: 3, lastError: 'Error: receiver answered 503: {"error":"down"}' });

    // skip the head, then the receiver recovers: 2 and 3 follow in order
    failing = false;
    receiver.reset();
    expect(await corq.releaseDeadLetters({ subscription: "p", key: "poison", mode: "skip" })).toEqual({ released: 1 });
    await consumeAll(corq, "p");
    expect(firstDeliveries(receiver.deliveries).get("poison")).toEqual(poison.positions.slice(1));
    reportScenario({
      scenario: "poison event",
      ...tally(new Map([["poison", poison.positions.slice(1)]]), receiver.deliveries.flatMap((d) => d.events.map((e) => ({ key: d.key, position: e.position })))),
      doubleClaims: receiver.overlaps,
      notes: { attempts_before_dead: attempts.length, other_keys_done: otherKeysDone },
    });
  });

  it("counts a timeout and a redirect as failed attempts", async () => {
    const { corq } = await open();
    secret = (await corq.putSubscription("slow", push({ maxAttempts: 5, deliver: { url: receiver.url, timeoutMs: 150 }, backoff: { initialMs: 0, maxMs: 0, factor: 1 } }))).secret;
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    receiver.behave(() => ({ delayMs: 400 }));
    expect(await corq.consume("slow")).toMatchObject({ outcome: "retry", error: "Error: delivery timed out after 150 ms" });
    receiver.behave(() => ({ status: 302 }));
    expect(await corq.consume("slow")).toMatchObject({ outcome: "retry", error: "Error: receiver answered 302" });
    receiver.behave(() => ({ body: { ok: true, padding: "x".repeat(200_000) } })); // oversized 2xx body: read capped, acked
    expect(await corq.consume("slow")).toMatchObject({ outcome: "acked" });
  });

  it("acks a prefix when the receiver answers { ackedThrough } and delivers the rest next", async () => {
    const { corq } = await open();
    secret = (await corq.putSubscription("partial", push())).secret;
    const { positions } = await corq.append("k", Array.from({ length: 5 }, () => ({ name: "E", data: {} })));
    await corq.advance();
    receiver.behave((d) => (d.events.length > 2 ? { body: { ackedThrough: d.events[1].position } } : undefined));
    await consumeAll(corq, "partial");
    expect(receiver.deliveries.map((d) => d.events.map((e) => e.position))).toEqual([positions, positions.slice(2), [positions[4]]]);
    // the first delivery of each batch has its own id; nothing was delivered twice
    expect(new Set(receiver.deliveries.map((d) => d.id)).size).toBe(3);
  });

  it("applies a changed filter or key from the current watermark, and deletes with its queue", async () => {
    const { corq, raw } = await open();
    secret = (await corq.putSubscription("evolving", push({ events: ["A"] }))).secret;
    await corq.append("s1", [{ name: "A", data: { room: "x" } }, { name: "B", data: { room: "x" } }]);
    await corq.advance();
    const updated = await corq.putSubscription("evolving", push({ events: ["A", "B"], key: "data.room" }));
    expect(updated.created).toBe(false);
    expect(updated.secret).toBeUndefined(); // shown once, at creation; the old one stays in force
    await corq.append("s2", [{ name: "B", data: { room: "x" } }]);
    await corq.advance();
    await consumeAll(corq, "evolving");
    // the A already queued keeps its stream key; the earlier B stays unmatched; the new B goes by room
    expect(receiver.deliveries.map((d) => [d.key, d.events.map((e) => e.name)])).toEqual([["s1", ["A"]], ["x", ["B"]]]);
    expect(receiver.deliveries.every((d) => d.signatureValid)).toBe(true);

    await corq.append("s3", [{ name: "A", data: { room: "y" } }]);
    await corq.advance();
    await corq.deleteSubscription("evolving");
    const { rows } = await raw.query("SELECT (SELECT count(*) FROM corq.queue)::int AS q, (SELECT count(*) FROM corq.keys)::int AS k, (SELECT count(*) FROM corq.subscriptions)::int AS s");
    expect(rows[0]).toEqual({ q: 0, k: 0, s: 0 });
    await expect(corq.deleteSubscription("evolving")).rejects.toMatchObject({ code: "unknown_subscription", status: 404 });
    await expect(corq.consume("evolving")).rejects.toMatchObject({ code: "unknown_subscription" });
  });

  it("rejects invalid configurations and names taken by code subscriptions, writing nothing", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "in-code", handle: () => undefined }] });
    const bad: unknown[] = [
      {},
      { deliver: { url: "ftp://example.com/x" } },
      { deliver: { url: "not a url" } },
      { deliver: { url: receiver.url, timeoutMs: 5000 }, leaseMs: 5000 },
      { deliver: { url: receiver.url }, key: "payload.x" },
      { deliver: { url: receiver.url }, batchSize: 0 },
      { deliver: { url: receiver.url }, unknownField: 1 },
      { deliver: { url: receiver.url }, from: "tomorrow" },
    ];
    for (const input of bad) {
      await expect(corq.putSubscription("hook", input), JSON.stringify(input)).rejects.toMatchObject({ code: "invalid_config", status: 400 });
    }
    await expect(corq.putSubscription("in-code", push())).rejects.toMatchObject({ code: "conflict", status: 409 });
    await expect(corq.deleteSubscription("in-code")).rejects.toMatchObject({ code: "conflict", status: 409 });
    const { rows } = await raw.query("SELECT name FROM corq.subscriptions");
    expect(rows).toEqual([{ name: "in-code" }]);
  });
});
