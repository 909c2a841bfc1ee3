// Erasure of one stream (corq.eraseStream): its events leave the log and every queue — keys of
// a stream key and of a JSON-path key that holds events of two streams, queued, leased, dead and
// paused — with the counts right and the seqs of what remains untouched; the tombstone keeps the
// stream's version; appends during an erasure, an interrupted erasure, and the races with a
// claim, a function-key advance and a subscription created during a round.
import { describe, expect, it } from "vitest";
import type pg from "pg";
import { PgDialect } from "drizzle-orm/pg-core";
import type { SQL } from "drizzle-orm";
import type { DeliveredEvent, HandlerContext, SubscriptionDefinition } from "../src/index.js";
import { CorqError } from "../src/index.js";
import { ADVANCING, advanceSubscription } from "../src/sql/advance/advanceSubscription.js";
import { readAdvanceBatch, writeAdvanceBatch } from "../src/sql/advance/advanceByFunction.js";
import { claimBatch, settleAndClaim, type ClaimRow } from "../src/sql/consume/claimBatch.js";
import { releaseLease } from "../src/sql/consume/releaseLease.js";
import { beginErasure, eraseRound, holdAdvancers } from "../src/sql/log/eraseStream.js";
import { drain, sleep, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const dialect = new PgDialect();

const run = async <T extends pg.QueryResultRow>(client: pg.Pool | pg.PoolClient, statement: SQL) => {
  const query = dialect.sqlToQuery(statement);
  return (await client.query<T>(query.sql, query.params)).rows;
};

type Data = { n: string; room?: string; fail?: boolean; block?: boolean };
const ev = (data: Data) => ({ name: "E", data });

/**
 * A subscription that records what it handles (`n` of each event, with its key and seq); a
 * batch with a `block` event waits until `gate.open()`, and (`failing`) one with a `fail` event throws.
 */
function recording(name: string, more: Partial<SubscriptionDefinition> = {}, failing = true) {
  const seen: { key: string; n: string; seq: number }[] = [];
  let open: () => void = () => undefined;
  const gate = {
    opened: new Promise<void>((resolve) => {
      open = resolve;
    }),
    open: () => open(),
  };
  const definition: SubscriptionDefinition = {
    name,
    maxAttempts: 1,
    backoff: { initialMs: 60_000, maxMs: 60_000, factor: 1 },
    handle: async (events: DeliveredEvent[], ctx: HandlerContext) => {
      const data = events.map((e) => e.data as unknown as Data);
      if (data.some((d) => d.block)) await gate.opened;
      if (failing && data.some((d) => d.fail)) throw new Error("fails on purpose");
      seen.push(...events.map((e, i) => ({ key: ctx.key, n: present(data[i], "data").n, seq: e.seq })));
    },
    ...more,
  };
  return { seen, definition, gate };
}

/** Per key of a subscription: pending, the seqs queued, attempts, dead, leased, paused, idle. */
async function keysOf(raw: pg.Pool, subscription: string) {
  const { rows } = await raw.query(
    `SELECT k.key, k.pending, k.attempts, k.erased::int, k.dead_at IS NOT NULL AS dead,
       k.lease_until > clock_timestamp() AS leased, k.paused_at IS NOT NULL AS paused,
       k.available_at IS NULL AS idle_or_dead,
       coalesce((SELECT array_agg(q.seq::int ORDER BY q.seq) FROM corq.queue q
                 WHERE q.subscription_id = k.subscription_id AND q.key = k.key), '{}') AS seqs
     FROM corq.keys k JOIN corq.subscriptions s ON s.id = k.subscription_id
     WHERE s.name = $1 ORDER BY k.key`,
    [subscription],
  );
  return Object.fromEntries(rows.map(({ key, ...rest }) => [key, rest]));
}

/** Every key's pending equals its queue rows, and no queue row is left without its event. */
async function consistent(raw: pg.Pool) {
  const { rows: off } = await raw.query(
    `SELECT k.key, k.pending, (SELECT count(*)::int FROM corq.queue q
       WHERE q.subscription_id = k.subscription_id AND q.key = k.key) AS queued
     FROM corq.keys k WHERE k.pending <> (SELECT count(*) FROM corq.queue q
       WHERE q.subscription_id = k.subscription_id AND q.key = k.key)`,
  );
  expect(off, "keys whose pending is not their queue rows").toEqual([]);
  const { rows: orphans } = await raw.query(
    "SELECT q.key, q.seq FROM corq.queue q WHERE NOT EXISTS (SELECT 1 FROM corq.events e WHERE e.position = q.position)",
  );
  expect(orphans, "queue rows whose event is gone").toEqual([]);
}

const idOf = async (raw: pg.Pool, name: string) =>
  (await raw.query<{ id: number }>("SELECT id FROM corq.subscriptions WHERE name = $1", [name])).rows[0]?.id ?? 0;

const eventsOf = async (raw: pg.Pool, stream: string) =>
  (await raw.query("SELECT count(*)::int AS n FROM corq.events WHERE stream = $1", [stream])).rows[0].n as number;

describe("eraseStream", () => {
  it("takes a stream's events out of the log and every queue; counts right, other seqs untouched", async () => {
    const byRoom = recording("byRoom", { key: "data.room" });
    const byStream = recording("byStream", {}, false);
    const { corq, raw, another } = await open({ subscriptions: [byRoom.definition, byStream.definition] });

    // r2 dies on an alice event, r3 on a bob event (maxAttempts 1)
    await corq.append("alice", [ev({ n: "a1", room: "r2", fail: true })]);
    await corq.append("bob", [ev({ n: "b1", room: "r2" }), ev({ n: "b3", room: "r3", fail: true })]);
    await corq.append("alice", [ev({ n: "a2", room: "r3" })]);
    await corq.advance();
    expect(await corq.consume("byRoom")).toMatchObject({ key: "r2", outcome: "dead" });
    expect(await corq.consume("byRoom")).toMatchObject({ key: "r3", outcome: "dead" });
    // r4 in flight: [a3, b4] handed out, its handler waits
    await corq.append("alice", [ev({ n: "a3", room: "r4", block: true })]);
    await corq.append("bob", [ev({ n: "b4", room: "r4" })]);
    await corq.advance();
    const inFlight = corq.consume("byRoom");
    await until(async () => (await keysOf(raw, "byRoom")).r4?.leased === true, { message: "r4 was not claimed" });
    // r1 queued with events of both streams, r5 paused, r6 queued with alice's only
    await corq.pauseKey("byRoom", "r5");
    await corq.append("bob", [ev({ n: "b0", room: "r1" })]);
    await corq.append("alice", [ev({ n: "a0", room: "r1" }), ev({ n: "a4", room: "r5" }), ev({ n: "a5", room: "r6" })]);
    await corq.append("bob", [ev({ n: "b2", room: "r1" })]);
    await corq.advance();
    expect(await keysOf(raw, "byRoom")).toMatchObject({
      r1: { pending: 3, seqs: [1, 2, 3] },
      r2: { pending: 2, dead: true },
      r3: { pending: 2, dead: true },
      r4: { pending: 2, leased: true },
      r5: { pending: 1, paused: true },
      r6: { pending: 1 },
    });
    const statsBefore = await corq.subscription("byStream");
    expect(statsBefore.pending).toBe(11);

    expect(await corq.eraseStream("alice")).toEqual({ erased: 6 });

    expect(await eventsOf(raw, "alice")).toBe(0);
    expect(await eventsOf(raw, "bob")).toBe(5);
    await consistent(raw);
    expect(await keysOf(raw, "byRoom")).toMatchObject({
      r1: { pending: 2, seqs: [1, 3], erased: 1 }, // a gap where a0 was
      r2: { pending: 1, seqs: [2], dead: false, attempts: 0, idle_or_dead: false }, // its failed event went: ready
      r3: { pending: 1, seqs: [1], dead: true }, // died on b3, which stays
      r4: { pending: 1, seqs: [2], leased: true }, // the batch in flight keeps its lease
      r5: { pending: 0, seqs: [], paused: true },
      r6: { pending: 0, seqs: [], idle_or_dead: true, dead: false },
    });
    expect(await keysOf(raw, "byStream")).toMatchObject({
      alice: { pending: 0, seqs: [], idle_or_dead: true },
      bob: { pending: 5, seqs: [1, 2, 3, 4, 5] },
    });
    expect((await corq.subscription("byStream")).pending).toBe(5);
    expect((await corq.deadLetters({ subscription: "byRoom" })).map((d) => d.key)).toEqual(["r3"]);

    // the batch that was in flight finishes: its ack works and leaves r4 idle
    byRoom.gate.open();
    expect(await inFlight).toMatchObject({ key: "r4", events: 2, outcome: "acked" });
    expect((await keysOf(raw, "byRoom")).r4).toMatchObject({ pending: 0, seqs: [], idle_or_dead: true });
    await consistent(raw);

    // from here on only bob's events are delivered, with the seqs they had
    byRoom.seen.length = 0;
    await drain(corq, "byRoom");
    await drain(corq, "byStream");
    expect(byRoom.seen).toEqual([
      { key: "r1", n: "b0", seq: 1 },
      { key: "r1", n: "b2", seq: 3 },
      { key: "r2", n: "b1", seq: 2 },
    ]);
    expect(byStream.seen.map((s) => [s.key, s.n, s.seq])).toEqual([
      ["bob", "b1", 1],
      ["bob", "b3", 2],
      ["bob", "b4", 3],
      ["bob", "b0", 4],
      ["bob", "b2", 5],
    ]);

    // a subscription created afterwards from the beginning never sees alice's events
    const late: string[] = [];
    const lateCorq = another({
      subscriptions: [
        { name: "late", handle: (events) => void late.push(...events.map((e) => `${e.stream}:${e.version}`)) },
      ],
    });
    await drain(lateCorq, "late");
    expect(late).toEqual(["bob:0", "bob:1", "bob:2", "bob:3", "bob:4"]);
  });
});

describe("the tombstone", () => {
  it("keeps the stream's version: appends continue after it, reads say erased, a second erasure erases 0", async () => {
    const { corq } = await open();
    await corq.append("alice", [ev({ n: "a0" }), ev({ n: "a1" }), ev({ n: "a2" })]);
    expect(await corq.streamPage("alice")).toMatchObject({ stream: "alice", events: [{ version: 0 }, {}, {}] });
    expect(await corq.streamPage("alice")).not.toHaveProperty("erased");

    expect(await corq.eraseStream("alice")).toEqual({ erased: 3 });
    expect(await corq.streamPage("alice")).toEqual({ stream: "alice", events: [], erased: true, version: 2 });
    expect(await corq.readStream("alice")).toEqual([]);
    expect(await corq.eraseStream("alice")).toEqual({ erased: 0 });

    // expectedVersion still means the stream's version
    await expect(corq.append("alice", [ev({ n: "x" })], { expectedVersion: -1 })).rejects.toMatchObject({
      code: "version_conflict",
    });
    await expect(corq.append("alice", [ev({ n: "x" })], { expectedVersion: 1 })).rejects.toMatchObject({
      code: "version_conflict",
    });
    expect(await corq.append("alice", [ev({ n: "a3" })], { expectedVersion: 2 })).toMatchObject({ version: 3 });
    const page = await corq.streamPage("alice");
    expect(page).toMatchObject({ erased: true, version: 3, events: [{ version: 3, data: { n: "a3" } }] });
    expect(page.events).toHaveLength(1);
    // erasing again takes what came after the first erasure
    expect(await corq.eraseStream("alice")).toEqual({ erased: 1 });
    expect(await corq.streamPage("alice")).toEqual({ stream: "alice", events: [], erased: true, version: 3 });
  });

  it("refuses an unknown stream (404) and a bad name (400), changing nothing", async () => {
    const { corq, raw } = await open();
    await corq.append("alice", [ev({ n: "a0" })]);
    const snapshot = async () =>
      (await raw.query("SELECT stream, version, erased_through, erased_events FROM corq.streams ORDER BY stream")).rows;
    const before = await snapshot();
    const unknown = await corq.eraseStream("nobody").catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(CorqError);
    expect(unknown).toMatchObject({ code: "unknown_stream", status: 404 });
    for (const bad of ["", "a b", "x".repeat(201), "é"]) {
      await expect(corq.eraseStream(bad)).rejects.toMatchObject({ code: "invalid_input", status: 400 });
    }
    expect(await snapshot()).toEqual(before);
    expect(await eventsOf(raw, "alice")).toBe(1);
  });
});

describe("erasure and concurrent work", () => {
  it("erases the versions up to the stream's version when the call began; appends meanwhile stay", async () => {
    const s = recording("s", {}, false);
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await corq.append("alice", [ev({ n: "a0" }), ev({ n: "a1" })]);
    await corq.advance();
    // the test holds the subscription's advancer lock: the erasure's round waits for it
    const holder = await raw.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock($1::int4, $2::int4)", [ADVANCING, await idOf(raw, "s")]);
      const erasing = corq.eraseStream("alice");
      await until(
        async () =>
          (
            await raw.query(
              "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'",
            )
          ).rows.length > 0,
        { message: "the erasure's round never waited for the advancer lock" },
      );
      expect((await raw.query("SELECT erased_through FROM corq.streams")).rows).toEqual([{ erased_through: 1 }]);
      expect(await corq.append("alice", [ev({ n: "a2" })])).toMatchObject({ version: 2 });
      await holder.query("COMMIT");
      expect(await erasing).toEqual({ erased: 2 });
    } finally {
      holder.release();
    }
    expect((await corq.readStream("alice")).map((e) => [e.version, (e.data as Data).n])).toEqual([[2, "a2"]]);
    await drain(corq, "s");
    expect(s.seen.map((x) => x.n)).toEqual(["a2"]);
    await consistent(raw);
  });

  it("finishes an erasure that stopped after a round with the next call; reads hide what it left", async () => {
    const s = recording("s", {}, false);
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await corq.append(
      "alice",
      [0, 1, 2, 3, 4].map((i) => ev({ n: `a${i}` })),
    );
    await corq.advance();
    // a call that stopped after one round of two events
    const client = await raw.connect();
    try {
      expect(await run(client, beginErasure("alice"))).toEqual([{ version: 4 }]);
      const jit = async () => (await client.query("SELECT current_setting('jit') AS jit")).rows[0].jit;
      const before = await jit();
      await client.query("BEGIN");
      await run(client, holdAdvancers());
      // the round runs with JIT off (its estimate passes jit_above_cost without statistics), and
      // only the round: the session's setting is back after it
      expect(await jit()).toBe("off");
      expect(await run(client, eraseRound("alice", 2))).toMatchObject([{ erased: 2, dequeued: 2, keys: 1 }]);
      await client.query("COMMIT");
      expect(await jit()).toBe(before);
    } finally {
      client.release();
    }
    expect(await eventsOf(raw, "alice")).toBe(3);
    await consistent(raw);
    expect(await corq.streamPage("alice")).toEqual({ stream: "alice", events: [], erased: true, version: 4 });
    expect(await corq.eraseStream("alice")).toEqual({ erased: 3 });
    expect(await eventsOf(raw, "alice")).toBe(0);
    await drain(corq, "s");
    expect(s.seen).toEqual([]);
    expect((await raw.query("SELECT erased_events::int FROM corq.streams")).rows).toEqual([{ erased_events: 5 }]);
  });

  it("a claim whose snapshot predates a round hands out nothing of a key the round took events of", async () => {
    const s = recording("byRoom", { key: "data.room" }, false);
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await corq.append("bob", [ev({ n: "b0", room: "r0" })]);
    await corq.append("alice", [ev({ n: "a0", room: "r1" })]);
    await corq.append("bob", [ev({ n: "b1", room: "r1" })]);
    await corq.advance();
    const id = await idOf(raw, "byRoom");
    // a drain holds r0 and settles it in the statement that claims its next key
    // its key row (the lease), then its one event
    const [r0, r0Event] = await run<ClaimRow & pg.QueryResultRow>(raw, claimBatch("byRoom", { limit: 1 }));
    expect([r0, r0Event]).toMatchObject([
      { key: "r0", seq: null },
      { key: "r0", seq: "1" },
    ]);
    const row = present(r0, "r0's claim");
    const event = present(r0Event, "r0's event");
    const settle = settleAndClaim(
      "byRoom",
      { limit: 1 },
      {
        subscriptionId: id,
        settlements: [
          {
            key: "r0",
            token: present(row.lease_token, "token"),
            claimedAt: new Date(row.now),
            count: 1,
            outcome: {
              through: { tx: present(event.tx, "tx"), position: Number(event.position), seq: Number(event.seq) },
            },
          },
        ],
      },
    );
    // the test holds r0's row: the settle statement takes its snapshot, then waits
    const holder = await raw.connect();
    let claimed: ClaimRow[];
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM corq.keys WHERE key = 'r0' FOR UPDATE");
      const settling = run<ClaimRow & pg.QueryResultRow>(raw, settle);
      await until(
        async () =>
          (
            await raw.query(
              "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%settle AS (%'",
            )
          ).rows.length > 0,
        { message: "the settle statement never waited for r0" },
      );
      expect(await corq.eraseStream("alice")).toEqual({ erased: 1 });
      await holder.query("COMMIT");
      claimed = await settling;
    } finally {
      holder.release();
    }
    // r1 was picked after the round committed, with the statement's older snapshot: no batch
    const r1 = claimed.filter((c) => c.key === "r1");
    expect(r1.map((c) => [c.seq, c.position])).toEqual([[null, null]]); // its key row alone
    await run(raw, releaseLease({ subscriptionId: id, key: "r1", token: present(r1[0]?.lease_token, "r1's token") }));
    await drain(corq, "byRoom");
    expect(s.seen.map((x) => [x.key, x.n, x.seq])).toEqual([["r1", "b1", 2]]);
    await consistent(raw);
  });

  it("a function-key advance that read the events before a round writes nothing after it", async () => {
    const fn = recording("fn", { key: (event) => (event.data as { room: string }).room }, false);
    const { corq, raw } = await open({ subscriptions: [fn.definition] });
    await corq.append("alice", [ev({ n: "a0", room: "r1" })]);
    await corq.append("bob", [ev({ n: "b0", room: "r1" })]);
    const id = await idOf(raw, "fn");
    const rows = await run<pg.QueryResultRow>(raw, readAdvanceBatch(id, { names: ["*"], streams: null, limit: 100 }));
    expect(rows).toHaveLength(2);
    expect(await corq.eraseStream("alice")).toEqual({ erased: 1 });
    const first = present(rows[0], "the first row read");
    const last = present(rows.at(-1), "the last row read");
    const written = await run(
      raw,
      writeAdvanceBatch(id, {
        read: {
          tx: first.watermark_tx,
          position: Number(first.watermark_position),
          eraseEpoch: Number(first.erase_epoch),
        },
        last: { tx: last.tx, position: Number(last.position) },
        matched: rows.map((r) => ({ tx: r.tx, position: Number(r.position), key: "r1", invalid: null })),
      }),
    );
    expect(written).toEqual([{ applied: 0 }]);
    await consistent(raw);
    await drain(corq, "fn");
    expect(fn.seen.map((x) => x.n)).toEqual(["b0"]);
  });

  it("sweeps what a subscription created during a round queued of the events it erased; claims skip such rows", async () => {
    const { corq, raw, another } = await open();
    await corq.append("alice", [ev({ n: "a0", room: "r1" }), ev({ n: "a1", room: "r2" })]);
    await corq.append("bob", [ev({ n: "b0", room: "r1" })]);
    const eraser = await raw.connect();
    const advancer = await raw.connect();
    const seen: string[] = [];
    const late = another({
      subscriptions: [
        {
          name: "late",
          key: "data.room",
          handle: (events) => void seen.push(...events.map((e) => `${e.stream}:${(e.data as Data).n}`)),
        },
      ],
    });
    try {
      // a round takes its locks before "late" exists…
      await run(eraser, beginErasure("alice"));
      await eraser.query("BEGIN");
      await run(eraser, holdAdvancers());
      // …"late" is created, and its first advance reads alice's events (not committed yet)…
      await late.migrate();
      await advancer.query("BEGIN");
      expect(await run(advancer, advanceSubscription(await idOf(raw, "late"), 100))).toEqual([
        { scanned: 3, enqueued: 3, held: 1, rewinding: null },
      ]);
      // …the round erases them, not seeing those queue rows; the advance commits after it
      expect(await run(eraser, eraseRound("alice", 2000))).toMatchObject([{ erased: 2, dequeued: 0, keys: 0 }]);
      await eraser.query("COMMIT");
      await advancer.query("COMMIT");
    } finally {
      eraser.release();
      advancer.release();
    }
    // r1 holds a0 (its event gone) and b0: the claim hands out b0 alone
    expect(await late.consume("late")).toMatchObject({ key: "r1", events: 1, outcome: "acked" });
    expect(seen).toEqual(["bob:b0"]);
    // r2 holds a1 alone: the next call's first round sweeps it
    expect(await corq.eraseStream("alice")).toEqual({ erased: 0 });
    await consistent(raw);
    expect(await keysOf(raw, "late")).toMatchObject({ r1: { pending: 0 }, r2: { pending: 0, idle_or_dead: true } });
    expect(await late.consume("late")).toBeNull();
  });
});

