import { describe, expect, it } from "vitest";
import { reportScenario, tally } from "./helpers/chaos.js";
import type { StoredEvent } from "../src/index.js";
import { drain, sleep, useCorq } from "./helpers/corq.js";
import { until, within } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();

describe("concurrent consumers", () => {
  it("8 consumers over hundreds of keys never run one key twice at once and keep per-key order", async () => {
    const KEYS = 300;
    const PER_KEY = 8;
    const running = new Set<string>();
    let overlaps = 0;
    const handled = new Map<string, number[]>();
    const rooms = {
      name: "rooms",
      key: "data.roomId",
      batchSize: 3,
      handle: async (events: StoredEvent[], ctx: { key: string }) => {
        if (running.has(ctx.key)) overlaps++;
        running.add(ctx.key);
        await sleep(Math.random() * 3);
        handled.set(ctx.key, [...(handled.get(ctx.key) ?? []), ...events.map((e) => e.position)]);
        running.delete(ctx.key);
      },
    };
    const { corq, another } = await open({ subscriptions: [rooms] });
    // events of one room come from several streams, interleaved
    const expected = new Map<string, number[]>();
    for (let round = 0; round < PER_KEY; round++) {
      const events = Array.from({ length: KEYS }, (_, k) => ({
        name: "Arrived",
        data: { roomId: `room-${k}`, round },
      }));
      const { positions } = await corq.append(`visitors-${round % 3}`, events);
      for (const [k, p] of positions.entries()) expected.set(`room-${k}`, [...(expected.get(`room-${k}`) ?? []), p]);
    }
    await corq.advance();
    // 8 separate corq instances (separate pools and connections), each claiming in a loop
    let consumers = 0;
    const workers = Array.from({ length: 8 }, async () => {
      const consumer = another({ subscriptions: [rooms], poolSize: 1 });
      // half the workers claim batch by batch, half drain (ack and next claim in one statement)
      if (consumers++ % 2 === 0) return (await consumer.drain("rooms")).batches;
      let batches = 0;
      while ((await consumer.consume("rooms")) !== null) {
        if (++batches > KEYS * PER_KEY) throw new Error("more batches than events: a key never runs out");
      }
      return batches;
    });
    // (a consume that never returns — a key whose pending count says work but whose queue is
    // empty is claimed again and again — fails here, not at the test timeout)
    const finished = await within(Promise.all(workers), { timeoutMs: 20_000, message: "the consumers did not finish" });
    const batches = finished.reduce((a, b) => a + b, 0);
    expect(overlaps).toBe(0);
    expect(handled).toEqual(expected);
    expect(batches).toBeGreaterThanOrEqual((KEYS * PER_KEY) / 3);
    expect(await corq.subscription("rooms")).toMatchObject({
      pending: 0,
      keys: { ready: 0, leased: 0, backoff: 0, dead: 0 },
    });
  });
});

