// "Come back later" (API.md "Flow control"; docs/flow-control.md): a code handler's
// `{ retryAfterMs }` and a push receiver's 429/503 with Retry-After leave the batch unacked, make
// the key wait that long and count no attempt; the postponements are bounded apart (past the
// bound the next one is a failed attempt with that reason, so an endless 429 still ends in the
// dead letters); an ack resets them; a transactional handler's writes are rolled back. On both
// consumer paths (consume and drain).
import { describe, expect, it } from "vitest";
import { MAX_POSTPONEMENTS } from "../src/config.js";
import type { ConsumeResult, DeliveredEvent, HandlerContext, HandlerResult } from "../src/index.js";
import { sleep, useCorq, type Opened } from "./helpers/corq.js";
import { useReceiver } from "./helpers/receiver.js";

const open = useCorq();
const hook = useReceiver();

// one batch of the subscription, on either consumer path: its results
const paths = {
  consume: async ({ corq }: Opened, name: string): Promise<ConsumeResult[]> => {
    const result = await corq.consume(name);
    return result === null ? [] : [result];
  },
  drain: async ({ corq }: Opened, name: string): Promise<ConsumeResult[]> => {
    const { first } = await corq.drain(name, { keysPerClaim: 4, budgetMs: 5000, maxBatches: 1 });
    return first === null ? [] : [first];
  },
} as const;

