// maxLeasedKeysPerTenant (docs/flow-control.md): at most n keys of each tenant in flight at
// once, across every consumer and instance — decided in the database (corq.tenant_room). The
// claim is one statement shared by `consume` and `drain`: both are run.
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { DeliveredEvent, HandlerContext, SubscriptionDefinition } from "../src/index.js";
import { CorqError } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";

const open = useCorq();

/** A slow handler that records, per tenant, the most keys it ran at once, and each key's events. */
function slowRecorder() {
  const inFlight = new Map<string, number>();
  const most = new Map<string, number>();
  const seen = new Map<string, number[]>();
  const handle = async (events: DeliveredEvent[], ctx: HandlerContext) => {
    const tenant = String((events[0]?.data as { tenant?: string } | undefined)?.tenant);
    inFlight.set(tenant, (inFlight.get(tenant) ?? 0) + 1);
    most.set(tenant, Math.max(most.get(tenant) ?? 0, inFlight.get(tenant) ?? 0));
    try {
      await sleep(30);
      seen.set(ctx.key, [...(seen.get(ctx.key) ?? []), ...events.map((e) => (e.data as { n: number }).n)]);
    } finally {
      inFlight.set(tenant, (inFlight.get(tenant) ?? 1) - 1);
    }
  };
  return { most, seen, handle };
}

async function load(corq: { append(stream: string, events: { name: string; data: unknown }[]): Promise<unknown> }) {
  for (const tenant of ["x", "y"])
    for (let k = 0; k < 6; k++)
      await corq.append(`${tenant}${k}`, [
        { name: "E", data: { tenant, n: 1 } },
        { name: "E", data: { tenant, n: 2 } },
      ]);
}

const paths = {
  consume: (corq: { consume: (s: string) => Promise<unknown> }) => corq.consume("s"),
  drain: (corq: { drain: (s: string, o: object) => Promise<unknown> }) =>
    corq.drain("s", { keysPerClaim: 4, budgetMs: 10_000 }),
};

describe.each(Object.entries(paths))("maxLeasedKeysPerTenant (%s)", (_path, run) => {
  for (const cap of [1, null]) {
    it(`${cap === null ? "without a cap, a tenant runs more keys at once" : `never more than ${cap} key of a tenant in flight`}, across 4 instances`, async () => {
      const { most, seen, handle } = slowRecorder();
      const definition: SubscriptionDefinition = {
        name: "s",
        batchSize: 1,
        tenant: "data.tenant",
        maxLeasedKeysPerTenant: cap,
        handle,
      };
      const { corq, another } = await open({ subscriptions: [definition] });
      await load(corq);
      await corq.advance();
      const instances = [corq, ...[1, 2, 3].map(() => another({ subscriptions: [definition], poolSize: 2 }))];
      for (let round = 0; round < 60 && (await corq.subscription("s")).pending > 0; round++)
        await Promise.all(instances.map((instance) => run(instance as never)));
      expect((await corq.subscription("s")).pending).toBe(0);
      for (const [key, ns] of seen) expect([key, ns]).toEqual([key, [1, 2]]);
      expect(seen.size).toBe(12);
      for (const tenant of ["x", "y"]) {
        if (cap === null) expect(most.get(tenant)).toBeGreaterThan(1);
        else expect(most.get(tenant)).toBeLessThanOrEqual(cap);
      }
    });
  }
});