describe("leases", () => {
  it("hands an unacked batch to another consumer after the lease expires and rejects the stale ack", async () => {
    const deliveries: { attempt: number; positions: number[] }[] = [];
    let release: () => void = () => undefined;
    let firstCall = true;
    const { corq } = await open({
      subscriptions: [
        {
          name: "slow",
          leaseMs: 400,
          handle: async (events: StoredEvent[], ctx) => {
            deliveries.push({ attempt: ctx.attempt, positions: events.map((e) => e.position) });
            if (firstCall) {
              firstCall = false;
              await new Promise<void>((resolve) => (release = resolve)); // outlives its lease
            }
          },
        },
      ],
    });
    const { positions } = await corq.append("v1", [
      { name: "A", data: {} },
      { name: "B", data: {} },
    ]);
    await corq.advance();
    const stuck = corq.consume("slow");
    await until(() => deliveries.length > 0, { message: "the first consumer never got the batch" }); // it is in its handler now
    const whileLeased = await corq.consume("slow");
    expect(whileLeased).toBeNull(); // leased: nobody else may take the key
    expect((await corq.subscription("slow")).keys.leased).toBe(1);
    await sleep(450);
    // the lease expired: the batch goes to the next consumer (the expiry counts as an attempt,
    // so only the head is handed out until one succeeds)
    expect(await corq.consume("slow")).toEqual({ key: "v1", events: 1, outcome: "acked" });
    release();
    const late = await stuck;
    expect(late).toMatchObject({ key: "v1", outcome: "expired" });
    expect(await corq.consume("slow")).toEqual({ key: "v1", events: 1, outcome: "acked" });
    expect(deliveries).toEqual([
      { attempt: 1, positions },
      { attempt: 2, positions: [positions[0]] },
      { attempt: 1, positions: [positions[1]] },
    ]);
    expect(await corq.keys("slow")).toMatchObject([
      { key: "v1", status: "idle", pending: 0, lastPosition: positions[1] },
    ]);
    const figures = tally(
      new Map([["v1", positions]]),
      deliveries.flatMap((d) => d.positions.map((position) => ({ key: "v1", position }))),
    );
    // the late ack changed nothing: the key's one lease passed to the new holder, who did the batch once
    reportScenario({
      scenario: "slow consumer outlives its lease",
      ...figures,
      doubleClaims: whileLeased === null ? 0 : 1,
      notes: { late_ack: late?.outcome ?? "none" },
    });
    expect(figures).toMatchObject({ lost: 0, order: 0, dup: 2 }); // the slow holder's two events, done again by the new holder
  });
});

describe("fences", () => {
  it("refuses a late ack while another consumer holds the key (the lease token, not only the time)", async () => {
    const gates: (() => void)[] = [];
    const { corq, another } = await open({
      subscriptions: [{ name: "t", leaseMs: 500, handle: () => new Promise<void>((resolve) => gates.push(resolve)) }],
    });
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    const first = corq.consume("t");
    await until(() => gates.length === 1, { message: "the first consumer never got the batch" });
    await sleep(600); // its lease is over; a second consumer takes the key over with a lease of its own
    const second = another({
      subscriptions: [{ name: "t", leaseMs: 500, handle: () => new Promise<void>((resolve) => gates.push(resolve)) }],
    }).consume("t");
    await until(() => gates.length === 2, { message: "the second consumer never took the key over" });
    present(gates[0], "the first consumer's gate")(); // the first one finishes now, while the second one's lease runs: its ack is refused
    expect(await first).toMatchObject({ key: "k", outcome: "expired" });
    present(gates[1], "the second consumer's gate")();
    expect(await second).toMatchObject({ key: "k", outcome: "acked" });
    expect(await corq.keys("t")).toMatchObject([{ key: "k", status: "idle", pending: 0 }]);
  });
});

describe("fairness", () => {
  it("claims the key that has waited longest first, whatever its name", async () => {
    const { corq } = await open({ subscriptions: [{ name: "f", handle: () => undefined }] });
    for (const stream of ["z", "m", "a"]) {
      await corq.append(stream, [{ name: "E", data: {} }]);
      await corq.advance(); // each key becomes ready at a moment of its own
      await sleep(2);
    }
    const claimed: (string | undefined)[] = [];
    for (let i = 0; i < 3; i++) claimed.push((await corq.consume("f"))?.key);
    expect(claimed).toEqual(["z", "m", "a"]);
  });
});

describe("crash loops", () => {
  it("dead-letters a key whose consumer never finishes, once its last lease expires", async () => {
    let calls = 0;
    const { corq } = await open({
      subscriptions: [
        {
          name: "hang",
          leaseMs: 60,
          maxAttempts: 2,
          handle: () => {
            calls++;
            return new Promise<void>(() => undefined);
          },
        },
      ],
    });
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    void corq.consume("hang"); // attempt 1 hangs
    await sleep(200);
    void corq.consume("hang"); // takes over the expired lease: attempt 2 hangs
    await sleep(200);
    expect(await corq.consume("hang")).toEqual({
      key: "k",
      events: 0,
      outcome: "dead",
      error: "lease expired on the last attempt",
    });
    expect(calls).toBe(2);
    expect(await corq.deadLetters()).toMatchObject([
      { key: "k", attempts: 2, lastError: "lease expired before the batch was acked" },
    ]);
  });
});

