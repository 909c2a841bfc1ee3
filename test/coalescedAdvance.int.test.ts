// Coalesced advancers: one per subscription at a time; the others return at once, and the
// one at work runs again for the kicks that came meanwhile — no wake-up is lost.
import { describe, expect, it } from "vitest";
import type pg from "pg";
import type { CorqRuntime } from "../src/internal.js";
import { sleep, useCorq } from "./helpers/corq.js";
import { present } from "./helpers/present.js";

const open = useCorq();

/**
 * From now on an advance round spends a second enqueueing for `key`: a delay injected in
 * Postgres (no lock, no transaction held, nothing else slowed down), so it is "at work".
 */
async function slowEnqueueing(raw: pg.Pool, key: string) {
  await raw.query(`
    CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$;
    CREATE TRIGGER slow BEFORE INSERT ON corq.queue FOR EACH ROW WHEN (NEW.key = '${key}') EXECUTE FUNCTION slow();`);
}

const ev = { name: "E", data: {} };

/** Key "a" queued once; the next advance round spends a second enqueueing a second "a" event. */
async function slowRoundAhead(corq: CorqRuntime, raw: pg.Pool) {
  await corq.append("a", [ev]);
  await corq.advance();
  await slowEnqueueing(raw, "a");
  await corq.append("a", [ev]);
}

