// Transactional handlers (effects exactly once): what a `transactional: true` handler writes
// through ctx.tx commits in the same transaction as the ack of its batch, fenced by the lease —
// or not at all. On a real Postgres, with real concurrent claimers.
import { sql } from "drizzle-orm";
import { bigint, integer, pgSchema, text } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import pg from "pg";
import { createCorq, type Corq, type DeliveredEvent, type HandlerContext } from "../src/index.js";
import { useCorq, sleep } from "./helpers/corq.js";
import { until, within } from "./helpers/until.js";
import { present } from "../src/errors.js";

const open = useCorq();

// the app's projection: one row per event applied (a duplicate shows as a second row)
const app = pgSchema("app");
const effects = app.table("effects", {
  key: text("key").notNull(),
  position: bigint("position", { mode: "number" }).notNull(),
  attempt: integer("attempt").notNull(),
});
const createEffects =
  "CREATE SCHEMA app; CREATE TABLE app.effects (key text NOT NULL, position bigint NOT NULL, attempt int NOT NULL)";

/** Writes one effect row per event through ctx.tx (drizzle's query builder). */
const applyEffects = async (events: DeliveredEvent[], ctx: HandlerContext) => {
  await ctx
    .tx!.insert(effects)
    .values(events.map((e) => ({ key: ctx.key, position: e.position, attempt: ctx.attempt })));
};

const effectRows = async (raw: { query: (text: string) => Promise<{ rows: any[] }> }) =>
  (await raw.query("SELECT key, position::int, attempt FROM app.effects ORDER BY key, position, attempt")).rows;

const appendTo = async (corq: Corq, stream: string, n: number): Promise<number[]> =>
  (
    await corq.append(
      stream,
      Array.from({ length: n }, (_, i) => ({ name: "E", data: { i } })),
    )
  ).positions;

const drainTally = (corq: Corq) => corq.drain("tally");

