// Rewind: events queued again from a position (inclusive, in log order), the whole
// subscription or one key, with new higher seqs and replay: true; what a leased, a dead, a
// paused key and a key still behind the position do; replays after live keys.
import { describe, expect, it } from "vitest";
import type pg from "pg";
import { PgDialect } from "drizzle-orm/pg-core";
import { advanceSubscription } from "../src/sql/advance/advanceSubscription.js";
import { readAdvanceBatch, writeAdvanceBatch } from "../src/sql/advance/advanceByFunction.js";
import type { DeliveredEvent, HandlerContext, SubscriptionDefinition } from "../src/index.js";
import { drain, sleep, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { waitingOnLock } from "./helpers/waitingOnLock.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const dialect = new PgDialect();

interface Seen {
  key: string;
  n: string;
  seq: number;
  replay: boolean;
  position: number;
}

/** A subscription that records what it handles: key, the event's data.n, seq, replay. */
function recording(name = "s", more: Partial<SubscriptionDefinition> = {}) {
  const seen: Seen[] = [];
  const definition: SubscriptionDefinition = {
    name,
    handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
      void seen.push(
        ...events.map((e) => ({
          key: ctx.key,
          n: (e.data as { n: string }).n,
          seq: e.seq,
          replay: e.replay,
          position: e.position,
        })),
      ),
    ...more,
  };
  return { seen, definition };
}

const e = (n: string, name = "E") => ({ name, data: { n } });

/** The subscription's queue as (key, seq, position, replay), in queue order. */
async function queueOf(raw: pg.Pool) {
  const { rows } = await raw.query(
    "SELECT key, seq::int, position::int, replay FROM corq.queue ORDER BY subscription_id, key, seq",
  );
  return rows as { key: string; seq: number; position: number; replay: boolean }[];
}

describe("rewind", () => {
  it("queues a whole subscription again from a position, inclusive, in log order, with new seqs and replay", async () => {
    const { seen, definition } = recording();
    const { corq } = await open({ subscriptions: [definition] });
    const a1 = await corq.append("a", [e("a1"), e("a2")]);
    const b1 = await corq.append("b", [e("b1")]);
    await corq.append("a", [e("a3")]);
    await corq.append("c", [e("c1")]);
    await drain(corq, "s");
    expect(seen).toHaveLength(5);
    seen.length = 0;

    // from a2 on: a2, a3 of a, b1 of b, c1 of c — a1 came before
    expect(await corq.rewind("s", { to: present(a1.positions[1], "a2's position") })).toEqual({ requeued: 4 });
    await drain(corq, "s");
    const of = (key: string) => seen.filter((s) => s.key === key).map((s) => [s.n, s.seq, s.replay]);
    expect(of("a")).toEqual([
      ["a2", 4, true],
      ["a3", 5, true],
    ]);
    expect(of("b")).toEqual([["b1", 2, true]]);
    expect(of("c")).toEqual([["c1", 2, true]]);

    // to the beginning: everything again, seqs still growing
    seen.length = 0;
    expect(await corq.rewind("s", { to: "beginning" })).toEqual({ requeued: 5 });
    await drain(corq, "s");
    expect(of("a")).toEqual([
      ["a1", 6, true],
      ["a2", 7, true],
      ["a3", 8, true],
    ]);
    // a live event after a replay is not a replay, and its seq follows
    seen.length = 0;
    await corq.append("b", [e("b2")]);
    await drain(corq, "s");
    expect(of("b")).toEqual([["b2", 4, false]]);
    expect(b1.positions).toHaveLength(1);
    expect(await corq.subscription("s")).toMatchObject({ pending: 0, lag: 0 });
  });

  it("rewinds one key from its first event at or after the position; other keys are not touched", async () => {
    const { seen, definition } = recording();
    const { corq, raw } = await open({ subscriptions: [definition] });
    await corq.append("a", [e("a1")]);
    const mark = await corq.append("b", [e("b1")]); // a position of another key
    await corq.append("a", [e("a2"), e("a3")]);
    await drain(corq, "s");
    seen.length = 0;
    expect(await corq.rewind("s", { to: present(mark.positions[0], "the mark's position"), key: "a" })).toEqual({
      requeued: 2,
    });
    expect((await queueOf(raw)).map((q) => [q.key, q.seq, q.replay])).toEqual([
      ["a", 4, true],
      ["a", 5, true],
    ]);
    await drain(corq, "s");
    expect(seen.map((s) => [s.key, s.n, s.seq])).toEqual([
      ["a", "a2", 4],
      ["a", "a3", 5],
    ]);
    expect(await corq.rewind("s", { to: "beginning", key: "nobody" })).toEqual({ requeued: 0 });
  });

  it("rewinds one key of a JSON-path key (no stream to narrow by); other keys are not touched", async () => {
    const { seen, definition } = recording("s", { key: "data.room" });
    const { corq } = await open({ subscriptions: [definition] });
    const room = (n: string, r: string) => ({ name: "E", data: { n, room: r } });
    await corq.append("x", [room("a1", "a"), room("b1", "b"), room("a2", "a")]);
    await drain(corq, "s");
    seen.length = 0;
    expect(await corq.rewind("s", { to: "beginning", key: "a" })).toEqual({ requeued: 2 });
    await drain(corq, "s");
    expect(seen.map((s) => [s.key, s.n, s.seq, s.replay])).toEqual([
      ["a", "a1", 3, true],
      ["a", "a2", 4, true],
    ]);
  });

  it("matches the subscription's current filter and key, and only what it advanced (up to its watermark)", async () => {
    const first = recording("s", { events: ["A"] });
    const { corq, another, raw } = await open({ subscriptions: [first.definition] });
    await corq.append("x", [e("a1", "A"), e("b1", "B"), e("a2", "A")]);
    await drain(corq, "s");
    expect(first.seen.map((s) => s.n)).toEqual(["a1", "a2"]);
    // the code now takes A and B: the rewind delivers the B events too
    const second = recording("s", { events: ["A", "B"] });
    const changed = another({ subscriptions: [second.definition] });
    await changed.migrate();
    // appended, not yet advanced: past the watermark, left to the advance
    await raw.query("INSERT INTO corq.events (stream, version, name, data) VALUES ('x', 3, 'A', '{\"n\":\"a3\"}')");
    expect(await changed.rewind("s", { to: "beginning" })).toEqual({ requeued: 3 });
    await drain(changed, "s");
    expect(second.seen.map((s) => [s.n, s.replay])).toEqual([
      ["a1", true],
      ["b1", true],
      ["a2", true],
      ["a3", false],
    ]);
  });

  it("keys by a function: the key function of this instance computes the replayed keys", async () => {
    const { seen, definition } = recording("s", {
      key: (event) => (event.data as { n: string }).n.slice(0, 1),
    });
    const { corq, another } = await open({ subscriptions: [definition] });
    await corq.append("x", [e("a1"), e("b1"), e("a2")]);
    await drain(corq, "s");
    seen.length = 0;
    expect(await corq.rewind("s", { to: "beginning", key: "a" })).toEqual({ requeued: 2 });
    await drain(corq, "s");
    expect(seen.map((s) => [s.key, s.n, s.seq])).toEqual([
      ["a", "a1", 3],
      ["a", "a2", 4],
    ]);
    // an instance without that function cannot compute the keys
    await expect(another({}).rewind("s", { to: "beginning" })).rejects.toMatchObject({ code: "conflict" });
  });

  it("refuses what it cannot do, and changes nothing", async () => {
    const { definition } = recording();
    const { corq, raw } = await open({ subscriptions: [definition] });
    const { positions } = await corq.append("a", [e("a1")]);
    await drain(corq, "s");
    await expect(corq.rewind("s", { to: present(positions[0], "a1's position") + 1000 })).rejects.toMatchObject({
      code: "invalid_input",
    });
    await expect(corq.rewind("missing", { to: "beginning" })).rejects.toMatchObject({ code: "unknown_subscription" });
    for (const bad of [{ to: 0 }, { to: -1 }, { to: 1.5 }, { to: "start" }, {}, { to: "beginning", key: "" }]) {
      await expect(corq.rewind("s", bad as never), JSON.stringify(bad)).rejects.toMatchObject({
        code: "invalid_input",
      });
    }
    expect(await queueOf(raw)).toEqual([]);
  });

  it("a leased key keeps its one holder: its batch finishes and acks, the replay comes after, in order", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const running = new Set<string>();
    let overlaps = 0;
    const seen: [string, number, boolean][] = [];
    const { corq, another } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 2,
          leaseMs: 30_000,
          handle: async (events: DeliveredEvent[], ctx: HandlerContext) => {
            if (running.has(ctx.key)) overlaps++;
            running.add(ctx.key);
            seen.push(
              ...events.map((ev) => [(ev.data as { n: string }).n, ev.seq, ev.replay] as [string, number, boolean]),
            );
            if (seen.length === 2) await gate; // the first batch is held while the rewind runs
            running.delete(ctx.key);
          },
        },
      ],
    });
    await corq.append("a", [e("a1"), e("a2"), e("a3")]);
    await corq.advance();
    const first = corq.consume("s");
    await until(() => seen.length === 2, { message: "the first batch never started" });
    expect(await corq.key("s", "a")).toMatchObject({ status: "leased" });
    const other = another(); // a second consumer: must not take the leased key
    expect(await other.rewind("s", { to: "beginning" })).toEqual({ requeued: 3 });
    expect(await other.consume("s")).toBeNull();
    release();
    expect(await first).toMatchObject({ key: "a", events: 2, outcome: "acked" });
    await drain(other, "s");
    expect(overlaps).toBe(0);
    // a3 was still queued: it is delivered as queued, then the replay from a1
    expect(seen).toEqual([
      ["a1", 1, false],
      ["a2", 2, false],
      ["a3", 3, false],
      ["a1", 4, true],
      ["a2", 5, true],
      ["a3", 6, true],
    ]);
    expect(await corq.key("s", "a")).toMatchObject({ pending: 0, status: "idle" });
  });

  it("a dead key rewound to its failed event or before comes back from there; rewound past it, it stays dead", async () => {
    let failing = true;
    const seen: [string, number, boolean][] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          maxAttempts: 1,
          handle: (events: DeliveredEvent[]) => {
            for (const ev of events) {
              const n = (ev.data as { n: string }).n;
              if (failing && n === "a2") throw new Error("poison");
              seen.push([n, ev.seq, ev.replay]);
            }
          },
        },
      ],
    });
    const { positions } = await corq.append("a", [e("a1"), e("a2"), e("a3")]);
    await corq.advance();
    expect(await corq.consume("s")).toMatchObject({ outcome: "dead" });
    expect(await corq.key("s", "a")).toMatchObject({ status: "dead", pending: 3 });
    // past the failed event: the queue already holds it; nothing to do, the key stays dead
    expect(await corq.rewind("s", { to: present(positions[2], "a3's position"), key: "a" })).toEqual({ requeued: 0 });
    expect(await corq.key("s", "a")).toMatchObject({ status: "dead", pending: 3 });
    // to the first event: the key comes back and delivers from there, attempts reset
    failing = false;
    expect(await corq.rewind("s", { to: present(positions[0], "a1's position"), key: "a" })).toEqual({ requeued: 3 });
    expect(await corq.key("s", "a")).toMatchObject({ status: "ready", attempts: 0, lastError: null, pending: 3 });
    expect(await corq.deadLetters({ subscription: "s" })).toEqual([]);
    seen.length = 0; // the failed attempt had handled a1
    await drain(corq, "s");
    expect(seen).toEqual([
      ["a1", 4, true],
      ["a2", 5, true],
      ["a3", 6, true],
    ]);
  });

  it("leaves a key whose queue already reaches back before the position as it is", async () => {
    const { seen, definition } = recording();
    const { corq, raw } = await open({ subscriptions: [definition] });
    const { positions } = await corq.append("a", [e("a1"), e("a2"), e("a3")]);
    await corq.advance(); // queued, not yet delivered
    expect(await corq.rewind("s", { to: present(positions[1], "a2's position") })).toEqual({ requeued: 0 });
    // to the first event: the queued ones are replaced by the replay (nothing twice)
    expect(await corq.rewind("s", { to: present(positions[0], "a1's position") })).toEqual({ requeued: 3 });
    expect((await queueOf(raw)).map((q) => [q.seq, q.replay])).toEqual([
      [4, true],
      [5, true],
      [6, true],
    ]);
    await drain(corq, "s");
    expect(seen.map((s) => [s.n, s.seq])).toEqual([
      ["a1", 4],
      ["a2", 5],
      ["a3", 6],
    ]);
  });

  it("a paused key keeps its pause through a rewind", async () => {
    const { seen, definition } = recording();
    const { corq } = await open({ subscriptions: [definition] });
    await corq.append("a", [e("a1")]);
    await drain(corq, "s");
    seen.length = 0;
    await corq.pauseKey("s", "a");
    expect(await corq.rewind("s", { to: "beginning" })).toEqual({ requeued: 1 });
    await drain(corq, "s");
    expect(seen).toEqual([]);
    expect(await corq.key("s", "a")).toMatchObject({ status: "paused", pending: 1 });
    await corq.resumeKey("s", "a");
    await drain(corq, "s");
    expect(seen.map((s) => [s.n, s.replay])).toEqual([["a1", true]]);
  });

  it("claims live keys before replaying ones", async () => {
    const order: string[] = [];
    const { corq } = await open({
      subscriptions: [{ name: "s", handle: (_events, ctx) => void order.push(ctx.key) }],
    });
    for (const key of ["r1", "r2", "r3"]) await corq.append(key, [e(key)]);
    await drain(corq, "s");
    order.length = 0;
    await corq.rewind("s", { to: "beginning" }); // r1 … r3 replaying, ready first
    await sleep(5);
    await corq.append("live", [e("l1")]);
    await corq.advance();
    expect((await corq.key("s", "r1")).reason).toContain("replaying");
    await drain(corq, "s");
    expect(order).toEqual(["live", "r1", "r2", "r3"]);
  });

  it("waits for an advance in progress and replays what it enqueued: the replay ends where later events begin", async () => {
    const { seen, definition } = recording();
    const { corq, raw } = await open({ subscriptions: [definition] });
    await corq.append("a", [e("a1")]);
    await drain(corq, "s");
    seen.length = 0;
    await corq.append("a", [e("a2"), e("a3")]);
    // an advancer at work: its statement ran, its transaction is still open
    const advancer = await raw.connect();
    try {
      await advancer.query("BEGIN");
      const { sql: text, params } = dialect.sqlToQuery(advanceSubscription(await idOf(raw, "s"), 1000));
      expect((await advancer.query(text, params)).rows[0]).toMatchObject({ enqueued: 2, held: 1 });
      let done = false;
      const rewinding = corq.rewind("s", { to: "beginning" }).finally(() => {
        done = true;
      });
      await sleep(300);
      expect(done, "the rewind did not wait for the advancer").toBe(false);
      await advancer.query("COMMIT");
      expect(await rewinding).toEqual({ requeued: 3 });
    } finally {
      await advancer.query("ROLLBACK").catch(() => undefined);
      advancer.release();
    }
    await corq.append("a", [e("a4")]);
    await drain(corq, "s");
    // a2 and a3 were queued first (still pending: replaced by the replay), then a1 … a3 again, then a4
    expect(seen.map((s) => [s.n, s.replay])).toEqual([
      ["a1", true],
      ["a2", true],
      ["a3", true],
      ["a4", false],
    ]);
  });

  it("waits for a function-key advance that is writing, and replays what it enqueued", async () => {
    const { seen, definition } = recording("s", { key: (event) => event.stream });
    const { corq, raw } = await open({ subscriptions: [definition] });
    await corq.append("a", [e("a1")]);
    await drain(corq, "s");
    seen.length = 0;
    await corq.append("a", [e("a2")]);
    const id = await idOf(raw, "s");
    const advancer = await raw.connect();
    try {
      const read = dialect.sqlToQuery(readAdvanceBatch(id, { names: ["*"], streams: null, limit: 100 }));
      const rows = (await advancer.query(read.sql, read.params)).rows;
      expect(rows).toHaveLength(1);
      const last = { tx: rows[0].tx, position: Number(rows[0].position) };
      const write = dialect.sqlToQuery(
        writeAdvanceBatch(id, {
          read: {
            tx: rows[0].watermark_tx,
            position: Number(rows[0].watermark_position),
            eraseEpoch: Number(rows[0].erase_epoch),
          },
          last,
          matched: [{ ...last, key: "a", invalid: null }],
        }),
      );
      await advancer.query("BEGIN");
      expect((await advancer.query(write.sql, write.params)).rows[0]).toMatchObject({ applied: 1 });
      let done = false;
      const rewinding = corq.rewind("s", { to: "beginning" }).finally(() => {
        done = true;
      });
      await sleep(300);
      expect(done, "the rewind did not wait for the advancer").toBe(false);
      await advancer.query("COMMIT");
      expect(await rewinding).toEqual({ requeued: 2 });
    } finally {
      await advancer.query("ROLLBACK").catch(() => undefined);
      advancer.release();
    }
    await drain(corq, "s");
    expect(seen.map((s) => [s.n, s.replay])).toEqual([
      ["a1", true],
      ["a2", true],
    ]);
  });
});