describe("coalesced advance", () => {
  it("an advance that finds another one at work returns at once; the one at work runs again for its kick", async () => {
    const { corq, raw, another } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await slowRoundAhead(corq, raw);
    const first = corq.advance(); // at work for a second
    await sleep(300);
    // an event appended now is past the round's snapshot; its kick finds the advancer at work
    await corq.append("b", [ev]);
    const other = another({ subscriptions: [{ name: "s", handle: () => undefined }] });
    const started = Date.now();
    expect(await other.advance({ coalesce: true })).toEqual({ s: 0 });
    expect(Date.now() - started).toBeLessThan(250); // returned at once, did not wait for the round
    // the advancer at work saw the kick and ran again: "b" is queued without another advance
    expect(await first).toEqual({ s: 2 });
    const { rows } = await raw.query("SELECT key, pending FROM corq.keys ORDER BY key");
    expect(rows).toEqual([
      { key: "a", pending: 2 },
      { key: "b", pending: 1 },
    ]);
  });

  it("recheckIf: a run told its next run follows leaves the others' kicks to that run, which takes their events", async () => {
    const { corq, raw, another } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await slowRoundAhead(corq, raw);
    const asked: boolean[] = [];
    const first = corq.advance({
      coalesce: true,
      recheckIf: () => {
        asked.push(true);
        return false;
      },
    });
    await sleep(300);
    await corq.append("b", [ev]);
    const other = another({ subscriptions: [{ name: "s", handle: () => undefined }] });
    expect(await other.advance({ coalesce: true })).toEqual({ s: 0 }); // left its kick with the one at work
    expect(await first).toEqual({ s: 1 }); // no re-check: "b" is not queued yet
    expect(asked).toEqual([true]);
    const queued = async () => (await raw.query("SELECT key FROM corq.queue ORDER BY key")).rows.map((r) => r.key);
    expect(await queued()).toEqual(["a", "a"]);
    // the run that follows (as the caller promised) takes it
    expect(await corq.advance({ coalesce: true, recheckIf: () => true })).toEqual({ s: 1 });
    expect(await queued()).toEqual(["a", "a", "b"]);
  });

  it("an advance that is not a kick waits for the one at work: when it returns, what came before it is enqueued", async () => {
    const { corq, raw, another } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await slowRoundAhead(corq, raw);
    const first = corq.advance({ coalesce: true });
    await sleep(300);
    await corq.append("b", [ev]);
    const other = another({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await other.advance(); // waits its turn, then advances past "b" itself
    const { rows } = await raw.query("SELECT key FROM corq.queue ORDER BY key");
    expect(rows.map((r) => r.key)).toEqual(["a", "a", "b"]);
    await first;
  });

  it("many advances at once enqueue each event once", async () => {
    const { corq, raw, another } = await open({
      subscriptions: [{ name: "s", key: "data.k", handle: () => undefined }],
    });
    const advancers = Array.from({ length: 8 }, () =>
      another({ subscriptions: [{ name: "s", key: "data.k", handle: () => undefined }], poolSize: 1 }),
    );
    await corq.advance();
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        await corq.append(`s${i % 5}`, [{ name: "E", data: { k: `k${i % 7}` } }]);
        await present(advancers[i % 8], `advancer ${i % 8}`).advance({ coalesce: i % 2 === 0 });
      }),
    );
    await corq.advance();
    const { rows } = await raw.query(
      "SELECT count(*)::int AS queued, count(DISTINCT position)::int AS distinct FROM corq.queue",
    );
    expect(rows[0]).toEqual({ queued: 40, distinct: 40 });
  });

  it("an append's kick advances only the subscriptions that take its event names; an advance without names, all", async () => {
    const noop = () => undefined;
    const { corq, raw } = await open({
      subscriptions: [
        { name: "takes-a", events: ["A"], handle: noop },
        { name: "takes-b", events: ["B"], handle: noop },
        { name: "takes-all", events: ["*"], handle: noop },
        { name: "takes-a-fn", events: ["A", "C"], key: (e) => e.stream, handle: noop },
      ],
    });
    await corq.advance();
    await corq.append("x", [
      { name: "A", data: {} },
      { name: "B", data: {} },
    ]);
    const kicks = async () =>
      Object.fromEntries(
        (
          await raw.query(
            "SELECT s.name, coalesce(k.kicked, 0)::int AS kicked FROM corq.subscriptions s LEFT JOIN corq.advance_kicks k ON k.subscription_id = s.id",
          )
        ).rows.map((r) => [r.name, r.kicked]),
      );
    const before = await kicks();
    expect(await corq.advance({ coalesce: true, eventNames: ["A"] })).toEqual({
      "takes-a": 1,
      "takes-all": 2,
      "takes-a-fn": 1,
    });
    const after = await kicks();
    expect(after["takes-b"]).toBe(before["takes-b"]);
    for (const name of ["takes-a", "takes-all", "takes-a-fn"]) expect(after[name], name).toBe(before[name] + 1);
    // the subscription that was left out is moved by the next advance of all (the cron's)
    expect(await corq.advance({ coalesce: true })).toEqual({
      "takes-a": 0,
      "takes-b": 1,
      "takes-all": 0,
      "takes-a-fn": 0,
    });
  });

  it("a kick enqueues its own events, then claims slots beside the re-check, and claims slots for what the re-check enqueued", async () => {
    const subs = [{ name: "s", handle: () => undefined }];
    const slots = { max: 4, want: 4, holdMs: 10_000, codeSubscriptions: ["s"] };
    const { corq, raw, another } = await open({ subscriptions: subs });
    await corq.append("a", [ev]);
    await corq.advance();
    expect((await corq.consume("s"))?.key).toBe("a"); // key "a" idle again
    await slowEnqueueing(raw, "a");
    await corq.append("a", [ev]);
    const first = corq.kick({ slots }); // at work for a second
    await sleep(300);
    await corq.append("b", [ev]);
    const other = another({ subscriptions: subs });
    // finds the advancer at work: returns at once, nothing ready yet, no slot — and "b" waiting
    // above the horizon (the advancer's transaction is older and still open)
    expect(await other.kick({ eventNames: ["E"], slots })).toEqual({
      advanced: { s: 0 },
      ready: [],
      consumers: [],
      slots: [],
      waiting: expect.any(String),
    });
    // the one at work enqueued "a", claimed its slot, re-checked, enqueued "b" and claimed one for it
    // (whether events wait above the horizon then depends on other tests' transactions: the horizon is the cluster's)
    expect(await first).toMatchObject({ advanced: { s: 2 }, ready: [["s", 2]], slots: [1, 2] });
  });

  it("the slot claim counts the ready keys of this dispatcher's subscriptions only: a paused key, or another app's code subscription, starts no consumer", async () => {
    const noop = () => undefined;
    const { corq } = await open({
      subscriptions: [
        { name: "s", handle: noop },
        { name: "elsewhere", handle: noop },
      ],
    });
    for (const key of ["a", "b", "c"]) await corq.append(key, [ev]);
    await corq.advance();
    await corq.pauseKey("s", "b");
    const slots = { max: 8, want: 8, holdMs: 10_000, codeSubscriptions: ["s"] };
    expect(await corq.claimSlots(slots)).toMatchObject({ ready: [["s", 2]], slots: [1, 2] });
  });

  it("a slot per keysPerClaim ready keys of each subscription, rounded up: 5 ready keys in each of 2 subscriptions, 2 per claim, want 6 consumers, not 10", async () => {
    const noop = () => undefined;
    const { corq } = await open({
      subscriptions: [
        { name: "s", handle: noop },
        { name: "t", handle: noop },
      ],
    });
    for (const key of ["a", "b", "c", "d", "e"]) await corq.append(key, [ev]);
    await corq.advance();
    const codeSubscriptions = ["s", "t"];
    const claim = async (options: { max: number; keysPerClaim?: number; covered?: number }) => {
      const plan = await corq.claimSlots({ want: options.max, holdMs: 10_000, codeSubscriptions, ...options });
      for (const slot of plan.slots) await corq.releaseSlot(slot);
      const sorted = (pairs: [string, number][]) => [...pairs].sort(([a], [b]) => a.localeCompare(b));
      return { ready: sorted(plan.ready), consumers: sorted(plan.consumers), slots: plan.slots.length };
    };
    // a slot per ready key unless told: 10 wanted, 8 slots
    expect(await claim({ max: 8 })).toEqual({
      ready: [
        ["s", 5],
        ["t", 5],
      ],
      consumers: [
        ["s", 5],
        ["t", 5],
      ],
      slots: 8,
    });
    expect(await claim({ max: 8, keysPerClaim: 2 })).toMatchObject({
      consumers: [
        ["s", 3],
        ["t", 3],
      ],
      slots: 6,
    });
    expect(await claim({ max: 8, keysPerClaim: 4 })).toMatchObject({ slots: 4 });
    expect(await claim({ max: 8, keysPerClaim: 16 })).toMatchObject({ slots: 2 });
    // a second look that holds 4 slots already claims the 2 more its keys want, and one that holds 6, none
    expect(await claim({ max: 8, keysPerClaim: 2, covered: 4 })).toMatchObject({ slots: 2 });
    expect(await claim({ max: 8, keysPerClaim: 2, covered: 6 })).toMatchObject({ slots: 0 });
    // ready keys are counted up to max × keysPerClaim (enough to fill every slot), not up to max
    expect(await claim({ max: 2, keysPerClaim: 2 })).toEqual({
      ready: [
        ["s", 4],
        ["t", 4],
      ],
      consumers: [
        ["s", 2],
        ["t", 2],
      ],
      slots: 2,
    });
    // a kick plans the same way
    const kicked = await corq.kick({ slots: { max: 8, want: 8, holdMs: 10_000, codeSubscriptions, keysPerClaim: 4 } });
    expect(kicked.slots).toHaveLength(4);
  });
});
