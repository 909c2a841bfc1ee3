// maxLeasedKeys (API.md "Flow control"; docs/flow-control.md): at most n keys of a subscription
// in flight at once across every consumer — several corq instances (as several processes or
// isolates are), on both consumer paths (consume, and drains claiming several keys per
// statement); keys over the cap wait ready, no attempt counted, and the keys view says why.
// Without a cap the same load runs more keys at once (the check can see an overlap).
import { describe, expect, it } from "vitest";
import { CorqError, type DeliveredEvent, type HandlerContext, type SubscriptionDefinition } from "../src/index.js";
import { sleep, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { waitingOnLock } from "./helpers/waitingOnLock.js";

const open = useCorq();

function slowRecorder() {
  const state = { inFlight: 0, most: 0, seen: new Map<string, number[]>() };
  const handle = async (events: DeliveredEvent[], ctx: HandlerContext) => {
    state.inFlight++;
    state.most = Math.max(state.most, state.inFlight);
    try {
      await sleep(40);
      const seen = state.seen.get(ctx.key) ?? [];
      for (const e of events) seen.push((e.data as { n: number }).n);
      state.seen.set(ctx.key, seen);
    } finally {
      state.inFlight--;
    }
  };
  return { state, handle };
}

async function load(corq: { append: (s: string, e: { name: string; data: { n: number } }[]) => Promise<unknown> }) {
  for (let k = 0; k < 12; k++)
    await corq.append(`k${k}`, [
      { name: "E", data: { n: 1 } },
      { name: "E", data: { n: 2 } },
    ]);
}

const paths = {
  consume: (corq: { consume: (s: string) => Promise<unknown> }) => corq.consume("s"),
  drain: (corq: { drain: (s: string, o: object) => Promise<unknown> }) =>
    corq.drain("s", { keysPerClaim: 4, budgetMs: 10_000 }),
};

describe.each(Object.entries(paths))("maxLeasedKeys (%s)", (_path, run) => {
  for (const cap of [2, null]) {
    it(`${cap === null ? "without a cap, more keys run at once" : `never more than ${cap} keys in flight`}, across 4 instances`, async () => {
      const { state, handle } = slowRecorder();
      const definition: SubscriptionDefinition = { name: "s", batchSize: 1, maxLeasedKeys: cap, handle };
      const { corq, another } = await open({ subscriptions: [definition] });
      await load(corq);
      await corq.advance();
      const instances = [corq, ...[1, 2, 3].map(() => another({ subscriptions: [definition], poolSize: 2 }))];
      // every instance consumes until nothing is left (a consume() path runs in rounds)
      for (let round = 0; round < 30 && (await corq.subscription("s")).pending > 0; round++) {
        await Promise.all(instances.map((instance) => run(instance as never)));
      }
      expect((await corq.subscription("s")).pending).toBe(0);
      for (let k = 0; k < 12; k++) expect(state.seen.get(`k${k}`)).toEqual([1, 2]);
      if (cap === null) expect(state.most).toBeGreaterThan(2);
      else expect(state.most).toBeLessThanOrEqual(cap);
      expect((await corq.subscription("s")).maxLeasedKeys).toBe(cap);
    });
  }
});

describe("maxLeasedKeys", () => {
  it("a cap set while a drain runs holds from its next claim (its plain claims check the subscription)", async () => {
    const seen = new Map<string, number[]>();
    let inFlight = 0;
    let capping = false;
    let capped = false;
    // how many batches were running when each batch claimed after the cap began
    const besideAfterCap: number[] = [];
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 1,
          handle: async (events, ctx) => {
            const afterCap = capped;
            if (afterCap) besideAfterCap.push(inFlight);
            inFlight++;
            try {
              if (!afterCap && !capping) {
                // the first batch of the drain's first claim (4 keys, in full: it found the
                // subscription plain, so the next claims are plain ones) caps it at 1 key and is
                // done at once; the claim's other 3 keys stay leased a while
                capping = true;
                await raw.query("UPDATE corq.subscriptions SET max_leased_keys = 1 WHERE name = 's'");
                capped = true;
              } else await sleep(afterCap ? 5 : 300);
              for (const e of events) seen.set(ctx.key, [...(seen.get(ctx.key) ?? []), (e.data as { n: number }).n]);
            } finally {
              inFlight--;
            }
          },
        },
      ],
    });
    await load(corq);
    await corq.advance();
    await corq.drain("s", { keysPerClaim: 4, budgetMs: 10_000 });
    for (let k = 0; k < 12; k++) expect(seen.get(`k${k}`)).toEqual([1, 2]);
    // the next claim, a plain one, settles the first batch and finds the subscription capped:
    // it takes no key while the other 3 are leased; every batch after the cap ran alone
    expect(besideAfterCap).toEqual(Array.from({ length: 24 - 4 }, () => 0));
  });

  for (const tenant of [undefined, "data.tenant"])
    it(`a cap set between two drains holds from the next drain's first claim (${tenant ? "fair only" : "plain"}, from the last drain's finding)`, async () => {
      const sent: string[] = [];
      const { state, handle } = slowRecorder();
      const { corq, raw } = await open({
        onStatement: (text) => void sent.push(text),
        subscriptions: [{ name: "s", batchSize: 1, tenant, handle }],
      });
      await load(corq);
      await corq.advance();
      // the first drain claims as the definition says (plain, or with a tenant and no cap or rate
      // limit: fair only), finds the subscription so, and stops after 4 batches
      await corq.drain("s", { keysPerClaim: 4, maxBatches: 4 });
      expect(state.most).toBeGreaterThan(1);
      await raw.query("UPDATE corq.subscriptions SET max_leased_keys = 1 WHERE name = 's'");
      sent.length = 0;
      state.most = 0;
      await corq.drain("s", { keysPerClaim: 4, budgetMs: 10_000 });
      for (let k = 0; k < 12; k++) expect(state.seen.get(`k${k}`)).toEqual([1, 2]);
      expect(state.most).toBe(1);
      // the second drain began with a plain (fair-only) claim, which took nothing: then in full
      // (only the full statement has the walk of untenanted keys, and the fair pick)
      const claims = sent.filter((text) => text.includes("pick_live"));
      expect(claims.slice(0, 2).map((text) => text.includes("pick_untenanted"))).toEqual([false, true]);
      expect(claims[0]?.includes("pick_fair")).toBe(tenant !== undefined);
    });

  it("keys over the cap wait ready, with no attempt counted, and say why", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { corq } = await open({
      subscriptions: [{ name: "s", maxLeasedKeys: 1, handle: () => gate }],
    });
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.append("b", [{ name: "E", data: {} }]);
    await corq.advance();
    const first = corq.consume("s"); // holds one key until the gate opens
    await sleep(200);
    expect(await corq.consume("s")).toBeNull(); // the other key waits for the slot
    const keys = await corq.keys("s");
    const waiting = keys.find((k) => k.status === "ready");
    expect(waiting).toMatchObject({ attempts: 0 });
    expect(waiting?.reason).toMatch(/waiting for a slot: 1 keys in flight, the subscription's maxLeasedKeys/);
    release();
    expect(await first).toMatchObject({ outcome: "acked" });
    expect(await corq.consume("s")).toMatchObject({ outcome: "acked" });
  });

  it.each(["paused", "replaying"] as const)(
    "a key in flight holds its slot while %s: the next key waits for it",
    async (state) => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const handled: string[] = [];
      const { corq } = await open({
        subscriptions: [
          {
            name: "s",
            maxLeasedKeys: 1,
            handle: async (_events, ctx) => {
              // a's first delivery goes at once; the one that is held is a's next (a replay, or its second event)
              if (ctx.key === "a" && handled.includes("a")) await gate;
              handled.push(ctx.key);
            },
          },
        ],
      });
      await corq.append("a", [{ name: "E", data: {} }]);
      await corq.advance();
      expect(await corq.consume("s")).toMatchObject({ key: "a", outcome: "acked" });
      if (state === "replaying") await corq.rewind("s", { to: "beginning", key: "a" });
      else await corq.append("a", [{ name: "E", data: {} }]);
      await corq.advance();
      const first = corq.consume("s"); // a again, held
      await until(async () => (await corq.key("s", "a")).status === "leased", { message: "a was not claimed" });
      if (state === "paused") await corq.pauseKey("s", "a");
      await corq.append("b", [{ name: "E", data: {} }]);
      await corq.advance();
      expect(await corq.consume("s")).toBeNull(); // a's lease is the subscription's one slot
      release();
      expect(await first).toMatchObject({ key: "a", outcome: "acked" });
      expect(await corq.consume("s")).toMatchObject({ key: "b", outcome: "acked" });
    },
  );

  it("a key waiting out its backoff holds no slot: the next key goes", async () => {
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          maxLeasedKeys: 1,
          maxAttempts: 3,
          backoff: { initialMs: 60_000, maxMs: 60_000, factor: 1 },
          handle: (_events, ctx) => {
            if (ctx.key === "a") throw new Error("a fails");
          },
        },
      ],
    });
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.append("b", [{ name: "E", data: {} }]);
    await corq.advance();
    expect(await corq.consume("s")).toMatchObject({ key: "a", outcome: "retry" });
    expect(await corq.consume("s")).toMatchObject({ key: "b", outcome: "acked" });
    expect(await corq.key("s", "a")).toMatchObject({ status: "backoff", attempts: 1 });
  });

  it("a claim counts the leases committed while it waited for its turn (not its statement's snapshot)", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", maxLeasedKeys: 1, handle: () => undefined }] });
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.append("b", [{ name: "E", data: {} }]);
    await corq.advance();
    // another claim in its turn, by hand: it holds the turn and leases key a, not yet committed
    const other = await raw.connect();
    try {
      await other.query("BEGIN");
      await other.query(
        "SELECT pg_advisory_xact_lock(736420201, (SELECT id FROM corq.subscriptions WHERE name = 's'))",
      );
      await other.query(
        "UPDATE corq.keys SET lease_token = gen_random_uuid(), lease_until = now() + interval '1 minute', available_at = now() + interval '1 minute' WHERE key = 'a'",
      );
      // ours starts (its snapshot sees no lease) and waits for the turn …
      const ours = corq.consume("s");
      await waitingOnLock(raw, "incarnation, max_leased_keys");
      await other.query("COMMIT");
      // … then counts a's lease, committed meanwhile: the subscription is at its cap
      expect(await ours).toBeNull();
    } finally {
      other.release();
    }
    expect(await corq.key("s", "b")).toMatchObject({ status: "ready", attempts: 0 });
  });

  it("refuses a cap below 1 in code and over HTTP's PUT, changing nothing", async () => {
    const refusal = await open({ subscriptions: [{ name: "s", maxLeasedKeys: 0, handle: () => undefined }] }).catch(
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(CorqError);
    expect((refusal as CorqError).code).toBe("invalid_config");
    const { corq } = await open({ pushAllowPrivate: true });
    const put = await corq
      .putSubscription("p", { maxLeasedKeys: 0, deliver: { url: "http://127.0.0.1:9/hook" } } as never)
      .catch((error: unknown) => error);
    expect((put as CorqError).code).toBe("invalid_config");
    expect((await corq.stats()).subscriptions).toEqual([]);
    const created = await corq.putSubscription("p", { maxLeasedKeys: 3, deliver: { url: "http://127.0.0.1:9/hook" } });
    expect(created.subscription.maxLeasedKeys).toBe(3);
  });
});