describe("a claim whose snapshot predates a rewind", () => {
  it("never hands out the rows the rewind replaced (the cursor passed them): the replay is delivered, nothing lost", async () => {
    // b replays already (a first rewind queued it again at seqs 3, 4). A second rewind of b
    // updates b's row early and commits late; a drain's ack+claim starts in between (its
    // snapshot still sees b's rows at seqs 3, 4 and b replaying), waits for the acked key's row
    // until after the commit, then picks b: the pick's re-check of the new row version passes
    // (b still replays), and only the cursor (last_seq 4) keeps rows 3, 4 from being handed out.
    // The order is held by locks, not by timing: the rewind waits for a queue slot the test
    // holds, the drain for a key row the test holds, each seen waiting in pg_stat_activity.
    // (A key that was live before the rewind is no test of the cursor: the live part of the
    // pick re-checks the new version, replaying, and skips it; the replaying part never sees it.)
    const seen: string[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          handle: async (events: DeliveredEvent[], ctx: HandlerContext) => {
            seen.push(...events.map((ev) => `${ctx.key}:${(ev.data as { n: string }).n}:${ev.seq}:${ev.replay}`));
            if (ctx.key === "z") await gate;
          },
        },
      ],
    });
    const waiting = (fragment: string) => waitingOnLock(raw, fragment);
    await corq.append("z", [e("z1")]);
    await corq.advance(); // z has waited longest: the drain takes it first
    const { positions } = await corq.append("b", [e("b1"), e("b2")]);
    await corq.advance();
    expect(await corq.rewind("s", { to: "beginning", key: "b" })).toEqual({ requeued: 2 }); // seqs 3, 4
    // one key per claim: b is left for the statement that settles z (z is live: picked first)
    const draining = corq.drain("s", { budgetMs: 10_000, keysPerClaim: 1 });
    await until(() => seen.length === 1, { message: "z was never handled" });
    const blocker = await raw.connect(); // holds the queue slot the rewind's first replay of b takes
    const keyHolder = await raw.connect(); // holds z's row: the drain's ack+claim waits for it
    try {
      await blocker.query("BEGIN");
      await blocker.query(
        "INSERT INTO corq.queue (subscription_id, key, seq, tx, position) SELECT id, 'b', 5, '1', $1 FROM corq.subscriptions",
        [positions[0]],
      );
      const rewinding = corq.rewind("s", { to: "beginning", key: "b" });
      await waiting("s.rewind_cursor_tx IS NULL"); // a requeue chunk (pg_stat_activity keeps a statement's first 1 kB)
      await keyHolder.query("BEGIN");
      await keyHolder.query("SELECT 1 FROM corq.keys WHERE key = 'z' FOR UPDATE");
      release();
      await waiting("fenced AS (");
      await blocker.query("ROLLBACK");
      expect(await rewinding).toEqual({ requeued: 2 });
      await keyHolder.query("COMMIT");
    } finally {
      await blocker.query("ROLLBACK").catch(() => undefined);
      await keyHolder.query("ROLLBACK").catch(() => undefined);
      blocker.release();
      keyHolder.release();
    }
    await draining;
    await drain(corq, "s");
    expect(seen).toEqual(["z:z1:1:false", "b:b1:5:true", "b:b2:6:true"]);
    expect(await corq.key("s", "b")).toMatchObject({ pending: 0, status: "idle" });
  });
});

async function idOf(raw: pg.Pool, name: string): Promise<number> {
  return (await raw.query("SELECT id FROM corq.subscriptions WHERE name = $1", [name])).rows[0].id;
}