describe("failures", () => {
  it("backs off, then dead-letters the poison key alone while the other keys finish", async () => {
    const handled: string[] = [];
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "p",
          maxAttempts: 3,
          backoff: { initialMs: 40, maxMs: 1000, factor: 2 },
          handle: (events: StoredEvent[], ctx) => {
            if (events.some((e) => (e.data as { poison?: boolean }).poison))
              throw new Error(`cannot handle ${ctx.key}`);
            handled.push(ctx.key);
          },
        },
      ],
    });
    await corq.append("bad", [
      { name: "X", data: { poison: true } },
      { name: "Y", data: {} },
    ]);
    for (let i = 0; i < 20; i++) await corq.append(`good-${i}`, [{ name: "X", data: {} }]);
    await corq.advance();
    const outcomes: string[] = [];
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const result = await corq.consume("p");
      if (result === null) {
        if ((await corq.subscription("p")).keys.dead === 1) break;
        await sleep(10);
        continue;
      }
      if (result.key === "bad") outcomes.push(result.outcome);
    }
    expect(outcomes).toEqual(["retry", "retry", "dead"]);
    expect(new Set(handled).size).toBe(20);
    const { rows } = await raw.query(
      "SELECT attempts, (available_at - now()) AS wait FROM corq.keys WHERE key = 'bad'",
    );
    expect(rows[0].attempts).toBe(3);
    const stats = await corq.subscription("p");
    expect(stats).toMatchObject({ pending: 2, keys: { dead: 1, ready: 0, backoff: 0 } });
    const [dead] = await corq.deadLetters({ subscription: "p" });
    expect(dead).toMatchObject({ subscription: "p", key: "bad", attempts: 3, lastError: "Error: cannot handle bad" });
    expect(present(dead, "key bad's dead letter").position).toBe(
      present((await corq.readStream("bad"))[0], "stream bad's first event").position,
    );
  });

  // consume() fails a batch with failBatch, a drain with settleKeys: the same rule in two
  // statements, so each path is tested. Backoffs of minutes (the waits are skipped by setting
  // available_at), rounded up to 10 s: a pause of seconds between the failure and the read of
  // available_at (a loaded machine) cannot make 60 s look like 50 s or 120 s.
  it.each(["consume", "drain"] as const)(
    "computes the backoff in SQL: initialMs · factor^(attempts-1), capped at maxMs (%s)",
    async (path) => {
      const { corq, raw } = await open({
        subscriptions: [
          {
            name: "b",
            maxAttempts: 10,
            backoff: { initialMs: 60_000, maxMs: 180_000, factor: 2 },
            handle: () => {
              throw new Error("no");
            },
          },
        ],
      });
      await corq.append("k", [{ name: "X", data: {} }]);
      await corq.advance();
      const waits: number[] = [];
      for (let i = 0; i < 4; i++) {
        if (path === "consume") expect(await corq.consume("b")).toMatchObject({ outcome: "retry" });
        else expect((await corq.drain("b", { keysPerClaim: 4 })).first).toMatchObject({ outcome: "retry" });
        const { rows } = await raw.query("SELECT extract(epoch FROM available_at - now()) * 1000 AS ms FROM corq.keys");
        waits.push(Math.ceil(Number(present(rows[0], "key k's row").ms) / 10_000) * 10_000);
        await raw.query("UPDATE corq.keys SET available_at = now()"); // skip the wait
      }
      // the first retry waits initialMs, not initialMs · factor
      expect(waits).toEqual([60_000, 120_000, 180_000, 180_000]);
      expect((await corq.keys("b", { status: "ready" }))[0]).toMatchObject({ attempts: 4, lastError: "Error: no" });
    },
  );

  // A key dies in failBatch (consume) or settleKeys (a drain); the advance that queues its next
  // events must leave it dead either way. The handler would now succeed: only an operator's
  // retry or skip may let the key go on.
  it.each(["consume", "drain"] as const)(
    "a dead key that receives new events stays dead (never claimed) until retried (%s)",
    async (path) => {
      let poisoned = true;
      const handled: string[] = [];
      const { corq } = await open({
        subscriptions: [
          {
            name: "d",
            maxAttempts: 2,
            backoff: { initialMs: 0, maxMs: 0, factor: 1 },
            handle: (events: StoredEvent[], ctx) => {
              if (poisoned && ctx.key === "k") throw new Error("poison");
              handled.push(...events.map((e) => `${ctx.key}:${(e.data as { n: string }).n}`));
            },
          },
        ],
      });
      const ev = (n: string) => ({ name: "E", data: { n } });
      const run = async () => {
        if (path === "consume") return void (await drain(corq, "d"));
        await corq.advance();
        await corq.drain("d", { keysPerClaim: 4 });
      };
      await corq.append("k", [ev("1")]);
      await run();
      expect(await corq.key("d", "k")).toMatchObject({ status: "dead", attempts: 2, pending: 1 });
      poisoned = false;
      await corq.append("k", [ev("2")]);
      await corq.append("other", [ev("x")]);
      await run();
      expect(handled).toEqual(["other:x"]);
      expect(await corq.key("d", "k")).toMatchObject({ status: "dead", attempts: 2, pending: 2 });
      expect((await corq.subscription("d")).keys).toMatchObject({ dead: 1, ready: 0 });
      expect(await corq.releaseDeadLetters({ subscription: "d", key: "k" })).toEqual({ released: 1 });
      await run();
      expect(handled).toEqual(["other:x", "k:1", "k:2"]);
    },
  );

  it("retry resumes a dead key from the failed event; skip drops it and continues in order", async () => {
    let poisoned = new Set<string>(["1"]);
    const handled: string[] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "r",
          maxAttempts: 1,
          handle: (events: StoredEvent[]) => {
            const bad = events.find((e) => poisoned.has((e.data as { n: string }).n));
            if (bad) throw new Error(`poison ${(bad.data as { n: string }).n}`);
            handled.push(...events.map((e) => (e.data as { n: string }).n));
          },
        },
      ],
    });
    const ev = (n: string) => ({ name: "E", data: { n } });
    await corq.append("k", [ev("0")]);
    await drain(corq, "r");
    await corq.append("k", [ev("1"), ev("2")]);
    await corq.append("other", [ev("x")]);
    await drain(corq, "r");
    expect(handled).toEqual(["0", "x"]);
    expect((await corq.deadLetters()).map((d) => d.key)).toEqual(["k"]);

    // retry while still poisoned: dead again, nothing delivered out of order
    expect(await corq.releaseDeadLetters({ subscription: "r", key: "k" })).toEqual({ released: 1 });
    await drain(corq, "r");
    expect(handled).toEqual(["0", "x"]);

    // skip: "1" is acknowledged without delivery, "2" follows
    expect(await corq.releaseDeadLetters({ subscription: "r", mode: "skip" })).toEqual({ released: 1 });
    await corq.append("k", [ev("3")]);
    await drain(corq, "r");
    expect(handled).toEqual(["0", "x", "2", "3"]);
    expect(await corq.keys("r", { status: "idle" })).toHaveLength(2);

    // retry after the cause is fixed: delivered from the failed event, in order
    poisoned = new Set(["4"]);
    await corq.append("k", [ev("4"), ev("5")]);
    await drain(corq, "r");
    poisoned = new Set();
    expect(await corq.releaseDeadLetters({ subscription: "r", mode: "retry" })).toEqual({ released: 1 });
    expect(await corq.releaseDeadLetters({ subscription: "r", mode: "retry" })).toEqual({ released: 0 });
    await drain(corq, "r");
    expect(handled).toEqual(["0", "x", "2", "3", "4", "5"]);
    await expect(corq.releaseDeadLetters({ subscription: "nope" })).rejects.toMatchObject({
      code: "unknown_subscription",
    });
  });

  // DESIGN.md invariant 11: a per-key operation is tested with two keys in that state
  it.each(["retry", "skip"] as const)("%s of one dead key of several releases that key only", async (mode) => {
    const handled: string[] = [];
    let poisoned = true;
    const { corq } = await open({
      subscriptions: [
        {
          name: "r",
          maxAttempts: 1,
          handle: (events: StoredEvent[], ctx) => {
            if (poisoned) throw new Error("poison");
            handled.push(...events.map((e) => `${ctx.key}:${(e.data as { n: string }).n}`));
          },
        },
      ],
    });
    for (const key of ["a", "b", "c"]) await corq.append(key, [{ name: "E", data: { n: "1" } }]);
    await drain(corq, "r");
    const deadKeys = async () => (await corq.deadLetters({ subscription: "r" })).map((d) => d.key).sort();
    expect(await deadKeys()).toEqual(["a", "b", "c"]);
    poisoned = false;
    expect(await corq.releaseDeadLetters({ subscription: "r", key: "b", mode })).toEqual({ released: 1 });
    expect(await deadKeys()).toEqual(["a", "c"]);
    await drain(corq, "r");
    expect(handled).toEqual(mode === "retry" ? ["b:1"] : []);
    expect(await corq.key("r", "b")).toMatchObject({ status: "idle", pending: 0 });
    expect(await corq.key("r", "a")).toMatchObject({ status: "dead", pending: 1 });
  });

  it("acks a prefix with ackedThrough and delivers the rest next, in order", async () => {
    const seen: number[][] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "partial",
          handle: (events: StoredEvent[]) => {
            seen.push(events.map((e) => e.position));
            const [, second] = events;
            return second ? { ackedThrough: second.position } : undefined;
          },
        },
      ],
    });
    const { positions } = await corq.append(
      "k",
      Array.from({ length: 5 }, () => ({ name: "E", data: {} })),
    );
    await drain(corq, "partial");
    expect(seen).toEqual([positions, positions.slice(2), positions.slice(4)]);
  });

  it("fails the batch when ackedThrough is not a position of it", async () => {
    const { corq } = await open({
      subscriptions: [{ name: "wrong", maxAttempts: 1, handle: () => ({ ackedThrough: 123456 }) }],
    });
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    expect(await corq.consume("wrong")).toMatchObject({
      outcome: "dead",
      error: "Error: ackedThrough 123456 is not a position of this batch",
    });
  });

  it("pauses and resumes consumption", async () => {
    const { corq } = await open({ subscriptions: [{ name: "pz", handle: () => undefined }] });
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.pause("pz");
    expect(await corq.consume("pz")).toBeNull();
    expect(await corq.subscription("pz")).toMatchObject({ paused: true, pending: 1 });
    await corq.resume("pz");
    expect(await corq.consume("pz")).toMatchObject({ outcome: "acked" });
    await expect(corq.pause("nope")).rejects.toMatchObject({ code: "unknown_subscription" });
  });
});

