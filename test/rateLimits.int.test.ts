// Rate limits (docs/flow-control.md): at most `events` delivered per `perMs` for each key, each
// tenant or the whole subscription, decided in the database — several consumers, several
// instances, one limit. Over it keys wait, ready again when their bucket has room: no failure,
// no attempt counted. The claim is one statement shared by `consume` and `drain`: both are run.
import { describe, expect, it } from "vitest";
import type { DeliveredEvent, SubscriptionDefinition } from "../src/index.js";
import { CorqError } from "../src/index.js";
import { createExecutor } from "../src/db/executor.js";
import { claimBatch } from "../src/sql/consume/claimBatch.js";
import { sleep, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { waitingOnLock } from "./helpers/waitingOnLock.js";
import { gaps, mostInWindow } from "./helpers/windows.js";

const open = useCorq();
const MINUTE = 60_000;

function recorder() {
  const handled: { key: string; events: number; tenant: string }[] = [];
  const handle = (events: DeliveredEvent[], ctx: { key: string }) => {
    handled.push({
      key: ctx.key,
      events: events.length,
      tenant: String((events[0]?.data as { tenant?: string } | undefined)?.tenant),
    });
  };
  const count = (key?: string) =>
    handled.filter((h) => key === undefined || h.key === key).reduce((n, h) => n + h.events, 0);
  return { handled, handle, count };
}

const subscription = (
  handle: SubscriptionDefinition["handle"],
  more: Partial<SubscriptionDefinition>,
): SubscriptionDefinition => ({ name: "s", key: "stream", handle, ...more });

/** Runs the path's consumer until it finds nothing: `drain`, or `consume` one batch at a time. */
async function consumeAll(
  corq: { drain(s: string): Promise<unknown>; consume(s: string): Promise<unknown> },
  path: "drain" | "consume",
) {
  if (path === "drain") await corq.drain("s");
  else while ((await corq.consume("s")) !== null);
}

describe("rate limits", () => {
  for (const path of ["drain", "consume"] as const) {
    it(`by key: each key at most its limit, smaller batches, the rest waits without an attempt (${path})`, async () => {
      const { handle, count } = recorder();
      const { corq } = await open({
        subscriptions: [subscription(handle, { rateLimit: { events: 2, perMs: MINUTE, by: "key", burst: 2 } })],
      });
      await corq.append(
        "a",
        Array.from({ length: 5 }, () => ({ name: "E", data: {} })),
      );
      await corq.append(
        "b",
        Array.from({ length: 3 }, () => ({ name: "E", data: {} })),
      );
      await corq.advance();
      await consumeAll(corq, path);
      await consumeAll(corq, path);
      expect([count("a"), count("b")]).toEqual([2, 2]);
      const a = await corq.key("s", "a");
      expect(a).toMatchObject({ status: "backoff", attempts: 0, pending: 3 });
      expect(a.reason).toMatch(/^waiting until .+ for its rate limit: 2 events per 60000 ms by key, burst 2$/);
      // the burst of 2 took the window's room: a minute (and a second for the receiver's jitter)
      const waits = new Date(a.availableAt ?? 0).getTime() - Date.now();
      expect(waits).toBeGreaterThan(20_000);
      expect(waits).toBeLessThanOrEqual(MINUTE + 1000);
      expect((await corq.subscription("s")).keys).toMatchObject({ waiting: 2, ready: 0 });
    });

    it(`by subscription: one limit across every key (${path})`, async () => {
      const { handle, count } = recorder();
      const { corq } = await open({
        subscriptions: [
          subscription(handle, { rateLimit: { events: 3, perMs: MINUTE, by: "subscription", burst: 3 } }),
        ],
      });
      for (const stream of ["a", "b", "c", "d", "e"]) await corq.append(stream, [{ name: "E", data: {} }]);
      await corq.advance();
      await consumeAll(corq, path);
      expect(count()).toBe(3);
      const waiting = (await corq.keys("s")).filter((k) => k.status === "backoff");
      expect(waiting.map((k) => k.attempts)).toEqual([0, 0]);
    });
  }

  it("by tenant: each tenant its own limit", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({
      subscriptions: [
        subscription(handle, {
          tenant: "data.tenant",
          rateLimit: { events: 2, perMs: MINUTE, by: "tenant", burst: 2 },
        }),
      ],
    });
    for (const tenant of ["x", "y"])
      for (let i = 0; i < 3; i++) await corq.append(`${tenant}-${i}`, [{ name: "E", data: { tenant } }]);
    await corq.advance();
    await corq.drain("s");
    expect(handled.filter((h) => h.tenant === "x").length).toBe(2);
    expect(handled.filter((h) => h.tenant === "y").length).toBe(2);
  });

  it("several instances draining at once never deliver more than the limit", async () => {
    const { handle, count } = recorder();
    const definition = subscription(handle, {
      rateLimit: { events: 10, perMs: MINUTE, by: "subscription", burst: 10 },
    });
    const { corq, another } = await open({ subscriptions: [definition] });
    for (let i = 0; i < 60; i++) await corq.append(`k${i}`, [{ name: "E", data: {} }]);
    await corq.advance();
    const instances = [corq, ...Array.from({ length: 3 }, () => another({ subscriptions: [definition] }))];
    await Promise.all(instances.flatMap((c) => [c.drain("s", { keysPerClaim: 4 }), c.drain("s", { keysPerClaim: 2 })]));
    expect(count()).toBe(10);
  });

  it("a claim sees the room another claim took while it waited for the bucket (not its statement's snapshot)", async () => {
    const { handle, count } = recorder();
    const { corq, raw } = await open({
      subscriptions: [subscription(handle, { rateLimit: { events: 3, perMs: MINUTE, by: "subscription", burst: 3 } })],
    });
    for (const stream of ["a", "b", "c", "d"]) await corq.append(stream, [{ name: "E", data: {} }]);
    await corq.advance();
    const id = (await raw.query("SELECT id FROM corq.subscriptions WHERE name = 's'")).rows[0].id;
    await raw.query("SELECT corq.rate_take($1, 's', 3, 60000, 3, 0)", [id]); // the bucket, full
    // another claim in its turn, by hand: it holds the bucket's row …
    const other = await raw.connect();
    try {
      await other.query("BEGIN");
      await other.query("SELECT 1 FROM corq.rate_buckets WHERE subscription_id = $1 FOR UPDATE", [id]);
      // … ours starts and waits for it …
      const ours = corq.drain("s");
      await waitingOnLock(raw, "tenant_weights, rate_limit");
      // … while the other takes 2 of the 3 events' room (20 s each) and commits
      await other.query("UPDATE corq.rate_buckets SET tat = now() + interval '40 seconds' WHERE subscription_id = $1", [
        id,
      ]);
      await other.query("COMMIT");
      // ours reads the bucket after its turn came: one event's room is left
      await ours;
    } finally {
      other.release();
    }
    expect(count()).toBe(1);
  });

  it("a key over its limit goes again once its bucket has room, in order", async () => {
    const seqs: number[] = [];
    const { corq } = await open({
      subscriptions: [
        subscription((events) => void seqs.push(...events.map((e) => e.seq)), {
          rateLimit: { events: 2, perMs: 300, by: "key" },
        }),
      ],
    });
    await corq.append(
      "a",
      Array.from({ length: 6 }, () => ({ name: "E", data: {} })),
    );
    await corq.advance();
    await until(
      async () => {
        await corq.drain("s");
        return seqs.length === 6;
      },
      { message: "the limited key never went on" },
    );
    expect(seqs).toEqual([1, 2, 3, 4, 5, 6]);
    expect((await corq.key("s", "a")).attempts).toBe(0);
  });

  it("a bucket's room goes first to the key that has waited longest, whatever its name", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({
      subscriptions: [subscription(handle, { rateLimit: { events: 1, perMs: MINUTE, by: "subscription" } })],
    });
    await corq.append("z", [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.drain("s"); // one claim takes both keys; the room is one event
    expect(handled.map((h) => h.key)).toEqual(["z"]);
    expect(await corq.key("s", "a")).toMatchObject({ status: "backoff", attempts: 0, pending: 1 });
  });

  it("a bucket's limited keys wait one behind the other, each for its own room", async () => {
    const { handle, count } = recorder();
    const { corq } = await open({
      subscriptions: [subscription(handle, { rateLimit: { events: 1, perMs: MINUTE, by: "subscription" } })],
    });
    for (const stream of ["a", "b", "c"]) await corq.append(stream, [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.drain("s");
    expect(count()).toBe(1);
    const waits = (await corq.keys("s"))
      .filter((k) => k.status === "backoff")
      .map((k) => new Date(k.availableAt ?? 0).getTime())
      .sort((x, y) => x - y);
    expect(waits).toHaveLength(2);
    // the second waits one more event's room (60 s / 1) after the first
    expect(Math.abs((waits[1] ?? 0) - (waits[0] ?? 0) - MINUTE)).toBeLessThan(5);
  });

  it("a batch is charged what it carries: after a lost lease, the one event it is retried with", async () => {
    const { handled, handle, count } = recorder();
    const { corq, raw } = await open({
      subscriptions: [
        subscription(handle, {
          batchSize: 3,
          leaseMs: 200,
          rateLimit: { events: 6, perMs: MINUTE, by: "key", burst: 6 },
        }),
      ],
    });
    await corq.append(
      "a",
      Array.from({ length: 8 }, () => ({ name: "E", data: {} })),
    );
    await corq.advance();
    // claimed (3 events charged) by a consumer that then crashes; its lease runs out
    await createExecutor(raw).run(claimBatch("s", { limit: 1 }));
    await sleep(300);
    await consumeAll(corq, "consume");
    // the retry carries 1 event (charged 1), the next batch the 2 left of the minute's 6
    expect(handled.map((h) => h.events)).toEqual([1, 2]);
    expect(count("a")).toBe(3);
    expect(await corq.key("s", "a")).toMatchObject({ status: "backoff", attempts: 0, pending: 5 });
  });

  it("each subscription's limit is its own", async () => {
    const one = recorder();
    const two = recorder();
    const limit = { events: 2, perMs: MINUTE, by: "subscription", burst: 2 } as const;
    const { corq } = await open({
      subscriptions: [
        subscription(one.handle, { name: "s", rateLimit: limit }),
        subscription(two.handle, { name: "t", rateLimit: limit }),
      ],
    });
    for (const stream of ["a", "b", "c"]) await corq.append(stream, [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.drain("s");
    await corq.drain("t");
    expect([one.count(), two.count()]).toEqual([2, 2]);
  });

  it("holds across housekeeping: a tenant's bucket stays while the tenant is not idle", async () => {
    const { handle, count } = recorder();
    const { corq } = await open({
      subscriptions: [
        subscription(handle, {
          tenant: "data.tenant",
          rateLimit: { events: 2, perMs: MINUTE, by: "tenant", burst: 2 },
        }),
      ],
    });
    for (const stream of ["x-0", "x-1"]) await corq.append(stream, [{ name: "E", data: { tenant: "x" } }]);
    await corq.advance();
    await corq.drain("s");
    expect(count()).toBe(2);
    await corq.housekeeping(); // the tenant was served just now: not idle (keyIdleMs, 7 days)
    for (const stream of ["x-2", "x-3"]) await corq.append(stream, [{ name: "E", data: { tenant: "x" } }]);
    await corq.advance();
    await corq.drain("s");
    expect(count()).toBe(2);
    expect((await corq.subscription("s")).keys).toMatchObject({ waiting: 2 });
  });

  // --- burst (issue 49 item 2): by default no window of perMs sees more than `events` start ---
  for (const path of ["drain", "consume"] as const) {
    it(`an idle bucket takes one event by default, the next one perMs / events later (${path})`, async () => {
      const { handle, count } = recorder();
      const { corq } = await open({
        subscriptions: [subscription(handle, { rateLimit: { events: 3, perMs: MINUTE, by: "subscription" } })],
      });
      for (const stream of ["a", "b", "c", "d"]) await corq.append(stream, [{ name: "E", data: {} }]);
      await corq.advance();
      await consumeAll(corq, path);
      await consumeAll(corq, path);
      expect(count()).toBe(1); // not the 3 of a whole minute at once
      const waits = (await corq.keys("s"))
        .filter((k) => k.status === "backoff")
        .map((k) => new Date(k.availableAt ?? 0).getTime() - Date.now())
        .sort((x, y) => x - y);
      // the first 20 s from the claim (60 s / 3); a drain's limited keys one behind the other, 20 s
      // apart (consume limits one key per claim: each is told the bucket's next room)
      expect(waits).toHaveLength(3);
      expect(waits[0]).toBeGreaterThan(15_000);
      expect(waits[0]).toBeLessThanOrEqual(20_000);
      if (path === "drain") expect(gaps(waits).map((g) => Math.round(g / 100) * 100)).toEqual([20_000, 20_000]);
    });
  }

  /** 6 keys at once under `rateLimit` (by subscription): how many two drains delivered, and when the first waiting key may go (ms from now). */
  async function burstThenWait(rateLimit: { events: number; perMs: number; burst: number }) {
    const { handle, count } = recorder();
    const { corq } = await open({
      subscriptions: [subscription(handle, { rateLimit: { ...rateLimit, by: "subscription" } })],
    });
    for (let i = 0; i < 6; i++) await corq.append(`k${i}`, [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.drain("s");
    await corq.drain("s");
    const firstWaiting = (await corq.keys("s"))
      .filter((k) => k.status === "backoff")
      .map((k) => new Date(k.availableAt ?? 0).getTime() - Date.now())
      .sort((x, y) => x - y)[0];
    return { delivered: count(), firstWaiting };
  }

  it("a burst lets that many go at once from an idle bucket, then one per interval", async () => {
    const { delivered, firstWaiting } = await burstThenWait({ events: 5, perMs: MINUTE, burst: 3 });
    expect(delivered).toBe(3);
    // the 4th has room once the bucket's tat (3 intervals of 12 s) is within 2 intervals: 12 s
    expect(firstWaiting).toBeGreaterThan(8_000);
    expect(firstWaiting).toBeLessThanOrEqual(12_000);
  });

  it("a burst as large as the limit: that many at once, and the window holds — the next only perMs after the first", async () => {
    const { delivered, firstWaiting } = await burstThenWait({ events: 3, perMs: MINUTE, burst: 3 });
    expect(delivered).toBe(3);
    // the spacing alone would give the 4th room after one interval (20 s): the 3 starts leave the
    // window a minute and a second (the receiver's jitter) after they were taken
    expect(firstWaiting).toBeGreaterThan(55_000);
    expect(firstWaiting).toBeLessThanOrEqual(61_000);
  });

  it("rate_take with a burst: no window of perMs grants more than `events`, however often it is asked", async () => {
    const { corq, raw } = await open({ pushAllowPrivate: true });
    await corq.putSubscription("w", {
      rateLimit: { events: 5, perMs: 400, by: "subscription", burst: 4 },
      deliver: { url: "http://127.0.0.1:9/hook" },
    });
    const id = (await raw.query("SELECT id FROM corq.subscriptions WHERE name = 'w'")).rows[0].id;
    // asked back to back for 1, 2 or 3 events for 1.6 s: each grant at the time the function
    // decided on, as the bucket keeps it (the last of its starts, in microseconds)
    const granted: number[] = [];
    for (let ask = 0, started = Date.now(); Date.now() - started < 1600; ask++) {
      const { rows } = await raw.query("SELECT r.granted FROM corq.rate_take($1, 's', 5, 400, 4, $2) r", [
        id,
        1 + (ask % 3),
      ]);
      if (rows[0].granted === 0) continue;
      const kept = await raw.query(
        "SELECT extract(epoch FROM recent_at[cardinality(recent_at)]) * 1e6 AS at FROM corq.rate_buckets WHERE subscription_id = $1 AND scope = 's'",
        [id],
      );
      for (let i = 0; i < rows[0].granted; i++) granted.push(Number(kept.rows[0].at) / 1000);
    }
    expect(mostInWindow(granted, 400).most).toBe(5);
    expect(granted.length).toBeGreaterThanOrEqual(14); // about the limit's rate over 1.6 s (5 per 480 ms), not a trickle
    // the burst: 4 at once from the idle bucket
    expect(granted.filter((at) => at - (granted[0] ?? 0) < 70)).toHaveLength(4);
  });

  it("limited keys come back one interval apart when the burst is 1, whatever batch they want", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({
      subscriptions: [
        subscription(handle, { batchSize: 5, rateLimit: { events: 2, perMs: MINUTE, by: "subscription" } }),
      ],
    });
    for (const stream of ["a", "b", "c"])
      await corq.append(
        stream,
        Array.from({ length: 3 }, () => ({ name: "E", data: {} })),
      );
    await corq.advance();
    await corq.drain("s");
    expect(handled.map((h) => h.events)).toEqual([1]); // a batch of one: the burst's room
    const waits = (await corq.keys("s"))
      .filter((k) => k.status === "backoff" && k.attempts === 0 && k.key !== "a")
      .map((k) => new Date(k.availableAt ?? 0).getTime())
      .sort((x, y) => x - y);
    // each comes back to a bucket with room for one event (30 s), not for the 3 it wants (90 s)
    expect(waits).toHaveLength(2);
    expect(Math.abs((waits[1] ?? 0) - (waits[0] ?? 0) - 30_000)).toBeLessThan(5);
  });

  it("a limit stored without a burst (the previous release's) is a burst of 1, in the claim and in stats", async () => {
    const { handle, count } = recorder();
    const { corq, raw } = await open({ pushAllowPrivate: true });
    await corq.putSubscription("p", {
      rateLimit: { events: 3, perMs: MINUTE, by: "subscription", burst: 3 },
      deliver: { url: "http://127.0.0.1:9/hook" },
    });
    await raw.query(`UPDATE corq.subscriptions SET rate_limit = rate_limit - 'burst' WHERE name = 'p'`);
    expect((await corq.subscription("p")).rateLimit).toEqual({
      events: 3,
      perMs: MINUTE,
      by: "subscription",
      burst: 1,
    });
    // a code subscription's row, as the previous release wrote it: the claim takes one event's room
    const { corq: code, raw: codeRaw } = await open({
      subscriptions: [subscription(handle, { rateLimit: { events: 3, perMs: MINUTE, by: "subscription", burst: 3 } })],
    });
    for (const stream of ["a", "b", "c"]) await code.append(stream, [{ name: "E", data: {} }]);
    await code.advance();
    await codeRaw.query(`UPDATE corq.subscriptions SET rate_limit = rate_limit - 'burst' WHERE name = 's'`);
    const id = (await codeRaw.query("SELECT id FROM corq.subscriptions WHERE name = 's'")).rows[0].id;
    await createExecutor(codeRaw).run(claimBatch("s", { limit: 3 }));
    expect(count()).toBe(0);
    const { rows } = await codeRaw.query(
      "SELECT count(*)::int AS n FROM corq.keys WHERE subscription_id = $1 AND lease_token IS NOT NULL",
      [id],
    );
    expect(rows[0].n).toBe(1);
    // and the previous release's claims call the 5-argument form: a burst of 1 too
    const other = await codeRaw.query("SELECT granted FROM corq.rate_take($1, 'other', 3, 60000, 3)", [id]);
    expect(other.rows[0].granted).toBe(1);
  });

  it("5 per second, 20 keys at once, 4 instances draining: no second sees more than 5 handlers start", async () => {
    const starts: number[] = [];
    const definition = subscription(() => void starts.push(Date.now()), {
      batchSize: 1,
      rateLimit: { events: 5, perMs: 1000, by: "subscription" },
    });
    const { corq, another } = await open({ subscriptions: [definition] });
    await Promise.all(Array.from({ length: 20 }, (_, i) => corq.append(`k${i}`, [{ name: "E", data: {} }])));
    await corq.advance();
    const instances = [corq, ...Array.from({ length: 3 }, () => another({ subscriptions: [definition] }))];
    // each instance drains again and again, as a runner woken at the next due key would (or sooner)
    const deadline = Date.now() + 15_000;
    await Promise.all(
      instances.map(async (instance, i) => {
        while (starts.length < 20 && Date.now() < deadline) {
          await instance.drain("s", { keysPerClaim: 1 + i });
          await sleep(10);
        }
      }),
    );
    expect(starts).toHaveLength(20);
    const { most } = mostInWindow(starts, 1000);
    const took = Math.max(...starts) - Math.min(...starts);
    console.log(
      `library drain: most in a second ${most}, 20 in ${took} ms, smallest gap ${Math.min(...gaps(starts))} ms`,
    );
    expect(most).toBeLessThanOrEqual(6); // 5, and one more for the jitter between a claim and its handler
    expect(mostInWindow(starts, 100).most).toBeLessThanOrEqual(2); // never a burst
    expect(took).toBeGreaterThan(19 * 200 - 200);
  });

  it("refuses limits that cannot be, in code and for a push subscription, changing nothing", async () => {
    const bad: SubscriptionDefinition["rateLimit"][] = [
      { events: 0, perMs: 1000, by: "key" },
      { events: 10, perMs: 0, by: "key" },
      { events: 10, perMs: 1000, by: "nobody" as "key" },
      { events: 10, perMs: 1000, by: "tenant" }, // no tenant
      { events: 10_000, perMs: 1, by: "key" },
      { events: 5, perMs: 1000, by: "key", burst: 0 },
      { events: 5, perMs: 1000, by: "key", burst: 6 }, // more than its events
      { events: 5, perMs: 1000, by: "key", burst: 2.5 },
    ];
    for (const rateLimit of bad) {
      const refusal = await open({ subscriptions: [subscription(() => undefined, { rateLimit })] }).catch(
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(CorqError);
      expect((refusal as CorqError).code).toBe("invalid_config");
    }
    const { corq } = await open({ pushAllowPrivate: true });
    const deliver = { url: "http://127.0.0.1:9/hook" };
    for (const rateLimit of bad) {
      const put = await corq.putSubscription("p", { rateLimit, deliver } as never).catch((error: unknown) => error);
      expect((put as CorqError).code).toBe("invalid_config");
    }
    expect((await corq.stats()).subscriptions).toEqual([]);
    const created = await corq.putSubscription("p", { rateLimit: { events: 5, perMs: 1000, by: "key" }, deliver });
    // no burst given: 1 (one every 200 ms)
    expect(created.subscription.rateLimit).toEqual({ events: 5, perMs: 1000, by: "key", burst: 1 });
  });
});