describe("what an erasure touches", () => {
  it("only the stream named: not a stream its name begins, nor the same key's other events in two subscriptions", async () => {
    const one = recording("one", { key: "data.room" }, false);
    const two = recording("two", { key: "data.room" }, false);
    const { corq, raw } = await open({ subscriptions: [one.definition, two.definition] });
    await corq.append("alice", [ev({ n: "a0", room: "r1" }), ev({ n: "a1", room: "r2" })]);
    await corq.append("alice-archive", [ev({ n: "x0", room: "r1" })]);
    await corq.append("bob", [ev({ n: "b0", room: "r1" })]);
    await corq.advance();
    expect(await corq.eraseStream("alice")).toEqual({ erased: 2 });
    expect([await eventsOf(raw, "alice"), await eventsOf(raw, "alice-archive"), await eventsOf(raw, "bob")]).toEqual([
      0, 1, 1,
    ]);
    await consistent(raw);
    for (const name of ["one", "two"]) {
      expect(await keysOf(raw, name), name).toMatchObject({
        r1: { pending: 2, seqs: [2, 3], erased: 1 },
        r2: { pending: 0, seqs: [], erased: 1, idle_or_dead: true },
      });
    }
    await drain(corq, "one");
    await drain(corq, "two");
    for (const { seen } of [one, two]) {
      expect(seen.map((x) => [x.key, x.n, x.seq])).toEqual([
        ["r1", "x0", 2],
        ["r1", "b0", 3],
      ]);
    }
  });

  it("the whole stream in one call, however many rounds it takes", async () => {
    const s = recording("s", {}, false);
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    // more than an erasure's first round (500 events) and than its largest (2,000)
    for (let append = 0; append < 3; append++) {
      await corq.append(
        "alice",
        Array.from({ length: 900 }, (_, i) => ev({ n: `a${append * 900 + i}` })),
      );
    }
    await corq.append("bob", [ev({ n: "b0" })]);
    await corq.advance();
    expect(await corq.eraseStream("alice")).toEqual({ erased: 2700 });
    expect(await eventsOf(raw, "alice")).toBe(0);
    await consistent(raw);
    await drain(corq, "s");
    expect(s.seen.map((x) => x.n)).toEqual(["b0"]);
  });
});

