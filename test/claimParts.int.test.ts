// Each claim only as big as its subscription needs (DESIGN invariant 12): a new Corq — each
// Worker invocation is one — sends a plain subscription's claim without the fair pick, the caps
// and the rate limits from its first claim, in consume() as in a drain; a subscription with a
// tenant gets the fair part only, one with a rate limit the whole statement. The parts come from
// the code definition before any claim; a claim whose parts turn out wrong (the subscription was
// changed where this Corq cannot see it) takes nothing and says so, and the next is right.
import { describe, expect, it } from "vitest";
import type { SubscriptionDefinition } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();

// the claims among the statements sent: what each part's text adds
const claimsIn = (sent: string[]) =>
  sent
    .filter((text) => text.includes("pick_live"))
    .map((text) => ({ fair: text.includes("pick_fair"), rate: text.includes("rate_wants") }));

const cases: { name: string; definition: Partial<SubscriptionDefinition>; parts: { fair: boolean; rate: boolean } }[] =
  [
    { name: "plain", definition: {}, parts: { fair: false, rate: false } },
    { name: "with a tenant", definition: { tenant: "data.t" }, parts: { fair: true, rate: false } },
    {
      name: "with a rate limit",
      definition: { rateLimit: { events: 1000, perMs: 1000, by: "subscription" } },
      parts: { fair: true, rate: true },
    },
  ];

describe("a new Corq's first claim has the parts its subscription needs", () => {
  for (const { name, definition, parts } of cases)
    for (const how of ["consume", "drain"] as const)
      it(`${name}: ${how}()`, async () => {
        const handled: string[] = [];
        const subscription = {
          name: "s",
          ...definition,
          handle: (events: { stream: string }[]) => void handled.push(...events.map((e) => e.stream)),
        };
        const { corq, another } = await open({ subscriptions: [subscription] });
        await corq.append("k1", [{ name: "Placed", data: { t: "a" } }]);
        await corq.advance();
        const sent: string[] = [];
        const fresh = another({ subscriptions: [subscription], onStatement: (text) => void sent.push(text) });
        if (how === "consume") expect(await fresh.consume("s")).toMatchObject({ outcome: "acked", events: 1 });
        else expect(await fresh.drain("s", { keysPerClaim: 1, budgetMs: 10_000 })).toMatchObject({ events: 1 });
        expect(handled).toEqual(["k1"]);
        // consume: the claim, then the ack; a drain settles in its next claim (of the same parts)
        const claims = claimsIn(sent);
        expect(claims[0]).toEqual(parts);
        expect(claims.every((claim) => claim.fair === parts.fair && claim.rate === parts.rate)).toBe(true);
      });
});

describe("a claim whose parts are out of date", () => {
  for (const how of ["consume", "drain"] as const)
    it(`takes nothing and says so; the next claim has the parts (${how})`, async () => {
      const handled: string[] = [];
      const plain = {
        name: "s",
        handle: (events: { stream: string }[]) => void handled.push(...events.map((e) => e.stream)),
      };
      const { corq, raw, another } = await open({ subscriptions: [plain] });
      await corq.append("k1", [{ name: "Placed", data: {} }]);
      await corq.append("k2", [{ name: "Placed", data: {} }]);
      await corq.advance();
      // a rate limit this Corq's definition does not have (set by another deployment's code)
      await raw.query(
        `UPDATE corq.subscriptions SET rate_limit = '{"events": 1000, "perMs": 1000, "by": "subscription"}' WHERE name = 's'`,
      );
      const sent: string[] = [];
      const fresh = another({ subscriptions: [plain], onStatement: (text) => void sent.push(text) });
      if (how === "consume") {
        expect(await fresh.consume("s")).toMatchObject({ outcome: "acked", events: 1 });
        expect(await fresh.consume("s")).toMatchObject({ outcome: "acked", events: 1 });
      } else expect(await fresh.drain("s", { keysPerClaim: 1, budgetMs: 10_000 })).toMatchObject({ events: 2 });
      expect(handled.sort()).toEqual(["k1", "k2"]);
      const claims = claimsIn(sent);
      // the plain claim first (from the definition), then with the rate limit, and so on
      expect(claims[0]).toEqual({ fair: false, rate: false });
      expect(claims.slice(1).every((claim) => claim.rate)).toBe(true);
      expect(claims.length).toBeGreaterThan(1);
    });
});

describe("a code subscription not registered yet (no advance has run)", () => {
  it("consume() and drain() send one claim each and learn nothing from it", async () => {
    const { another } = await open();
    const sent: string[] = [];
    const tenanted = { name: "t", tenant: "data.t", handle: () => undefined };
    const corq = another({ subscriptions: [tenanted], onStatement: (text) => void sent.push(text) });
    expect(await corq.consume("t")).toBeNull();
    expect(await corq.drain("t", { keysPerClaim: 4, budgetMs: 1000 })).toMatchObject({ batches: 0 });
    // both fair only, as the definition says: an absent row is not a reason to claim in full
    expect(claimsIn(sent)).toEqual([
      { fair: true, rate: false },
      { fair: true, rate: false },
    ]);
  });
});

describe("two subscriptions of one Corq", () => {
  it("each claim has its own subscription's parts, whichever was claimed first", async () => {
    const handle = () => undefined;
    const plain = { name: "p", handle };
    const tenanted = { name: "t", tenant: "data.t", handle };
    const { corq, another } = await open({ subscriptions: [plain, tenanted] });
    await corq.append("k1", [{ name: "Placed", data: { t: "a" } }]);
    await corq.append("k2", [{ name: "Placed", data: { t: "b" } }]);
    await corq.advance();
    const sent: string[] = [];
    const fresh = another({ subscriptions: [plain, tenanted], onStatement: (text) => void sent.push(text) });
    // in turns, each subscription twice: what one learns must not become the other's
    for (const name of ["t", "p", "t", "p"]) await fresh.consume(name);
    expect(claimsIn(sent)).toEqual([
      { fair: true, rate: false },
      { fair: false, rate: false },
      { fair: true, rate: false },
      { fair: false, rate: false },
    ]);
  });
});
