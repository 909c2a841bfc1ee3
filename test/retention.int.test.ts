// Retention of the log: an event goes only when it is older than maxAgeMs (database clock), of a
// stream the policy takes, at or below every subscription's watermark (paused subscriptions and
// dead keys included) and referenced by no queue row; passes are chunked and resume; a rewind
// below the horizon is refused and changes nothing; a subscription created from the beginning
// afterwards starts at the horizon and says so; the option and PUT take turns as documented.
import { describe, expect, inject, it } from "vitest";
import pg from "pg";
import { CorqError, createCorq, type SubscriptionDefinition } from "../src/index.js";
import { createTestDatabase } from "./helpers/database.js";
import {
  applyMigrations,
  insertEvents,
  migrationIndex,
  seedAdvancedSubscriptions,
  tagsFrom,
} from "./helpers/earlierRelease.js";
import { drain, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const DAY = 86_400_000;
const e = (n: number) => ({ name: "E", data: { n } });

/** Every subscription that records (subscription, key, position) of what it handles; `fails` makes a key's batch throw. */
function recording(name: string, more: Partial<SubscriptionDefinition> & { fails?: string } = {}) {
  const handled: { key: string; position: number }[] = [];
  const { fails, ...rest } = more;
  const definition: SubscriptionDefinition = {
    name,
    handle: (events, ctx) => {
      if (ctx.key === fails) throw new Error(`${fails} fails`);
      handled.push(...events.map((event) => ({ key: ctx.key, position: event.position })));
    },
    ...rest,
  };
  return { handled, definition };
}

/** Positions still in the log, ascending. */
const positions = async (raw: pg.Pool) =>
  (await raw.query<{ position: number }>("SELECT position::int FROM corq.events ORDER BY position")).rows.map(
    (r) => r.position,
  );

/** Makes these events (all when left out) two days old: older than a one-day policy. */
const age = (raw: pg.Pool, which?: number[]) =>
  raw.query(
    `UPDATE corq.events SET created_at = now() - interval '2 days' ${which ? "WHERE position = ANY($1::bigint[])" : ""}`,
    which ? [which] : [],
  );

const queueOf = async (raw: pg.Pool) =>
  (await raw.query("SELECT subscription_id, key, seq::int, position::int FROM corq.queue ORDER BY 1, 2, 3")).rows;

describe("retention", () => {
  it("is off by default: nothing is removed, the horizon is null", async () => {
    const { corq, raw } = await open({ subscriptions: [recording("a").definition] });
    await corq.append("x", [e(1), e(2)]);
    await age(raw);
    await drain(corq, "a");
    expect(await corq.retention()).toEqual({ maxAgeMs: null, streams: null, horizon: null });
    expect(await corq.runRetention()).toEqual({ deleted: 0, horizon: null, done: true });
    expect(await positions(raw)).toHaveLength(2);
  });

  it("removes only what is old, advanced past by every subscription and held by no queue: paused, dead and queued stay", async () => {
    const a = recording("a");
    const b = recording("b", { maxAttempts: 1, fails: "y" });
    const c = recording("c", { streams: ["w"] });
    const { corq, raw } = await open({ subscriptions: [a.definition, b.definition, c.definition] });
    const x = (await corq.append("x", [e(1), e(2)])).positions;
    const [y] = (await corq.append("y", [e(3)])).positions;
    const z = (await corq.append("z", [e(4), e(5)])).positions;
    const [w] = (await corq.append("w", [e(6)])).positions;
    await age(raw);
    const [young] = (await corq.append("x", [e(7)])).positions; // not old enough
    await corq.pauseKey("b", "z"); // z waits in b's queue
    await corq.pause("c"); // c's w waits in its queue (its watermark moves on: advancing goes on)
    await drain(corq, "a");
    await drain(corq, "b"); // y dies in b
    expect((await corq.subscription("b")).keys).toMatchObject({ dead: 1, paused: 1 });
    expect((await corq.subscription("c")).pending).toBe(1);

    expect(await corq.setRetention({ maxAgeMs: DAY })).toEqual({ maxAgeMs: DAY, streams: null, horizon: null });
    const queued = await queueOf(raw);
    expect(await corq.runRetention()).toEqual({ deleted: 2, horizon: (x[1] as number) + 1, done: true });
    expect(await positions(raw)).toEqual([y, ...z, w, young]);
    expect(await queueOf(raw)).toEqual(queued);
    expect(await corq.runRetention()).toEqual({ deleted: 0, horizon: (x[1] as number) + 1, done: true });

    // the dead key's failed event goes once it is skipped, the paused key's once it is handled
    await corq.releaseDeadLetters({ subscription: "b", key: "y", mode: "skip" });
    await corq.resumeKey("b", "z");
    await drain(corq, "b");
    expect(await corq.runRetention()).toEqual({ deleted: 3, horizon: (z[1] as number) + 1, done: true });
    expect(await positions(raw)).toEqual([w, young]);
    // the paused subscription's event once it is resumed and handled
    await corq.resume("c");
    await drain(corq, "c");
    expect(await corq.runRetention()).toEqual({ deleted: 1, horizon: (w as number) + 1, done: true });
    expect(await positions(raw)).toEqual([young]);
    expect(c.handled).toEqual([{ key: "w", position: w }]);
    expect(await corq.retention()).toEqual({ maxAgeMs: DAY, streams: null, horizon: (w as number) + 1 });
  });

  it("stops at a subscription that has not advanced past an event, paused or not; goes on once it has", async () => {
    const a = recording("a");
    const { corq, raw, another } = await open({ subscriptions: [a.definition] });
    await corq.append("x", [e(1), e(2)]);
    await drain(corq, "a");
    // another app's subscription on the same log, defined (from the beginning) but not advanced
    // yet, and paused: what it has not advanced past is still to come for it
    const late = recording("late");
    const other = another({ subscriptions: [late.definition] });
    await other.migrate();
    await corq.pause("late");
    const [third] = (await corq.append("x", [e(3)])).positions;
    await drain(corq, "a");
    await age(raw);
    await corq.setRetention({ maxAgeMs: DAY });
    expect(await corq.runRetention()).toEqual({ deleted: 0, horizon: null, done: true });
    expect(await positions(raw)).toHaveLength(3);

    // it advances through the first two events only (its watermark in between)
    await raw.query(
      `UPDATE corq.subscriptions SET (watermark_tx, watermark_position) = (SELECT tx, position FROM corq.events
         WHERE position = $1) WHERE name = 'late'`,
      [(third as number) - 1],
    );
    expect(await corq.runRetention()).toMatchObject({ deleted: 2, done: true });
    expect(await positions(raw)).toEqual([third]);
    await corq.resume("late");
    await drain(other, "late");
    expect(await corq.runRetention()).toMatchObject({ deleted: 1, done: true });
    expect(await positions(raw)).toEqual([]);
  });

  it("takes only the streams of its prefixes; a change of prefixes sweeps the log again", async () => {
    const a = recording("a");
    const { corq, raw } = await open({ subscriptions: [a.definition] });
    const t = (await corq.append("telemetry-1", [e(1)])).positions;
    const o = (await corq.append("orders-1", [e(2)])).positions;
    const t2 = (await corq.append("telemetry-2", [e(3)])).positions;
    const x = (await corq.append("telemetry_x", [e(4)])).positions; // `_` is no wildcard
    await age(raw);
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY, streams: ["telemetry-", "telemetry-"] });
    expect(await corq.retention()).toMatchObject({ streams: ["telemetry-"] });
    expect(await corq.runRetention()).toMatchObject({ deleted: 2, done: true });
    expect(await positions(raw)).toEqual([...o, ...x]);
    // orders- now as well: the sweep starts again from the beginning of the log
    await corq.setRetention({ maxAgeMs: DAY, streams: ["orders-"] });
    expect(await corq.runRetention()).toMatchObject({ deleted: 1, horizon: (t2[0] as number) + 1, done: true });
    expect(await positions(raw)).toEqual(x);
    expect(t).toHaveLength(1);
  });

  it("runs in bounded chunks that resume where the last pass stopped", async () => {
    const a = recording("a");
    const { corq, raw } = await open({ subscriptions: [a.definition] });
    const all = (
      await corq.append(
        "x",
        Array.from({ length: 7 }, (_, i) => e(i)),
      )
    ).positions;
    await age(raw);
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY });
    expect(await corq.runRetention({ chunkSize: 2, maxChunks: 2 })).toEqual({
      deleted: 4,
      horizon: (all[3] as number) + 1,
      done: false,
    });
    expect(await positions(raw)).toEqual(all.slice(4));
    expect(await corq.runRetention({ chunkSize: 2, maxChunks: 1 })).toMatchObject({ deleted: 2, done: false });
    expect(await corq.runRetention({ chunkSize: 2 })).toEqual({
      deleted: 1,
      horizon: (all[6] as number) + 1,
      done: true,
    });
    expect(await positions(raw)).toEqual([]);
  });

  it("re-checks held events a chunk at a time: a pass goes through all of them once the sweep has caught up", async () => {
    const a = recording("a");
    const { corq, raw } = await open({ subscriptions: [a.definition] });
    const held = (
      await corq.append(
        "x",
        Array.from({ length: 5 }, (_, i) => e(i)),
      )
    ).positions;
    await age(raw);
    await corq.pauseKey("a", "x");
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY });
    expect(await corq.runRetention({ chunkSize: 2 })).toEqual({ deleted: 0, horizon: null, done: true });
    expect(await raw.query("SELECT count(*)::int AS n FROM corq.retention_held")).toMatchObject({ rows: [{ n: 5 }] });
    await corq.resumeKey("a", "x");
    await drain(corq, "a");
    // one pass: the first chunk sweeps (nothing new) and re-checks 2, then re-check-only chunks of 2 and 1
    expect(await corq.runRetention({ chunkSize: 2 })).toEqual({
      deleted: 5,
      horizon: (held[4] as number) + 1,
      done: true,
    });
    expect(await raw.query("SELECT count(*)::int AS n FROM corq.retention_held")).toMatchObject({ rows: [{ n: 0 }] });
  });

  it("a held event goes once no queue holds it only if it is still due: of a stream the policy takes, advanced past by every subscription", async () => {
    const a = recording("a");
    const { corq, raw, another } = await open({ subscriptions: [a.definition] });
    const [x] = (await corq.append("x", [e(1)])).positions;
    const [y] = (await corq.append("y", [e(2)])).positions;
    await age(raw);
    await corq.pauseKey("a", "x");
    await corq.pauseKey("a", "y");
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY, streams: ["x", "y"] });
    expect(await corq.runRetention()).toEqual({ deleted: 0, horizon: null, done: true }); // both held by a's queue
    // the policy no longer takes y, and a subscription created since has not advanced past x
    await corq.setRetention({ maxAgeMs: DAY, streams: ["x"] });
    const late = recording("late");
    const other = another({ subscriptions: [late.definition] });
    await other.migrate();
    await corq.resumeKey("a", "x");
    await corq.resumeKey("a", "y");
    await drain(corq, "a");
    expect(await corq.runRetention()).toEqual({ deleted: 0, horizon: null, done: true });
    expect(await positions(raw)).toEqual([x, y]);
    // late handles x: x goes; y never does under this policy
    await drain(other, "late");
    expect(late.handled.map((h) => h.position)).toEqual([x, y]);
    expect(await corq.runRetention()).toEqual({ deleted: 1, horizon: (x as number) + 1, done: true });
    expect(await positions(raw)).toEqual([y]);
  });

  it("refuses a rewind below the horizon with retained_away (409, the horizon) and changes nothing", async () => {
    const a = recording("a");
    const { corq, raw } = await open({ subscriptions: [a.definition] });
    const old = (await corq.append("x", [e(1), e(2)])).positions;
    await age(raw);
    const kept = (await corq.append("x", [e(3)])).positions;
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY });
    const { horizon } = await corq.runRetention();
    expect(horizon).toBe((old[1] as number) + 1);
    const queue = await queueOf(raw);
    const keys = await corq.keys("a");
    for (const to of old) {
      const refused = await corq.rewind("a", { to }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(CorqError);
      expect(refused).toMatchObject({ code: "retained_away", status: 409, extra: { horizon } });
    }
    expect(await queueOf(raw)).toEqual(queue);
    expect(await corq.keys("a")).toEqual(keys);
    // at the horizon's event and from the beginning (what the log still holds): delivered again
    expect(await corq.rewind("a", { to: kept[0] as number })).toEqual({ requeued: 1 });
    expect(await corq.rewind("a", { to: "beginning" })).toEqual({ requeued: 1 });
  });

  it("refuses a rewind above the horizon whose range in log order holds a removed event (outbox transactions), pass after pass", async () => {
    const a = recording("a");
    const { corq, raw } = await open({ subscriptions: [a.definition] });
    // two outbox transactions take their ids, another append commits, then the outboxes append:
    // their events have the higher positions and come first in log order (tx, position)
    const [outbox, kept] = [await raw.connect(), await raw.connect()];
    let other: number;
    let outboxed: number;
    let young: number;
    try {
      for (const client of [outbox, kept]) {
        await client.query("BEGIN");
        await client.query("SELECT pg_current_xact_id()");
      }
      other = present((await corq.append("x", [e(1)])).positions[0], "the other append's position");
      outboxed = present((await corq.append("y", [e(2)], { tx: outbox })).positions[0], "the outbox's position");
      await outbox.query("COMMIT");
      young = present((await corq.append("z", [e(3)], { tx: kept })).positions[0], "the second outbox's position");
      await kept.query("COMMIT");
    } finally {
      for (const client of [outbox, kept]) {
        await client.query("ROLLBACK").catch(() => undefined);
        client.release();
      }
    }
    // positions: other < outboxed < young; log order: outboxed, young, other
    expect([other < outboxed, outboxed < young]).toEqual([true, true]);
    await age(raw, [other, outboxed]); // the second outbox's event is young: it stays
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY });
    expect(await corq.runRetention()).toEqual({ deleted: 2, horizon: outboxed + 1, done: true });
    expect(await positions(raw)).toEqual([young]);
    const queue = await queueOf(raw);
    // from the young event on, in log order, comes `other`, removed: refused — also after a pass
    // that removed nothing — and nothing changed
    for (let pass = 0; pass < 2; pass++) {
      const refused = await corq.rewind("a", { to: young }).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: "retained_away", status: 409, extra: { horizon: outboxed + 1 } });
      expect(await queueOf(raw)).toEqual(queue);
      expect(await corq.runRetention()).toEqual({ deleted: 0, horizon: outboxed + 1, done: true });
    }
    // from an event after the removed ones in log order: every event of the range is there
    const [later] = (await corq.append("x", [e(4)])).positions;
    await drain(corq, "a");
    expect(await corq.rewind("a", { to: later as number })).toEqual({ requeued: 1 });
  });

  it("a subscription created from the beginning after events were removed starts at the horizon and says so", async () => {
    const a = recording("a");
    const { corq, raw, another } = await open({ subscriptions: [a.definition] });
    await corq.append("x", [e(1), e(2)]);
    const [kept] = (await corq.append("other", [e(3)])).positions; // a stream the policy does not take
    await age(raw);
    const [fresh] = (await corq.append("x", [e(4)])).positions;
    await drain(corq, "a");
    expect((await corq.subscription("a")).startsAt).toBeNull();
    await corq.setRetention({ maxAgeMs: DAY, streams: ["x"] });
    const { horizon } = await corq.runRetention();
    expect(horizon).toBe(kept); // 1 + the second x event's position

    const late = recording("late");
    const fromNow = recording("now", { from: "now" });
    const other = another({ subscriptions: [late.definition, fromNow.definition] });
    await other.migrate();
    expect(await other.subscription("late")).toMatchObject({ from: "beginning", startsAt: horizon });
    expect(await other.subscription("now")).toMatchObject({ from: "now", startsAt: null });
    await drain(other, "late");
    // what the log still holds: the stream the policy does not take, and everything from the horizon
    expect(late.handled.map((h) => h.position)).toEqual([kept, fresh]);
  });

  it("the option applies when a deploy changes it; a PUT stays in force until then", async () => {
    const { corq, another } = await open({ retention: { maxAgeMs: 1000 } });
    expect(await corq.retention()).toEqual({ maxAgeMs: 1000, streams: null, horizon: null });
    expect(await corq.setRetention({ maxAgeMs: 5000, streams: ["s-"] })).toMatchObject({ maxAgeMs: 5000 });
    expect(await corq.retention()).toMatchObject({ maxAgeMs: 5000, streams: ["s-"] });
    // a restart with the same option: the PUT stands
    expect(await another({ retention: { maxAgeMs: 1000 } }).retention()).toMatchObject({ maxAgeMs: 5000 });
    // an instance without an option has no say
    expect(await another({}).retention()).toMatchObject({ maxAgeMs: 5000 });
    // a deploy with another option: the option
    const deployed = another({ retention: { maxAgeMs: 2000 } });
    expect(await deployed.retention()).toEqual({ maxAgeMs: 2000, streams: null, horizon: null });
    // and a PUT through it (before or after its first read) stands until the next deploy changes the option
    expect(await deployed.setRetention({ maxAgeMs: null })).toMatchObject({ maxAgeMs: null });
    expect(await deployed.retention()).toMatchObject({ maxAgeMs: null });
    const unread = another({ retention: { maxAgeMs: 3000 } });
    expect(await unread.setRetention({ maxAgeMs: 4000 })).toMatchObject({ maxAgeMs: 4000 });
    expect(await unread.retention()).toMatchObject({ maxAgeMs: 4000 });
    expect(await another({ retention: { maxAgeMs: 3000 } }).retention()).toMatchObject({ maxAgeMs: 4000 });
  });

  it("refuses a malformed policy (invalid_input / invalid_config) and changes nothing", async () => {
    const { corq } = await open();
    await corq.setRetention({ maxAgeMs: DAY, streams: ["keep-"] });
    for (const bad of [
      { maxAgeMs: 0 },
      { maxAgeMs: -1 },
      { maxAgeMs: 1.5 },
      { maxAgeMs: "1000" },
      { maxAgeMs: 101 * 365 * DAY },
      {},
      { maxAgeMs: DAY, streams: [] },
      { maxAgeMs: DAY, streams: [""] },
      { maxAgeMs: DAY, streams: ["a*"] },
      { maxAgeMs: DAY, streams: "x" },
      { maxAgeMs: DAY, extra: true },
      null,
    ]) {
      const refused = await corq.setRetention(bad as never).catch((error: unknown) => error);
      expect(refused, JSON.stringify(bad)).toMatchObject({ code: "invalid_input", status: 400 });
    }
    expect(await corq.retention()).toEqual({ maxAgeMs: DAY, streams: ["keep-"], horizon: null });
    await expect(open({ retention: { maxAgeMs: 0 } })).rejects.toMatchObject({ code: "invalid_config" });
  });

  it("a chunk waits for a rewind that holds its subscription's row, and keeps what it queued", async () => {
    const a = recording("a");
    const { corq, raw } = await open({ subscriptions: [a.definition] });
    const [first] = (await corq.append("x", [e(1), e(2)])).positions;
    await age(raw);
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY });
    // a rewind's protocol: the subscription row FOR UPDATE, then the events queued again
    const rewind = await raw.connect();
    try {
      await rewind.query("BEGIN");
      await rewind.query("SELECT id FROM corq.subscriptions WHERE name = 'a' FOR UPDATE");
      const pass = corq.runRetention();
      await until(
        async () =>
          (
            await raw.query(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
          ).rows[0].n > 0,
        { message: "the chunk never waited for the subscription row" },
      );
      await rewind.query(
        `INSERT INTO corq.queue (subscription_id, key, seq, tx, position, replay)
         SELECT s.id, 'x', 100, e.tx, e.position, true FROM corq.subscriptions s, corq.events e
         WHERE s.name = 'a' AND e.position = $1`,
        [first],
      );
      await rewind.query("COMMIT");
      expect(await pass).toMatchObject({ deleted: 1, done: true });
    } finally {
      rewind.release();
    }
    expect(await positions(raw)).toEqual([first]);
  });

  it("a chunk gives up rather than wait long for a rewind: the pass ends with done: false, nothing removed", async () => {
    const a = recording("a");
    const { corq, raw } = await open({ subscriptions: [a.definition] });
    await corq.append("x", [e(1)]);
    await age(raw);
    await drain(corq, "a");
    await corq.setRetention({ maxAgeMs: DAY });
    const rewind = await raw.connect();
    try {
      await rewind.query("BEGIN");
      await rewind.query("SELECT id FROM corq.subscriptions WHERE name = 'a' FOR UPDATE");
      expect(await corq.runRetention()).toEqual({ deleted: 0, horizon: null, done: false });
      await rewind.query("ROLLBACK");
    } finally {
      rewind.release();
    }
    expect(await corq.runRetention()).toMatchObject({ deleted: 1, done: true });
  });
});