describe("a key the erasure starts over", () => {
  it("whose consumer crashed and whose batch the erasure took: its next events come at attempt 1, never dead-lettered", async () => {
    // a key starts over with no attempt counted: neither its failure (r1's failed event was
    // erased) nor the lease its crashed consumer left (r1's and r2's ran out before the erasure)
    const attempts: string[] = [];
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "byRoom",
          key: "data.room",
          maxAttempts: 2,
          leaseMs: 200,
          backoff: { initialMs: 1, maxMs: 1, factor: 1 },
          handle: (events, ctx) => {
            const data = events.map((e) => e.data as unknown as Data);
            if (data.some((d) => d.fail)) throw new Error("fails on purpose");
            attempts.push(...data.map((d) => `${ctx.key}:${d.n}@${ctx.attempt}`));
          },
        },
      ],
    });
    await corq.append("alice", [ev({ n: "a0", room: "r1", fail: true })]);
    await corq.append("bob", [ev({ n: "b1", room: "r1" })]);
    await corq.append("alice", [ev({ n: "a2", room: "r2" })]);
    await corq.advance();
    expect(await corq.consume("byRoom")).toMatchObject({ key: "r1", outcome: "retry" }); // attempt 1 of 2 failed
    await sleep(20);
    // both keys claimed by a consumer that then crashes; their leases run out
    const crashed = await run<ClaimRow & pg.QueryResultRow>(raw, claimBatch("byRoom", { limit: 2 }));
    expect(crashed.filter((row) => row.seq === null).map((row) => row.key)).toEqual(["r1", "r2"]);
    await sleep(300);
    expect(await corq.eraseStream("alice")).toEqual({ erased: 2 });
    expect(await keysOf(raw, "byRoom")).toMatchObject({
      r1: { pending: 1, attempts: 0, dead: false, idle_or_dead: false },
      r2: { pending: 0, attempts: 0, dead: false, idle_or_dead: true },
    });
    // the stream goes on after its erasure: r2's next event is unrelated to what was erased
    await corq.append("alice", [ev({ n: "a3", room: "r2" })]);
    await drain(corq, "byRoom");
    expect(attempts.sort()).toEqual(["r1:b1@1", "r2:a3@1"]);
    expect(await corq.deadLetters({ subscription: "byRoom" })).toEqual([]);
    await consistent(raw);
  });
});

