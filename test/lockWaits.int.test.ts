// Leases and fences against the clock of the moment a row is locked, not of the statement's
// start: each test holds a key row locked (as an advancer or another consumer would) longer
// than the lease, so the statement that waits for it sees a stale now().
import { describe, expect, it } from "vitest";
import type pg from "pg";
import type { StoredEvent } from "../src/index.js";
import { sleep, useCorq } from "./helpers/corq.js";
import { until, within } from "./helpers/until.js";
import { reportScenario } from "./helpers/chaos.js";
import { present } from "./helpers/present.js";

const open = useCorq();

/** Locks one key row in a transaction of its own; resolves when the lock is held. */
async function holdKeyRow(raw: pg.Pool, key: string): Promise<{ release(): Promise<void> }> {
  const client = await raw.connect();
  await client.query("BEGIN");
  await client.query("SELECT 1 FROM corq.keys WHERE key = $1 FOR UPDATE", [key]);
  return {
    release: async () => {
      await client.query("COMMIT");
      client.release();
    },
  };
}

describe("a claim next to a locked key", () => {
  it("skips the key whose row another session holds and claims the next one, without waiting", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.append("first", [{ name: "E", data: {} }]);
    await corq.advance(); // "first" has waited longest
    await corq.append("second", [{ name: "E", data: {} }]);
    await corq.advance();
    const held = await holdKeyRow(raw, "first"); // as an advancer bumping it would
    try {
      // concurrent consumers take different keys: a claim that waited here would serialise them
      const claimed = await within(corq.consume("s"), {
        timeoutMs: 3000,
        message: "the claim waited for the locked key",
      });
      expect(claimed).toMatchObject({ key: "second", outcome: "acked" });
    } finally {
      await held.release();
    }
    expect(await corq.consume("s")).toMatchObject({ key: "first", outcome: "acked" });
  });
});

describe("a statement that waited on a row lock", () => {
  it("ack+claim after a lock wait longer than the lease grants a full lease: one holder per key", async () => {
    const LEASE = 1000;
    const running = new Set<string>();
    const overlaps: string[] = [];
    const order: string[] = [];
    let lock: Promise<{ release(): Promise<void> }> | undefined;
    let secondStarted: () => void = () => undefined;
    const second = new Promise<void>((resolve) => (secondStarted = resolve));
    const rooms = {
      name: "rooms",
      leaseMs: LEASE,
      handle: async (_events: StoredEvent[], ctx: { key: string }) => {
        if (running.has(ctx.key)) overlaps.push(ctx.key);
        running.add(ctx.key);
        order.push(ctx.key);
        if (order.length === 1) {
          // while this batch is handled, another session locks its key row: the drain's
          // ack+claim statement waits for it 1.5 s — longer than the lease
          lock = holdKeyRow(raw, ctx.key);
          await lock;
        } else {
          secondStarted();
          await sleep(600); // the second key's handler runs on, well inside a fresh lease
        }
        running.delete(ctx.key);
      },
    };
    const { corq, raw, another } = await open({ subscriptions: [rooms] });
    await corq.append("k1", [{ name: "E", data: {} }]);
    await corq.append("k2", [{ name: "E", data: {} }]);
    await corq.advance();
    // one key per claim: the claim of the second key is the one that waited
    const draining = corq.drain("rooms", { budgetMs: 10_000, keysPerClaim: 1 });
    await until(() => lock !== undefined, { message: "the drain never handled its first batch" });
    const held = await lock!;
    await sleep(1500);
    await held.release();
    await within(second, { message: "the drain never claimed the other key after its wait" });
    // a rival consumer, quick to handle what it gets: it may take the first key (whose lease
    // ran out during the wait), never the one the drain is still handling
    const rival = another({
      subscriptions: [
        {
          ...rooms,
          handle: (_events: StoredEvent[], ctx: { key: string }) =>
            void (running.has(ctx.key) && overlaps.push(ctx.key)),
        },
      ],
      poolSize: 1,
    });
    const taken = [await rival.consume("rooms"), await rival.consume("rooms")];
    await draining;
    const doubleClaims = overlaps.length + taken.filter((t) => t?.key === order[1]).length;
    reportScenario({ scenario: "lock wait longer than the lease", events: 2, lost: 0, order: 0, doubleClaims, dup: 0 });
    expect(taken.map((t) => t?.key)).not.toContain(order[1]);
    expect(overlaps).toEqual([]);
  });

  it("an ack that waited past its lease is refused even if nobody claimed the key since", async () => {
    const { corq, raw } = await open({
      subscriptions: [{ name: "s", leaseMs: 500, handle: async (_e, ctx) => void (await wait(ctx.key)) }],
    });
    let wait: (key: string) => Promise<void> = async () => undefined;
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    wait = async (key) => {
      const held = await holdKeyRow(raw, key);
      setTimeout(() => void held.release(), 900); // the ack waits until the lease is over
    };
    expect(await corq.consume("s")).toMatchObject({ key: "k", outcome: "expired" });
    expect(await corq.subscription("s")).toMatchObject({ pending: 1 });
  });

  it("a fail that waited past its lease is refused: no attempt counted, no backoff set", async () => {
    let wait: (key: string) => Promise<void> = async () => undefined;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          leaseMs: 500,
          handle: async (_e, ctx) => {
            await wait(ctx.key);
            throw new Error("no");
          },
        },
      ],
    });
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    wait = async (key) => {
      const held = await holdKeyRow(raw, key);
      setTimeout(() => void held.release(), 900);
    };
    expect(await corq.consume("s")).toMatchObject({ key: "k", outcome: "expired" });
    const { rows } = await raw.query("SELECT attempts, last_error FROM corq.keys WHERE key = 'k'");
    expect(rows).toEqual([{ attempts: 0, last_error: null }]);
  });
});