describe("maxLeasedKeysPerTenant", () => {
  it("a claim passes over a tenant whose turn another claim holds, and takes the others' keys", async () => {
    const handled: string[] = [];
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          tenant: "data.tenant",
          maxLeasedKeysPerTenant: 5,
          handle: (_events, ctx) => void handled.push(ctx.key),
        },
      ],
    });
    await load(corq);
    await corq.advance();
    const id = (await raw.query("SELECT id FROM corq.subscriptions WHERE name = 's'")).rows[0].id;
    const other = await raw.connect();
    try {
      await other.query("BEGIN");
      await other.query("SELECT pg_advisory_xact_lock(hashtext($1 || ':' || 'x'), 736420202)", [String(id)]);
      await corq.drain("s", { keysPerClaim: 8, maxBatches: 8 });
      await other.query("COMMIT");
    } finally {
      other.release();
    }
    expect(handled.length).toBeGreaterThan(0);
    expect(handled.every((key) => key.startsWith("y"))).toBe(true);
  });

  it("counts a tenant's own keys in flight, a paused one too, and no other tenant's", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          tenant: "data.tenant",
          maxLeasedKeysPerTenant: 1,
          handle: (_events, ctx) => (ctx.key === "x2" ? undefined : gate), // x1 and y1 held
        },
      ],
    });
    const E = (tenant: string) => [{ name: "E", data: { tenant } }];
    await corq.append("x1", E("x"));
    await corq.advance();
    const x1 = corq.consume("s"); // held
    await until(async () => (await corq.key("s", "x1")).status === "leased", { message: "x1 was not claimed" });
    await corq.append("x2", E("x"));
    await corq.append("y1", E("y"));
    await corq.advance();
    // y has room though x is at its cap
    const y1 = corq.consume("s");
    await until(async () => (await corq.key("s", "y1")).status === "leased", { message: "y1 was not claimed" });
    // x1 paused while its batch runs is still in flight: x2 waits
    await corq.pauseKey("s", "x1");
    // (a new event of x gives x its turn again, so the claim does visit x and count x1 in flight)
    await corq.append("x3", E("x"));
    await corq.advance();
    expect(await corq.consume("s")).toBeNull();
    expect(await corq.key("s", "x2")).toMatchObject({ status: "ready", attempts: 0 });
    release();
    expect(await x1).toMatchObject({ key: "x1", outcome: "acked" });
    expect(await y1).toMatchObject({ key: "y1", outcome: "acked" });
    expect(await corq.consume("s")).toMatchObject({ key: "x2", outcome: "acked" });
  });

  it("keys made before the subscription had a tenant still go (not behind the caps for ever)", async () => {
    const handled: string[] = [];
    const handle = (_events: DeliveredEvent[], ctx: HandlerContext) => void handled.push(ctx.key);
    const { corq, another } = await open({ subscriptions: [{ name: "s", handle }] });
    await load(corq);
    await corq.advance(); // key rows without a tenant
    const capped = another({
      subscriptions: [{ name: "s", tenant: "data.tenant", maxLeasedKeysPerTenant: 1, handle }],
    });
    await capped.advance();
    for (let round = 0; round < 20 && (await capped.subscription("s")).pending > 0; round++) await capped.drain("s");
    expect((await capped.subscription("s")).pending).toBe(0);
    expect(new Set(handled).size).toBe(12);
  });

  it("needs a tenant and a cap of at least 1, in code and for a push subscription", async () => {
    for (const more of [{ maxLeasedKeysPerTenant: 2 }, { tenant: "data.tenant", maxLeasedKeysPerTenant: 0 }]) {
      const refusal = await open({ subscriptions: [{ name: "s", handle: () => undefined, ...more }] }).catch(
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(CorqError);
      expect((refusal as CorqError).code).toBe("invalid_config");
    }
    const { corq } = await open({ pushAllowPrivate: true });
    const deliver = { url: "http://127.0.0.1:9/hook" };
    const put = await corq.putSubscription("p", { maxLeasedKeysPerTenant: 2, deliver }).catch((e: unknown) => e);
    expect((put as CorqError).code).toBe("invalid_config");
    expect((await corq.stats()).subscriptions).toEqual([]);
    const created = await corq.putSubscription("p", { tenant: "data.t", maxLeasedKeysPerTenant: 2, deliver });
    expect(created.subscription.maxLeasedKeysPerTenant).toBe(2);
  });
});