describe("upgrading to retention", () => {
  it("a populated database of the release before: off until set, then only what is handled goes; queued, leased, dead and paused stay", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const handled: string[] = [];
    const corq = createCorq({
      databaseUrl: database.url,
      subscriptions: [
        {
          name: "s",
          maxAttempts: 5,
          handle: (events, ctx) => void handled.push(...events.map((ev) => `${ctx.key}:${ev.version}`)),
        },
      ],
    });
    try {
      const retentionMigration = migrationIndex("_retention");
      await applyMigrations(client, retentionMigration);
      await insertEvents(
        client,
        [
          ["a", 0],
          ["b", 0],
          ["c", 0],
          ["a", 1],
          ["d", 0],
          ["e", 0],
          ["e", 1],
        ],
        "now() - interval '2 days'",
      );
      // the release before left: a code subscription s advanced through the log, in which key a
      // is ready, b leased for an hour, c dead, d paused, e replaying (acked, then rewound); a push
      // subscription p advanced through the log too, with nothing queued
      await seedAdvancedSubscriptions(
        client,
        `(1, 'a', 2, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 2, 0, 0),
             (1, 'b', 1, 1, now() + interval '1 hour', gen_random_uuid(), now() + interval '1 hour', 'old', now(), NULL, NULL, NULL, 0, 1, 0, 0),
             (1, 'c', 1, 5, NULL, NULL, NULL, NULL, NULL, now(), (SELECT position FROM corq.events WHERE stream = 'c'), NULL, 0, 1, 0, 0),
             (1, 'd', 1, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, now(), 0, 1, 0, 0),
             (1, 'e', 2, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2, 4, 2, 4)`,
      );

      expect((await corq.migrate()).applied).toEqual(tagsFrom(retentionMigration));
      expect(await corq.retention()).toEqual({ maxAgeMs: null, streams: null, horizon: null });
      expect(await corq.subscription("s")).toMatchObject({ startsAt: null, pending: 7 });
      expect(await corq.subscription("p")).toMatchObject({ startsAt: null });
      await corq.setRetention({ maxAgeMs: DAY });
      expect(await corq.runRetention()).toMatchObject({ deleted: 0, done: true }); // everything is queued in s
      await corq.drain("s");
      expect(handled).toEqual(["a:0", "a:1", "e:0", "e:1"]);
      expect(await corq.runRetention()).toMatchObject({ deleted: 4, done: true });
      const { rows } = await client.query("SELECT stream, version FROM corq.events ORDER BY position");
      expect(rows).toEqual([
        { stream: "b", version: 0 },
        { stream: "c", version: 0 },
        { stream: "d", version: 0 },
      ]);
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });
});
