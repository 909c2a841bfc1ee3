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
        subscriptions: [subscription(handle, { rateLimit: { events: 2, perMs: MINUTE, by: "key" } })],
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
      expect(a.reason).toMatch(/^waiting until .+ for its rate limit: 2 events per 60000 ms by key$/);
      // about half a minute: one event's room (60 s / 2)
      const waits = new Date(a.availableAt ?? 0).getTime() - Date.now();
      expect(waits).toBeGreaterThan(20_000);
      expect(waits).toBeLessThanOrEqual(MINUTE);
      expect((await corq.subscription("s")).keys).toMatchObject({ waiting: 2, ready: 0 });
    });

    it(`by subscription: one limit across every key (${path})`, async () => {
      const { handle, count } = recorder();
      const { corq } = await open({
        subscriptions: [subscription(handle, { rateLimit: { events: 3, perMs: MINUTE, by: "subscription" } })],
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
        subscription(handle, { tenant: "data.tenant", rateLimit: { events: 2, perMs: MINUTE, by: "tenant" } }),
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
    const definition = subscription(handle, { rateLimit: { events: 10, perMs: MINUTE, by: "subscription" } });
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
      subscriptions: [subscription(handle, { rateLimit: { events: 3, perMs: MINUTE, by: "subscription" } })],
    });
    for (const stream of ["a", "b", "c", "d"]) await corq.append(stream, [{ name: "E", data: {} }]);
    await corq.advance();
    const id = (await raw.query("SELECT id FROM corq.subscriptions WHERE name = 's'")).rows[0].id;
    await raw.query("SELECT corq.rate_take($1, 's', 3, 60000, 0)", [id]); // the bucket, full
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
        subscription(handle, { batchSize: 3, leaseMs: 200, rateLimit: { events: 6, perMs: MINUTE, by: "key" } }),
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
    const limit = { events: 2, perMs: MINUTE, by: "subscription" } as const;
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
        subscription(handle, { tenant: "data.tenant", rateLimit: { events: 2, perMs: MINUTE, by: "tenant" } }),
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

  it("refuses limits that cannot be, in code and for a push subscription, changing nothing", async () => {
    const bad: SubscriptionDefinition["rateLimit"][] = [
      { events: 0, perMs: 1000, by: "key" },
      { events: 10, perMs: 0, by: "key" },
      { events: 10, perMs: 1000, by: "nobody" as "key" },
      { events: 10, perMs: 1000, by: "tenant" }, // no tenant
      { events: 10_000, perMs: 1, by: "key" },
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
    expect(created.subscription.rateLimit).toEqual({ events: 5, perMs: 1000, by: "key" });
  });
});