describe("transactional handlers", () => {
  it("commit the handler's writes with the ack: both or neither, ctx.tx a drizzle transaction", async () => {
    const seen: { tx: boolean; inTx: boolean }[] = [];
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "tally",
          events: ["E"],
          transactional: true,
          async handle(events, ctx) {
            await applyEffects(events, ctx);
            // an append in the same transaction: a policy's output, exactly once too
            await ctx.corq.append(`counted-${ctx.key}`, [{ name: "Counted", data: { n: events.length } }], {
              tx: ctx.tx,
            });
            // ctx.run runs in the same transaction: it sees the uncommitted rows
            const row = present(
              (await ctx.run<{ n: number }>(sql`SELECT count(*)::int AS n FROM app.effects WHERE key = ${ctx.key}`))[0],
              "the count row",
            );
            // a select through the builder, and a nested transaction rolled back alone (a savepoint)
            const mine = await ctx.tx!.select().from(effects).where(sql`${effects.key} = ${ctx.key}`);
            await ctx
              .tx!.transaction(async (nested) => {
                await nested.insert(effects).values({ key: ctx.key, position: -1, attempt: 0 });
                nested.rollback();
              })
              .catch(() => undefined);
            seen.push({ tx: ctx.tx !== undefined, inTx: row.n === mine.length && row.n >= events.length });
          },
        },
        {
          name: "plain",
          events: ["E"],
          handle: (_events, ctx) => void seen.push({ tx: ctx.tx !== undefined, inTx: false }),
        },
      ],
    });
    await raw.query(createEffects);
    const a = await appendTo(corq, "a", 3);
    const b = await appendTo(corq, "b", 2);
    await corq.advance();
    expect(await corq.drain("tally", { keysPerClaim: 2 })).toMatchObject({ batches: 2, events: 5 });
    expect(await corq.drain("plain")).toMatchObject({ batches: 2 });
    expect(seen.filter((s) => s.tx)).toEqual([
      { tx: true, inTx: true },
      { tx: true, inTx: true },
    ]);
    expect(seen.filter((s) => !s.tx)).toHaveLength(2); // a plain handler has no ctx.tx
    expect(await effectRows(raw)).toEqual([
      ...a.map((position) => ({ key: "a", position, attempt: 1 })),
      ...b.map((position) => ({ key: "b", position, attempt: 1 })),
    ]);
    expect(await corq.subscription("tally")).toMatchObject({ pending: 0 });
    expect((await corq.readStream("counted-a")).map((e) => e.data)).toEqual([{ n: 3 }]);
    expect((await corq.readStream("counted-b")).map((e) => e.data)).toEqual([{ n: 2 }]);
    // the ack was recorded for the dashboard, after the transaction's COMMIT
    expect((await corq.activity({ subscription: "tally" })).map((r) => [r.key, r.outcome, r.events]).sort()).toEqual([
      ["a", "acked", 3],
      ["b", "acked", 2],
    ]);
  });

  it("roll back a handler that throws: no effect, the batch fails as any (attempts, backoff) and comes again", async () => {
    let failing = true;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "tally",
          transactional: true,
          maxAttempts: 3,
          backoff: { initialMs: 50, maxMs: 50, factor: 1 },
          async handle(events, ctx) {
            await applyEffects(events, ctx);
            if (failing) throw new Error("the projection's rule refused it");
          },
        },
      ],
    });
    await raw.query(createEffects);
    const positions = await appendTo(corq, "a", 2);
    await corq.advance();
    expect(await corq.consume("tally")).toMatchObject({
      key: "a",
      outcome: "retry",
      error: expect.stringMatching(/refused/),
    });
    expect(await effectRows(raw)).toEqual([]);
    expect(await corq.key("tally", "a")).toMatchObject({ status: "backoff", attempts: 1, pending: 2 });
    // the failure is recorded outside the rolled-back transaction
    expect((await corq.activity({ subscription: "tally" })).map((r) => r.outcome)).toEqual(["failed"]);
    await sleep(60);
    expect(await corq.consume("tally")).toMatchObject({ outcome: "retry" }); // the head event alone
    expect(await effectRows(raw)).toEqual([]);
    failing = false;
    await sleep(60);
    expect(await corq.consume("tally")).toMatchObject({ outcome: "acked", events: 1 });
    expect(await corq.consume("tally")).toMatchObject({ outcome: "acked", events: 1 });
    expect(await effectRows(raw)).toEqual([
      { key: "a", position: positions[0], attempt: 3 },
      { key: "a", position: positions[1], attempt: 1 },
    ]);
  });

  it("a COMMIT that fails (a deferred constraint) leaves neither the effects nor the ack: the batch fails and comes again", async () => {
    let violate = true;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "tally",
          transactional: true,
          backoff: { initialMs: 10, maxMs: 10, factor: 1 },
          async handle(events, ctx) {
            await applyEffects(events, ctx);
            // checked only at COMMIT, after the ack ran in the transaction
            if (violate) await ctx.run(sql`INSERT INTO app.unique_at_commit (id) VALUES (1), (1)`);
          },
        },
      ],
    });
    await raw.query(createEffects);
    await raw.query(
      "CREATE TABLE app.unique_at_commit (id int, CONSTRAINT once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)",
    );
    const positions = await appendTo(corq, "a", 2);
    await corq.advance();
    expect(await corq.consume("tally")).toMatchObject({
      outcome: "retry",
      error: expect.stringMatching(/unique|once/),
    });
    expect(await effectRows(raw)).toEqual([]);
    expect(await corq.key("tally", "a")).toMatchObject({ pending: 2, attempts: 1 });
    violate = false;
    await sleep(20);
    await drainTally(corq);
    expect(await effectRows(raw)).toEqual([
      { key: "a", position: positions[0], attempt: 2 },
      { key: "a", position: positions[1], attempt: 1 },
    ]);
  });

  it("are refused on one shared connection (a pg Client): their transaction would take in the drain's other statements", async () => {
    const { url } = await open();
    const client = new pg.Client({ connectionString: url });
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const definition = { name: "tally", transactional: true, handle: () => undefined };
    try {
      expect(() => createCorq({ db: client, subscriptions: [definition] })).toThrow(
        expect.objectContaining({ code: "invalid_config", message: expect.stringMatching(/"tally" is transactional/) }),
      );
      expect(() => createCorq({ db: client, subscriptions: [{ ...definition, transactional: false }] })).not.toThrow();
      await createCorq({ db: pool, subscriptions: [definition] }).close();
    } finally {
      await pool.end();
    }
  });

  it("roll back the effects of a handler whose lease was taken over by a second consumer while it ran", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let firstStarted = false;
    const definition = (hold: boolean) => ({
      name: "tally",
      transactional: true as const,
      leaseMs: 300,
      maxAttempts: 5,
      async handle(events: DeliveredEvent[], ctx: HandlerContext) {
        await applyEffects(events, ctx);
        if (hold && ctx.attempt === 1) {
          firstStarted = true;
          await held; // written, not committed: past its lease
        }
      },
    });
    const { corq, raw, another } = await open({ subscriptions: [definition(true)] });
    await raw.query(createEffects);
    const positions = await appendTo(corq, "a", 3);
    await corq.advance();
    const first = corq.consume("tally");
    await until(() => firstStarted, { message: "the first handler never ran" });
    await sleep(350); // its lease is over
    // a real second claimer, another instance on its own connections: takes the key over
    const second = another({ subscriptions: [definition(false)] });
    // (taking over an expired lease counts as a failed attempt: the head event alone comes first)
    expect(await within(second.consume("tally"), { timeoutMs: 5000, message: "the takeover hung" })).toMatchObject({
      key: "a",
      outcome: "acked",
      events: 1,
    });
    release();
    // the first one's ack finds the lease gone: its transaction, writes and all, is rolled back
    expect(await first).toMatchObject({ key: "a", outcome: "expired", events: 3 });
    expect(await effectRows(raw)).toEqual([{ key: "a", position: positions[0], attempt: 2 }]);
    expect(await second.consume("tally")).toMatchObject({ outcome: "acked", events: 2 });
    expect(await effectRows(raw)).toEqual(
      positions.map((position, i) => ({ key: "a", position, attempt: i === 0 ? 2 : 1 })),
    );
    expect(await corq.key("tally", "a")).toMatchObject({ pending: 0, attempts: 0, status: "idle" });
  });

  it("with several keys per claim: one transaction per key batch, each acked in its own; other outcomes settled as today", async () => {
    let prefixed = false;
    let failed = false;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "tally",
          transactional: true,
          batchSize: 3,
          backoff: { initialMs: 10, maxMs: 10, factor: 1 },
          async handle(events, ctx) {
            if (ctx.key === "prefix" && !prefixed) {
              // acks a prefix, and writes the effects of that prefix only
              prefixed = true;
              await applyEffects(events.slice(0, 1), ctx);
              return { ackedThrough: present(events[0], "the batch's first event").position };
            }
            await applyEffects(events, ctx);
            if (ctx.key === "fails" && !failed) {
              failed = true;
              throw new Error("not now");
            }
          },
        },
      ],
    });
    await raw.query(createEffects);
    const streams = { fine: await appendTo(corq, "fine", 2), fails: await appendTo(corq, "fails", 2) };
    const prefix = await appendTo(corq, "prefix", 3);
    await corq.advance();
    expect(await corq.drain("tally", { keysPerClaim: 3, maxBatches: 3 })).toMatchObject({ batches: 3 });
    // fine: all; fails: nothing (rolled back, in backoff); prefix: only what it acked
    expect(await effectRows(raw)).toEqual([
      ...streams.fine.map((position) => ({ key: "fine", position, attempt: 1 })),
      { key: "prefix", position: prefix[0], attempt: 1 },
    ]);
    expect(await corq.key("tally", "fails")).toMatchObject({ attempts: 1, pending: 2 });
    expect(await corq.key("tally", "prefix")).toMatchObject({ attempts: 0, pending: 2 });
    await sleep(20);
    // fails: its head alone after the failure, then the rest; prefix: the rest
    expect(await corq.drain("tally", { keysPerClaim: 3 })).toMatchObject({ batches: 3, events: 4 });
    expect(await corq.subscription("tally")).toMatchObject({ pending: 0 });
    const rows = await effectRows(raw);
    expect(rows.filter((r) => r.key !== "fine")).toEqual([
      { key: "fails", position: streams.fails[0], attempt: 2 },
      { key: "fails", position: streams.fails[1], attempt: 1 },
      ...prefix.map((position) => ({ key: "prefix", position, attempt: 1 })),
    ]);
  });

  it("are recorded as long as they ran, from the claim to the ack (not to their transaction's BEGIN), by consume and drain", async () => {
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "tally",
          transactional: true,
          async handle(events, ctx) {
            await applyEffects(events, ctx);
            await sleep(50);
          },
        },
      ],
    });
    await raw.query(createEffects);
    await appendTo(corq, "a", 2);
    await appendTo(corq, "b", 1);
    await corq.advance();
    expect(await corq.consume("tally")).toMatchObject({ outcome: "acked" });
    expect(await corq.drain("tally")).toMatchObject({ batches: 1 });
    const { rows } = await raw.query(
      `SELECT key, events, extract(epoch FROM finished_at - started_at) * 1000 AS ms FROM corq.activity ORDER BY key`,
    );
    expect(rows.map((r) => [r.key, r.events, Number(r.ms) >= 50])).toEqual([
      ["a", 2, true],
      ["b", 1, true],
    ]);
    // and counted in the subscription's throughput
    const [counted] = (await raw.query("SELECT sum(events)::int AS events FROM corq.throughput")).rows;
    expect(counted.events).toBe(3);
  });

  it("of one subscription do not wait for each other's COMMIT: nothing shared is written in their transactions", async () => {
    // a's COMMIT, after its ack, waits for an advisory lock the test holds (a deferred trigger);
    // b acks meanwhile. Before: b's ack waited on the throughput row a's ack had locked.
    let aInCommit!: () => Promise<number>;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "tally",
          transactional: true,
          async handle(events, ctx) {
            if (ctx.key === "b") await aInCommit();
            await applyEffects(events, ctx);
          },
        },
      ],
    });
    await raw.query(createEffects);
    await raw.query(`
      CREATE FUNCTION app.hold() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.key = 'a' THEN PERFORM pg_advisory_xact_lock(7); END IF; RETURN NULL; END $$;
      CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON app.effects DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION app.hold()`);
    const waitingOnAdvisoryLock = () =>
      raw.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
      );
    aInCommit = async () => {
      let pid: number | undefined;
      await until(
        async () => {
          pid = (await waitingOnAdvisoryLock()).rows[0]?.pid;
          return pid !== undefined;
        },
        { message: "a's COMMIT never waited on the advisory lock" },
      );
      return present(pid, "a's pid");
    };
    const holder = await raw.connect();
    await holder.query("SELECT pg_advisory_lock(7)");
    await appendTo(corq, "a", 2);
    await appendTo(corq, "b", 2);
    await corq.advance();
    const drained = corq.drain("tally", { keysPerClaim: 2 });
    let seen: string | undefined;
    try {
      const a = await aInCommit();
      // one of the two happens: b's transaction commits, or b waits on a lock a's transaction holds
      await until(
        async () => {
          const blocked = await raw.query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid))",
            [a],
          );
          if (blocked.rows.length > 0) seen = "b waits on a lock a's transaction holds";
          else if ((await corq.key("tally", "b"))?.pending === 0) seen = "b committed";
          return seen !== undefined;
        },
        { message: "b neither committed nor waited" },
      );
    } finally {
      await holder.query("SELECT pg_advisory_unlock(7)");
      holder.release();
    }
    expect(seen).toBe("b committed");
    expect(await within(drained, { message: "the drain never ended" })).toMatchObject({ batches: 2, events: 4 });
    expect((await corq.activity({ subscription: "tally" })).map((r) => [r.key, r.outcome, r.events]).sort()).toEqual([
      ["a", "acked", 2],
      ["b", "acked", 2],
    ]);
  });
});
