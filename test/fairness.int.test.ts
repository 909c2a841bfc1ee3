// Fairness between tenants (docs/flow-control.md): a subscription with `tenant` shares its
// claims round robin between the tenants with ready keys — a quiet tenant is not stuck behind a
// noisy one's backlog — and stays work-conserving (a tenant alone gets every slot). Per-key
// order is untouched. The claim is one statement shared by `consume` and `drain`: both are run.
import { describe, expect, it } from "vitest";
import type { DeliveredEvent, SubscriptionDefinition } from "../src/index.js";
import { CorqError } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();

/** A handler that records each batch's key, in the order the batches ran. */
function recorder() {
  const handled: { key: string; tenant: string; seqs: number[] }[] = [];
  const handle = (events: DeliveredEvent[], ctx: { key: string }) => {
    handled.push({
      key: ctx.key,
      tenant: String((events[0]?.data as { tenant?: string } | undefined)?.tenant),
      seqs: events.map((e) => e.seq),
    });
  };
  return { handled, handle };
}

/** Tenant "noisy": `noisy` keys of 2 events each, appended first; then "quiet": `quiet` keys. */
async function backlog(
  corq: { append(stream: string, events: { name: string; data: unknown }[]): Promise<unknown> },
  { noisy, quiet }: { noisy: number; quiet: number },
) {
  for (let i = 0; i < noisy; i++)
    await corq.append(`n-${String(i).padStart(3, "0")}`, [
      { name: "E", data: { tenant: "noisy" } },
      { name: "E", data: { tenant: "noisy" } },
    ]);
  for (let i = 0; i < quiet; i++) await corq.append(`q-${i}`, [{ name: "E", data: { tenant: "quiet" } }]);
}

const subscription = (
  handle: SubscriptionDefinition["handle"],
  more: Partial<SubscriptionDefinition> = {},
): SubscriptionDefinition => ({ name: "s", key: "stream", tenant: "data.tenant", handle, ...more });

