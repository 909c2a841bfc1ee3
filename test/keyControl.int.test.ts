// One key under control: pause and resume it (never claimed while paused, its events kept in
// order), see who holds its lease and since when, and why it is not running, in words.
import { describe, expect, it } from "vitest";
import type { DeliveredEvent, HandlerContext } from "../src/index.js";
import { drain, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const e = (n: string) => ({ name: "E", data: { n } });

describe("pausing one key", () => {
  it("is never claimed while paused, keeps its events in order, and goes on from where it was when resumed", async () => {
    const seen: string[] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 2,
          handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
            void seen.push(...events.map((ev) => `${ctx.key}:${(ev.data as { n: string }).n}`)),
        },
      ],
    });
    await corq.append("a", [e("1"), e("2")]);
    await corq.append("b", [e("1")]);
    await corq.advance();
    expect(await corq.pauseKey("s", "a")).toMatchObject({ key: "a", status: "paused", pending: 2 });
    expect(await corq.readyKeys(10)).toMatchObject({ s: { ready: 1 } }); // b only
    await corq.append("a", [e("3")]);
    await drain(corq, "s");
    expect(seen).toEqual(["b:1"]);
    const paused = await corq.key("s", "a");
    expect(paused).toMatchObject({ status: "paused", pending: 3 });
    expect(paused.reason).toMatch(/^paused since \S+; 3 events wait$/);
    expect(await corq.keys("s", { status: "paused" })).toEqual([paused]);
    expect((await corq.subscription("s")).keys).toMatchObject({ ready: 0, paused: 1 });
    // pausing again keeps the first pause's time
    expect((await corq.pauseKey("s", "a")).pausedSince).toBe(paused.pausedSince);

    expect(await corq.resumeKey("s", "a")).toMatchObject({ status: "ready", pending: 3 });
    await drain(corq, "s");
    expect(seen).toEqual(["b:1", "a:1", "a:2", "a:3"]);
    expect((await corq.key("s", "a")).pausedSince).toBeUndefined();
  });

  // DESIGN.md invariant 11: a per-key operation is tested with two keys in that state
  it("pausing or resuming one of two keys acts on that key only", async () => {
    const seen: string[] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
            void seen.push(...events.map((ev) => `${ctx.key}:${(ev.data as { n: string }).n}`)),
        },
      ],
    });
    for (const key of ["a", "b", "c"]) await corq.append(key, [e("1")]);
    await corq.advance();
    await corq.pauseKey("s", "a");
    await corq.pauseKey("s", "b");
    expect((await corq.keys("s", { status: "paused" })).map((k) => k.key)).toEqual(["a", "b"]);
    await drain(corq, "s");
    expect(seen).toEqual(["c:1"]);
    expect(await corq.resumeKey("s", "a")).toMatchObject({ key: "a", status: "ready" });
    expect(await corq.key("s", "b")).toMatchObject({ status: "paused", pending: 1 });
    await drain(corq, "s");
    expect(seen).toEqual(["c:1", "a:1"]);
    expect((await corq.keys("s", { status: "paused" })).map((k) => k.key)).toEqual(["b"]);
    await corq.resumeKey("s", "b");
    await drain(corq, "s");
    expect(seen).toEqual(["c:1", "a:1", "b:1"]);
  });

  it("lets a batch in flight finish and ack, then claims the key no more", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const seen: string[] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 1,
          handle: async (events: DeliveredEvent[]) => {
            seen.push((present(events[0], "the batch's event").data as { n: string }).n);
            if (seen.length === 1) await gate;
          },
        },
      ],
    });
    await corq.append("a", [e("1"), e("2")]);
    await corq.advance();
    const first = corq.consume("s");
    await until(() => seen.length === 1, { message: "the batch never started" });
    const during = await corq.pauseKey("s", "a");
    expect(during.status).toBe("paused");
    expect(during.reason).toContain("the batch in flight finishes first (leased by process ");
    release();
    expect(await first).toMatchObject({ outcome: "acked" });
    expect(await corq.consume("s")).toBeNull();
    expect(await corq.key("s", "a")).toMatchObject({ status: "paused", pending: 1 });
  });

  it("pauses a key that has no events yet: its first events wait", async () => {
    const seen: string[] = [];
    const { corq } = await open({
      subscriptions: [{ name: "s", handle: (_events, ctx) => void seen.push(ctx.key) }],
    });
    await corq.advance(); // registers the subscription
    expect(await corq.pauseKey("s", "later")).toMatchObject({ status: "paused", pending: 0, seq: 0 });
    await corq.append("later", [e("1")]);
    await drain(corq, "s");
    expect(seen).toEqual([]);
    await corq.resumeKey("s", "later");
    await drain(corq, "s");
    expect(seen).toEqual(["later"]);
  });

  it("says which is unknown, and refuses an invalid key", async () => {
    const { corq } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.advance();
    await expect(corq.pauseKey("missing", "a")).rejects.toMatchObject({ code: "unknown_subscription" });
    await expect(corq.resumeKey("missing", "a")).rejects.toMatchObject({ code: "unknown_subscription" });
    await expect(corq.resumeKey("s", "nobody")).rejects.toMatchObject({ code: "unknown_key" });
    await expect(corq.key("s", "nobody")).rejects.toMatchObject({ code: "unknown_key" });
    for (const bad of ["", ".", "..", "x".repeat(513), "a\u0000b"]) {
      await expect(corq.pauseKey("s", bad), JSON.stringify(bad.slice(0, 10))).rejects.toMatchObject({
        code: "invalid_input",
      });
    }
    expect(await corq.keys("s")).toEqual([]);
  });
});