describe("claims racing acks", () => {
  it("a claim whose snapshot predates another consumer's ack of the same key does not repeat what was acked", async () => {
    // The interleaving the benchmark hit: an advance that started early (its now() is old)
    // makes B ready again only after Y acked it, while X's ack+claim statement, whose snapshot
    // still shows b1 b2 queued, waited on a row lock.
    const seen: string[] = [];
    let releaseX: () => void = () => undefined;
    const xHolds = new Promise<void>((resolve) => (releaseX = resolve));
    let holdA = true;
    const definition = {
      name: "snap",
      key: "data.k",
      handle: async (events: StoredEvent[], ctx: { key: string }) => {
        seen.push(...events.map((e) => (e.data as { n: string }).n));
        if (ctx.key === "A" && holdA) {
          holdA = false;
          await xHolds;
        }
      },
    };
    const { corq, another, raw } = await open({ subscriptions: [definition] });
    const ev = (k: string, n: string) => ({ name: "E", data: { k, n } });
    const waiters = async (n: number) => {
      for (let i = 0; ; i++) {
        const { rows } = await raw.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        );
        if (rows[0].n >= n) return;
        if (i > 500) throw new Error(`expected ${n} lock waiters`);
        await sleep(10);
      }
    };
    await corq.append("s", [ev("A", "a1")]);
    await corq.advance(); // A has waited longest: X claims it first
    await corq.append("s", [ev("B", "b1"), ev("B", "b2")]);
    await corq.advance();

    const x = another({ subscriptions: [definition], poolSize: 1 });
    const xDrain = x.drain("snap", { keysPerClaim: 1 }); // claims A (only), its handler holds
    await until(() => seen.length > 0, { message: "X never got its first batch" });
    // committed before the lock holder starts, so its xid does not hold them above the horizon
    await corq.append("s", [ev("A", "a2"), ev("B", "b3")]);
    const locker = await raw.connect();
    let advancing: Promise<unknown> = Promise.resolve();
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM corq.keys WHERE key = 'A' FOR UPDATE");
      advancing = another({ subscriptions: [definition], poolSize: 1 }).advance(); // waits on A
      await waiters(1);
      releaseX(); // X's ack of A + claim of the next key: snapshot taken, waits on A
      await waiters(2);
      const y = another({ subscriptions: [definition], poolSize: 1 });
      expect(await y.consume("snap")).toMatchObject({ key: "B", events: 2, outcome: "acked" });
    } finally {
      // also when an expectation failed: the statements waiting on A must finish, or closing waits for them
      releaseX();
      await locker.query("COMMIT").catch(() => undefined);
      locker.release();
    }
    await Promise.all([advancing, xDrain]);
    await drain(corq, "snap");
    expect(seen.sort()).toEqual(["a1", "a2", "b1", "b2", "b3"]);
    const { rows } = await raw.query(
      "SELECT (SELECT count(*) FROM corq.queue)::int AS queued, (SELECT sum(pending) FROM corq.keys)::int AS pending",
    );
    expect(rows[0]).toEqual({ queued: 0, pending: 0 });
  });

  it("never hands out an event again that another consumer acked while the claim waited (drains, advances and appends at once)", async () => {
    const seen = new Map<number, number>();
    const definition = {
      name: "race",
      key: "data.k",
      batchSize: 5,
      handle: (events: StoredEvent[]) => {
        for (const e of events) seen.set(e.position, (seen.get(e.position) ?? 0) + 1);
      },
    };
    const { corq, another, raw } = await open({ subscriptions: [definition], poolSize: 8 });
    const TOTAL = 6000;
    let done = false;
    const producers = Array.from({ length: 4 }, async (_, p) => {
      for (let b = 0; b < TOTAL / 4 / 100; b++) {
        await corq.append(
          `p${p}`,
          Array.from({ length: 100 }, (_, i) => ({ name: "E", data: { k: `k${(i * 7 + b) % 40}` } })),
        );
      }
    });
    const advancers = Array.from({ length: 2 }, async () => {
      const instance = another({ subscriptions: [definition], poolSize: 1 });
      while (!done) await instance.advance();
    });
    const drainers = Array.from({ length: 8 }, async () => {
      const instance = another({ subscriptions: [definition], poolSize: 1 });
      while (!done) if ((await instance.drain("race", { budgetMs: 200 })).batches === 0) await sleep(1);
    });
    await Promise.all(producers);
    const deadline = Date.now() + 20_000;
    while (seen.size < TOTAL && Date.now() < deadline) await sleep(20);
    done = true;
    await Promise.all([...advancers, ...drainers]);
    expect(seen.size).toBe(TOTAL);
    expect([...seen.values()].filter((n) => n > 1)).toEqual([]); // no lease expired: nothing twice
    const { rows } = await raw.query(
      "SELECT (SELECT count(*) FROM corq.queue)::int AS queued, (SELECT coalesce(sum(pending), 0) FROM corq.keys)::int AS pending",
    );
    expect(rows[0]).toEqual({ queued: 0, pending: 0 });
  });
});