describe("a batch in flight whose events were all erased", () => {
  it("fails without an attempt: its key is idle, never dead on a missing event", async () => {
    const s = recording("s", { leaseMs: 60_000 });
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await corq.append("alice", [ev({ n: "a0", block: true, fail: true })]);
    await corq.append("bob", [ev({ n: "b0" })]);
    await corq.advance();
    const inFlight = corq.consume("s");
    await until(async () => (await keysOf(raw, "s")).alice?.leased === true, { message: "alice was not claimed" });
    expect(await corq.eraseStream("alice")).toEqual({ erased: 1 });
    expect((await keysOf(raw, "s")).alice).toMatchObject({ pending: 0, leased: true });
    s.gate.open();
    expect(await inFlight).toMatchObject({ key: "alice", outcome: "retry" });
    expect((await keysOf(raw, "s")).alice).toMatchObject({ pending: 0, attempts: 0, dead: false, idle_or_dead: true });
    await consistent(raw);
    expect(await corq.consume("s")).toMatchObject({ key: "bob", outcome: "acked" });
    expect(await corq.consume("s")).toBeNull();
  });

  it("in a drain: the ack of a batch partly erased and the failure of one all erased keep the counts right", async () => {
    const s = recording("byRoom", { key: "data.room", leaseMs: 60_000 });
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await corq.append("alice", [
      ev({ n: "a0", room: "r1", block: true }),
      ev({ n: "a1", room: "r2", block: true, fail: true }),
    ]);
    await corq.append("bob", [ev({ n: "b0", room: "r1" })]);
    await corq.advance();
    const draining = corq.drain("byRoom", { keysPerClaim: 4 });
    await until(
      async () => {
        const keys = await keysOf(raw, "byRoom");
        return keys.r1?.leased === true && keys.r2?.leased === true;
      },
      { message: "r1 and r2 were not both claimed" },
    );
    expect(await corq.eraseStream("alice")).toEqual({ erased: 2 });
    expect(await keysOf(raw, "byRoom")).toMatchObject({
      r1: { pending: 1, leased: true },
      r2: { pending: 0, leased: true },
    });
    s.gate.open();
    await draining;
    expect(await keysOf(raw, "byRoom")).toMatchObject({
      r1: { pending: 0, seqs: [], idle_or_dead: true },
      r2: { pending: 0, seqs: [], attempts: 0, dead: false, idle_or_dead: true },
    });
    await consistent(raw);
    expect(s.seen.map((x) => x.n)).toEqual(["a0", "b0"]); // the batch in flight finished
  });

  it("an expired lease on it is taken over for nothing: the key goes idle, not dead", async () => {
    const s = recording("short", { leaseMs: 200 });
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await corq.append("alice", [ev({ n: "a0" })]);
    await corq.advance();
    // claimed by a consumer that then crashes
    expect(await run(raw, claimBatch("short", { limit: 1 }))).toMatchObject([
      { key: "alice", seq: null },
      { key: "alice", seq: "1" },
    ]);
    expect(await corq.eraseStream("alice")).toEqual({ erased: 1 });
    await sleep(300);
    expect(await corq.consume("short")).toBeNull();
    expect((await keysOf(raw, "short")).alice).toMatchObject({
      pending: 0,
      attempts: 0,
      dead: false,
      idle_or_dead: true,
    });
    expect(s.seen).toEqual([]);
  });
});