describe("who holds a key, and why a key is not running", () => {
  it("records each lease's holder and since when; the keys API shows it while the lease is live", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { corq, another } = await open({
      subscriptions: [{ name: "s", handle: () => gate }],
    });
    const worker = another({ subscriptions: [{ name: "s", handle: () => gate }], holder: "worker invocation 1234" });
    await corq.append("a", [e("1")]);
    await corq.advance();
    const before = Date.now();
    const consuming = worker.consume("s");
    await until(async () => (await corq.key("s", "a")).status === "leased", { message: "never leased" });
    const leased = await corq.key("s", "a");
    expect(leased).toMatchObject({ holder: "worker invocation 1234" });
    expect(Date.parse(leased.leasedSince!)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(leased.leasedUntil!)).toBeGreaterThan(Date.parse(leased.leasedSince!));
    expect(leased.reason).toBe(
      `leased by worker invocation 1234 since ${leased.leasedSince} (until ${leased.leasedUntil})`,
    );
    release();
    await consuming;
    const done = await corq.key("s", "a");
    expect(done).toMatchObject({ status: "idle", reason: "idle: nothing queued" });
    expect(done).not.toHaveProperty("holder");
  });

  it("the default holder names the process, and tells two instances apart", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const definition = { name: "s", handle: () => gate };
    const { corq, another } = await open({ subscriptions: [definition] });
    const second = another({ subscriptions: [definition] });
    await corq.append("a", [e("1")]);
    await corq.append("b", [e("1")]);
    await corq.advance();
    const consuming = [corq.consume("s"), second.consume("s")];
    await until(async () => (await corq.keys("s", { status: "leased" })).length === 2, { message: "never leased" });
    const holders = (await corq.keys("s")).map((k) => k.holder);
    for (const holder of holders)
      expect(holder).toMatch(new RegExp(`^process ${process.pid}( on \\S+)? \\([0-9a-f]{8}\\)$`));
    expect(new Set(holders).size).toBe(2);
    release();
    await Promise.all(consuming);
  });

  it("says why, in words: dead, in backoff, ready, paused subscription", async () => {
    let failures = 0;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          maxAttempts: 3,
          backoff: { initialMs: 60_000, maxMs: 60_000, factor: 1 },
          handle: (_events, ctx) => {
            if (ctx.key !== "ok") {
              failures++;
              throw new Error("down");
            }
          },
        },
      ],
    });
    const { positions } = await corq.append("dead", [e("1")]);
    await corq.append("late", [e("1")]);
    await corq.advance();
    await corq.consume("s"); // dead: first attempt fails, in backoff
    await corq.consume("s"); // late: in backoff
    await raw.query("UPDATE corq.keys SET attempts = 2, available_at = now() WHERE key = 'dead'");
    await corq.consume("s"); // dead: third attempt of three fails
    expect(failures).toBe(3);
    const dead = await corq.key("s", "dead");
    expect(dead.reason).toBe(
      `dead at position ${positions[0]} since ${present((await corq.deadLetters())[0], "the dead letter").deadAt} after 3 attempts: Error: down; retry or skip it (dead letters)`,
    );
    const late = await corq.key("s", "late");
    expect(late.reason).toBe(`in backoff until ${late.availableAt} (attempt 1 of 3 failed: Error: down)`);
    await corq.append("ok", [e("1")]);
    await corq.advance();
    const ready = await corq.key("s", "ok");
    expect(ready.reason).toBe(`ready since ${ready.availableAt}, waiting for a consumer`);
    await corq.pause("s");
    expect((await corq.key("s", "ok")).reason).toBe("the subscription is paused");
  });
});