describe.each(Object.entries(paths))("come back later (%s)", (_path, once) => {
  it("a code handler's retryAfterMs: nothing acked, the key waits, no attempt counted; then it goes on", async () => {
    const attempts: number[] = [];
    let answer: HandlerResult = { retryAfterMs: 400, reason: "the mail API said 429" };
    const opened = await open({
      subscriptions: [
        {
          name: "s",
          handle: (_events: DeliveredEvent[], ctx: HandlerContext) => {
            attempts.push(ctx.attempt);
            return answer;
          },
        },
      ],
    });
    const { corq } = opened;
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.advance();
    const before = Date.now();
    expect(await once(opened, "s")).toEqual([
      { key: "a", events: 1, outcome: "postponed", error: "come back later: the mail API said 429" },
    ]);
    const waiting = await corq.key("s", "a");
    expect(waiting).toMatchObject({ status: "backoff", attempts: 0, pending: 1 });
    expect(waiting?.reason).toMatch(/^postponed until .*: the handler asked to come back later \(1 of 100/);
    expect(Date.parse(waiting?.availableAt ?? "")).toBeGreaterThanOrEqual(before + 350);
    expect(await once(opened, "s")).toEqual([]); // not before its time
    await sleep(Date.parse(waiting?.availableAt ?? "") - Date.now() + 30);
    answer = undefined;
    expect(await once(opened, "s")).toMatchObject([{ key: "a", outcome: "acked" }]);
    // the second delivery was still the first attempt
    expect(attempts).toEqual([1, 1]);
    const { rows } = await opened.raw.query("SELECT postponed, postponed_since FROM corq.keys WHERE key = 'a'");
    expect(rows[0]).toEqual({ postponed: 0, postponed_since: null });
  });

  it("bounds postponements: past the bound each one fails an attempt, and the key ends dead", async () => {
    const opened = await open({
      subscriptions: [
        { name: "s", maxAttempts: 2, backoff: { initialMs: 0, maxMs: 0 }, handle: () => ({ retryAfterMs: 0 }) },
      ],
    });
    const { corq } = opened;
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.advance();
    const outcomes: string[] = [];
    for (let i = 0; i < MAX_POSTPONEMENTS + 2; i++) outcomes.push(...(await once(opened, "s")).map((r) => r.outcome));
    expect(outcomes.slice(0, MAX_POSTPONEMENTS).every((o) => o === "postponed")).toBe(true);
    expect(outcomes.slice(MAX_POSTPONEMENTS)).toEqual(["retry", "dead"]);
    const dead = await corq.key("s", "a");
    expect(dead).toMatchObject({ status: "dead", attempts: 2 });
    expect(dead?.lastError).toBe(`gave up after ${MAX_POSTPONEMENTS} postponements: come back later: retryAfterMs 0`);
  });
});

describe("come back later", () => {
  it("bounds postponements in time too: a day after the first, the next one fails an attempt", async () => {
    const opened = await open({
      subscriptions: [{ name: "s", backoff: { initialMs: 0, maxMs: 0 }, handle: () => ({ retryAfterMs: 0 }) }],
    });
    await opened.corq.append("a", [{ name: "E", data: {} }]);
    await opened.corq.advance();
    expect(await opened.corq.consume("s")).toMatchObject({ outcome: "postponed" });
    expect(await opened.corq.consume("s")).toMatchObject({ outcome: "postponed" });
    await opened.raw.query("UPDATE corq.keys SET postponed_since = postponed_since - interval '1 day'");
    expect(await opened.corq.consume("s")).toMatchObject({
      outcome: "retry",
      error: "come back later: retryAfterMs 0",
    });
    expect((await opened.corq.key("s", "a"))?.lastError).toBe(
      "gave up after 2 postponements: come back later: retryAfterMs 0",
    );
  });

  it("refuses an answer it cannot read as a failed attempt", async () => {
    const answers: unknown[] = [{ retryAfterMs: "soon" }, { retryAfterMs: -5 }, { retryAfterMs: 10, ackedThrough: 1 }];
    const opened = await open({
      subscriptions: [{ name: "s", backoff: { initialMs: 0, maxMs: 0 }, handle: () => answers.shift() as never }],
    });
    await opened.corq.append("a", [{ name: "E", data: {} }]);
    await opened.corq.advance();
    const errors: (string | undefined)[] = [];
    for (let i = 0; i < 3; i++) {
      const result = await opened.corq.consume("s");
      expect(result?.outcome).toBe("retry");
      errors.push(result?.error);
    }
    expect(errors).toEqual([
      "Error: retryAfterMs must be a number of milliseconds, 0 or more",
      "Error: retryAfterMs must be a number of milliseconds, 0 or more",
      "Error: give ackedThrough or retryAfterMs, not both",
    ]);
  });

  it("rolls a transactional handler's writes back", async () => {
    let postpone = true;
    const opened = await open({
      subscriptions: [
        {
          name: "s",
          transactional: true,
          handle: async (_events: DeliveredEvent[], ctx: HandlerContext) => {
            await ctx.tx?.execute("INSERT INTO public.effects (note) VALUES ('written')");
            return postpone ? { retryAfterMs: 0 } : undefined;
          },
        },
      ],
    });
    await opened.raw.query("CREATE TABLE public.effects (note text)");
    await opened.corq.append("a", [{ name: "E", data: {} }]);
    await opened.corq.advance();
    expect(await opened.corq.consume("s")).toMatchObject({ outcome: "postponed" });
    expect((await opened.raw.query("SELECT count(*)::int AS n FROM public.effects")).rows[0].n).toBe(0);
    postpone = false;
    expect(await opened.corq.consume("s")).toMatchObject({ outcome: "acked" });
    expect((await opened.raw.query("SELECT count(*)::int AS n FROM public.effects")).rows[0].n).toBe(1);
  });

  it("a push receiver's 429 / 503 with Retry-After postpones; without it, an attempt is counted", async () => {
    const opened = await open({ pushAllowPrivate: true });
    const { corq } = opened;
    const created = await corq.putSubscription("p", {
      backoff: { initialMs: 0, maxMs: 0, factor: 1 },
      deliver: { url: hook.receiver.url },
    });
    hook.secret = created.secret;
    hook.receiver.reset();
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.advance();
    const answers = [
      { status: 429, headers: { "retry-after": "0" } },
      { status: 503, headers: { "retry-after": new Date(Date.now() - 1000).toUTCString() } },
      { status: 429 }, // no Retry-After: an ordinary failure
      { status: 503, headers: { "retry-after": "soon" } }, // one that does not parse: the same
      { status: 200 },
    ];
    hook.receiver.behave(() => answers.shift());
    const results: (ConsumeResult | null)[] = [];
    for (let i = 0; i < 5; i++) results.push(await corq.consume("p"));
    expect(results.map((r) => [r?.outcome, r?.error])).toEqual([
      ["postponed", "come back later: HTTP 429, Retry-After 0 s"],
      ["postponed", "come back later: HTTP 503, Retry-After a date"],
      ["retry", "Error: HTTP 429"],
      ["retry", "Error: HTTP 503"],
      ["acked", undefined],
    ]);
    // attempts went up only for the two failures
    expect(hook.receiver.deliveries.map((d) => d.attempt)).toEqual([1, 1, 1, 2, 3]);
  });

  it("a Retry-After in seconds makes the key wait that long", async () => {
    const opened = await open({ pushAllowPrivate: true });
    const { corq } = opened;
    hook.secret = (await corq.putSubscription("p", { deliver: { url: hook.receiver.url } })).secret;
    hook.receiver.reset();
    hook.receiver.behave(() => ({ status: 429, headers: { "retry-after": "120" } }));
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.advance();
    const before = Date.now();
    expect(await corq.consume("p")).toMatchObject({ outcome: "postponed" });
    const until = Date.parse((await corq.key("p", "a"))?.availableAt ?? "");
    expect(until - before).toBeGreaterThanOrEqual(119_000);
    expect(until - before).toBeLessThan(125_000);
  });
});