describe("the stream's idempotency keys", () => {
  const keysOfStream = async (raw: pg.Pool, stream: string) =>
    (await raw.query("SELECT key FROM corq.idempotency_keys WHERE stream = $1 ORDER BY key", [stream])).rows.map(
      (row) => row.key as string,
    );

  it("go in the round that erases their append's last event; the last round takes those whose events went before", async () => {
    const { corq, raw } = await open();
    await corq.append("alice", [ev({ n: "a0" }), ev({ n: "a1" })], { idempotencyKey: "k1" });
    await corq.append("alice", [ev({ n: "a2" }), ev({ n: "a3" })], { idempotencyKey: "k2" });
    await corq.append("alice", [ev({ n: "a4" })], { idempotencyKey: "k3" });
    await corq.append("bob", [ev({ n: "b0" })], { idempotencyKey: "k1" });
    const client = await raw.connect();
    const round = async (limit: number) => {
      await client.query("BEGIN");
      await run(client, holdAdvancers());
      const [row] = await run<{ erased: number }>(client, eraseRound("alice", limit));
      await client.query("COMMIT");
      return row?.erased;
    };
    try {
      expect(await run(client, beginErasure("alice"))).toEqual([{ version: 4 }]);
      // rounds of 3 events: k1's append (versions 0–1) is gone with the first; k2's (2–3) is half erased
      expect(await round(3)).toBe(3);
      expect(await keysOfStream(raw, "alice")).toEqual(["k2", "k3"]);
      // a retry of k2's append meanwhile still answers it (its events are on their way out)
      expect(await corq.append("alice", [ev({ n: "a2" }), ev({ n: "a3" })], { idempotencyKey: "k2" })).toMatchObject({
        replayed: true,
      });
      expect(await round(3)).toBe(2);
      expect(await keysOfStream(raw, "alice")).toEqual([]);
    } finally {
      client.release();
    }
    expect(await keysOfStream(raw, "bob")).toEqual(["k1"]);
    // a key whose events were removed before the erasure (as retention removes them) goes with the last round
    await corq.append("carol", [ev({ n: "c0" })], { idempotencyKey: "k1" });
    await raw.query("DELETE FROM corq.events WHERE stream = 'carol'");
    expect(await corq.eraseStream("carol")).toEqual({ erased: 0 });
    expect(await keysOfStream(raw, "carol")).toEqual([]);
    // the same appends again write: nothing answers for the erased ones
    const again = await corq.append("alice", [ev({ n: "a0" }), ev({ n: "a1" })], { idempotencyKey: "k1" });
    expect(again).toMatchObject({ version: 6 });
    expect(again.replayed).toBeUndefined();
    expect(await corq.append("carol", [ev({ n: "c0" })], { idempotencyKey: "k1" })).not.toHaveProperty("replayed");
    expect(await corq.append("bob", [ev({ n: "b0" })], { idempotencyKey: "k1" })).toMatchObject({ replayed: true });
  });

  it("a key used while the erasure runs stays with its events: a retry replays it; the erased append's retry writes", async () => {
    const s = recording("s", {}, false);
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await corq.append("alice", [ev({ n: "a0" })], { idempotencyKey: "before" });
    await corq.advance();
    // the test holds the subscription's advancer lock: the erasure's round waits for it
    const holder = await raw.connect();
    let during: Awaited<ReturnType<typeof corq.append>>;
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock($1::int4, $2::int4)", [ADVANCING, await idOf(raw, "s")]);
      const erasing = corq.eraseStream("alice");
      await until(
        async () => (await raw.query("SELECT erased_through FROM corq.streams")).rows[0]?.erased_through === 0,
        { message: "the erasure never began" },
      );
      during = await corq.append("alice", [ev({ n: "a1" })], { idempotencyKey: "during" });
      await holder.query("COMMIT");
      expect(await erasing).toEqual({ erased: 1 });
    } finally {
      holder.release();
    }
    expect(await keysOfStream(raw, "alice")).toEqual(["during"]);
    expect(await corq.append("alice", [ev({ n: "a1" })], { idempotencyKey: "during" })).toEqual({
      ...during,
      replayed: true,
    });
    expect(await corq.append("alice", [ev({ n: "a0" })], { idempotencyKey: "before" })).toMatchObject({ version: 2 });
    expect((await corq.readStream("alice")).map((e) => (e.data as Data).n)).toEqual(["a1", "a0"]);
  });
});