describe("a multi-key settle that waited on one key's row", () => {
  // each key's fence reads the clock after ITS row was locked: the key whose row the statement
  // waited for past its lease is refused, the key locked before the wait is settled
  for (const outcome of ["ack", "fail"] as const) {
    it(`${outcome}s the key locked in time and refuses the one whose lease ran out during the wait`, async () => {
      let started = 0;
      let finish: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (finish = resolve));
      const { corq, raw } = await open({
        subscriptions: [
          {
            name: "s",
            leaseMs: 1000,
            handle: async () => {
              started++;
              await gate;
              if (outcome === "fail") throw new Error("no");
            },
          },
        ],
      });
      await corq.append("a", [{ name: "E", data: {} }]);
      await corq.append("b", [{ name: "E", data: {} }]);
      await corq.advance();
      const draining = corq.drain("s", { budgetMs: 10_000, keysPerClaim: 2, maxBatches: 2 });
      await until(() => started === 2, { message: "the drain never ran both keys at once" });
      const held = await holdKeyRow(raw, "b"); // settled after "a" (key order): waited for
      finish();
      await sleep(1500);
      await held.release();
      const { batches } = await draining;
      expect(batches).toBe(2);
      const { rows } = await raw.query("SELECT key, pending, attempts FROM corq.keys ORDER BY key");
      expect(rows).toEqual([
        { key: "a", pending: outcome === "ack" ? 0 : 1, attempts: outcome === "ack" ? 0 : 1 },
        { key: "b", pending: 1, attempts: 0 },
      ]);
    });
  }
});

describe("an expired lease nobody took over", () => {
  // the stale-ack test elsewhere acks after another consumer took the key; here nobody did,
  // so only the time fence (not the token) can refuse the late outcome
  for (const outcome of ["ack", "fail", "ack+claim"] as const) {
    it(`refuses a late ${outcome}: the queue is unchanged`, async () => {
      const { corq, raw } = await open({
        subscriptions: [
          {
            name: "s",
            leaseMs: 200,
            handle: async () => {
              await sleep(350);
              if (outcome === "fail") throw new Error("late");
            },
          },
        ],
      });
      await corq.append("k", [
        { name: "E", data: {} },
        { name: "E", data: {} },
      ]);
      await corq.advance();
      const result =
        outcome === "ack+claim"
          ? (await corq.drain("s", { budgetMs: 5_000, maxBatches: 2 })).first
          : await corq.consume("s");
      expect(result).toMatchObject({ key: "k", outcome: "expired" });
      const { rows } = await raw.query("SELECT count(*)::int AS queued FROM corq.queue");
      expect(rows[0].queued).toBe(2);
      const [key] = await corq.keys("s");
      expect(key).toMatchObject({ pending: 2, lastPosition: null });
      // (ack+claim took the expired lease over as its next claim: that counts an attempt)
      if (outcome !== "ack+claim") expect(present(key, "key k").attempts).toBe(0);
    });
  }
});