describe("fairness between tenants", () => {
  for (const path of ["drain", "consume"] as const) {
    it(`a quiet tenant's keys are taken in the first claims, not after the noisy tenant's backlog (${path})`, async () => {
      const { handled, handle } = recorder();
      const { corq } = await open({ subscriptions: [subscription(handle)] });
      await backlog(corq, { noisy: 40, quiet: 3 });
      await corq.advance();
      if (path === "drain") {
        // one claim of 4 keys at a time: two tenants with ready keys, 2 each
        await corq.drain("s", { keysPerClaim: 4, maxBatches: 4 });
      } else {
        for (let i = 0; i < 4; i++) await corq.consume("s");
      }
      const firstFour = handled.slice(0, 4);
      expect(firstFour.filter((h) => h.tenant === "quiet").length).toBeGreaterThanOrEqual(2);
      // and everything is delivered, each key in order
      await corq.drain("s", { keysPerClaim: 4 });
      expect(new Set(handled.map((h) => h.key)).size).toBe(43);
      for (const key of new Set(handled.map((h) => h.key))) {
        const seqs = handled.filter((h) => h.key === key).flatMap((h) => h.seqs);
        expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      }
    });
  }

  it("without a tenant the oldest keys go first: the quiet tenant waits behind the backlog", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({ subscriptions: [subscription(handle, { tenant: null })] });
    await backlog(corq, { noisy: 40, quiet: 3 });
    await corq.advance();
    await corq.drain("s", { keysPerClaim: 4, maxBatches: 8 });
    expect(handled.filter((h) => h.tenant === "quiet")).toEqual([]);
  });

  it("takes turns, least recently served first: a claim of one key alternates between the tenants", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({ subscriptions: [subscription(handle)] });
    await backlog(corq, { noisy: 10, quiet: 3 });
    await corq.advance();
    for (let i = 0; i < 6; i++) await corq.consume("s");
    // "quiet" was never served (first in line) after "noisy"'s first key: q, n, q, n, q, n
    expect(handled.map((h) => h.tenant)).toEqual(["noisy", "quiet", "noisy", "quiet", "noisy", "quiet"]);
  });

  it("is work-conserving: a tenant alone gets every key of a claim", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({ subscriptions: [subscription(handle)] });
    await backlog(corq, { noisy: 12, quiet: 0 });
    await corq.advance();
    const drained = await corq.drain("s", { keysPerClaim: 8, maxBatches: 8 });
    expect(drained.batches).toBe(8);
    expect(new Set(handled.map((h) => h.key)).size).toBe(8);
  });

  it("a tenant with fewer ready keys than its share leaves the rest to the others (the claim stays full)", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({ subscriptions: [subscription(handle)] });
    await backlog(corq, { noisy: 12, quiet: 1 });
    await corq.advance();
    await corq.drain("s", { keysPerClaim: 8, maxBatches: 8 });
    const first = handled.slice(0, 8);
    expect(first.filter((h) => h.tenant === "quiet").length).toBe(1);
    expect(first.filter((h) => h.tenant === "noisy").length).toBe(7);
  });

  it("weights: a tenant of weight 3 gets 3 keys per round", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({ subscriptions: [subscription(handle, { tenantWeights: { quiet: 3 } })] });
    await backlog(corq, { noisy: 20, quiet: 20 });
    await corq.advance();
    await corq.drain("s", { keysPerClaim: 8, maxBatches: 8 });
    // 8 keys over weights 1 + 3: two rounds, 2 for "noisy", 6 for "quiet"
    expect(handled.filter((h) => h.tenant === "quiet").length).toBe(6);
    expect(handled.filter((h) => h.tenant === "noisy").length).toBe(2);
  });

  it("a key keeps the tenant of the event that made its row; others are counted, not moved", async () => {
    const { handle } = recorder();
    const { corq } = await open({ subscriptions: [subscription(handle, { key: "data.room" })] });
    await corq.append("x", [
      { name: "E", data: { room: "r1", tenant: "a" } },
      { name: "E", data: { room: "r1", tenant: "b" } },
      { name: "E", data: { room: "r2" } },
    ]);
    await corq.advance();
    await corq.append("y", [{ name: "E", data: { room: "r1", tenant: "c" } }]);
    await corq.advance();
    const keys = await corq.keys("s");
    expect(keys.map((k) => [k.key, k.tenant])).toEqual([
      ["r1", "a"],
      ["r2", ""],
    ]);
    const stats = await corq.subscription("s");
    expect(stats).toMatchObject({ tenant: "data.tenant", tenantMismatched: 2, pending: 4 });
  });

  for (const key of ["stream", "data.room"] as const)
    it(`an event whose tenant breaks the key rule is skipped with the reason, the others go on (key ${key})`, async () => {
      const { handled, handle } = recorder();
      const { corq } = await open({ subscriptions: [subscription(handle, { key })] });
      await corq.append("k1", [{ name: "E", data: { room: "k1", tenant: ".." } }]);
      await corq.append("k2", [{ name: "E", data: { room: "k2", tenant: "fine" } }]);
      // no key at all (no room): skipped for that, not counted as an invalid tenant
      await corq.append("k3", [{ name: "E", data: { tenant: ".." } }]);
      await corq.advance();
      await corq.drain("s");
      expect(handled.map((h) => h.key)).toEqual(["k2"]);
      const stats = await corq.subscription("s");
      expect(stats.skippedInvalidKeys).toBe(key === "stream" ? 2 : 1);
      expect(stats.skipped).toBe(2);
      expect(stats.lastSkip?.reason).toBe('tenant is "." or ".."');
    });

  it("a tenant computed by a function, beside a key function (the advance's function path)", async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({
      subscriptions: [
        subscription(handle, {
          key: (e) => e.stream,
          tenant: (e) => (e.data as { tenant?: string }).tenant,
        }),
      ],
    });
    await backlog(corq, { noisy: 10, quiet: 2 });
    await corq.advance();
    await corq.drain("s", { keysPerClaim: 4, maxBatches: 4 });
    expect(handled.slice(0, 4).filter((h) => h.tenant === "quiet").length).toBe(2);
    expect((await corq.keys("s", { limit: 1 }))[0]?.tenant).toBe("noisy");
  });

  it('a tenant function that throws or names no text skips its event with the reason; one that names nothing gives ""', async () => {
    const { handled, handle } = recorder();
    const { corq } = await open({
      subscriptions: [
        subscription(handle, {
          key: (e) => e.stream,
          tenant: (e) => {
            const t = (e.data as { tenant?: unknown }).tenant;
            if (t === "boom") throw new Error("no tenant here");
            return t as string | undefined;
          },
        }),
      ],
    });
    await corq.append("threw", [{ name: "E", data: { tenant: "boom" } }]);
    await corq.append("object", [{ name: "E", data: { tenant: { nested: true } } }]);
    await corq.append("none", [{ name: "E", data: {} }]);
    await corq.append("fine", [{ name: "E", data: { tenant: "t" } }]);
    await corq.advance();
    await corq.drain("s");
    expect(handled.map((h) => h.key).sort()).toEqual(["fine", "none"]);
    expect((await corq.key("s", "none")).tenant).toBe("");
    const stats = await corq.subscription("s");
    expect(stats).toMatchObject({ skipped: 2, skippedInvalidKeys: 2 });
    expect(stats.lastSkip?.reason).toMatch(/^tenant function (threw Error: no tenant here|returned object)$/);
  });

  it("refuses settings that do not hold together, in code and for a push subscription, changing nothing", async () => {
    const bad: Partial<SubscriptionDefinition>[] = [
      { tenant: "data.tenant", tenantWeights: { a: 0 } },
      { tenant: null, tenantWeights: { a: 2 } },
      { tenant: (e) => e.stream },
      { tenant: "tenant" as "stream" },
      { tenant: "data.tenant", tenantWeights: { "..": 2 } },
    ];
    for (const more of bad) {
      const refusal = await open({ subscriptions: [subscription(() => undefined, more)] }).catch(
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(CorqError);
      expect((refusal as CorqError).code).toBe("invalid_config");
    }
    const { corq } = await open({ pushAllowPrivate: true });
    const deliver = { url: "http://127.0.0.1:9/hook" };
    for (const body of [
      { tenant: "data.", deliver },
      { tenant: "data.t", tenantWeights: { t: 1.5 }, deliver },
      { tenantWeights: { t: 2 }, deliver },
    ]) {
      const put = await corq.putSubscription("p", body as never).catch((error: unknown) => error);
      expect((put as CorqError).code).toBe("invalid_config");
    }
    expect((await corq.stats()).subscriptions).toEqual([]);
    const created = await corq.putSubscription("p", { tenant: "meta.tenant", tenantWeights: { t: 2 }, deliver });
    expect(created.subscription).toMatchObject({ tenant: "meta.tenant", tenantWeights: { t: 2 }, tenantMismatched: 0 });
  });
});
