// Idle keys lose their rows; seqs are never reused. A key with nothing queued, no lease, not dead,
// not paused and no activity for longer than the threshold is deleted by compaction, which raises
// its subscription's seq floor; a key that comes back numbers its events above every seq it had
// — on the SQL-key advance, the function-key advance, a rewind and a pause. The threshold is
// judged by the database's clock: tests move a key's last activity back instead of waiting.
// Races are held by locks, each seen waiting in pg_stat_activity, never by timing.
import { describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq, type DeliveredEvent, type HandlerContext, type SubscriptionDefinition } from "../src/index.js";
import { createExecutor, type Queryable } from "../src/db/executor.js";
import { compactIdleKeys, type CompactedRow } from "../src/sql/housekeeping/compactIdleKeys.js";
import { advanceSubscription } from "../src/sql/advance/advanceSubscription.js";
import { drain, useCorq } from "./helpers/corq.js";
import { within } from "./helpers/until.js";
import { waitingOnLock } from "./helpers/waitingOnLock.js";
import { present } from "./helpers/present.js";
import { createTestDatabase } from "./helpers/database.js";
import { applyMigrations, migrationIndex, tagsFrom } from "./helpers/earlierRelease.js";

const open = useCorq();
const HOUR = 3_600_000;
const e = (n: number) => ({ name: "E", data: { n, k: "" } });

/** A subscription that records `key:seq` (`r` after a replayed one) of everything it handles. */
function recording(definition: Partial<SubscriptionDefinition> = {}) {
  const seen: string[] = [];
  const subscription: SubscriptionDefinition = {
    name: "s",
    handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
      void seen.push(...events.map((ev) => `${ctx.key}:${ev.seq}${ev.replay ? "r" : ""}`)),
    ...definition,
  };
  return { seen, subscription };
}

/** One compaction statement on `db` (a held transaction's client, or the pool). */
async function compact(db: Queryable, idleMs = HOUR): Promise<CompactedRow> {
  return present((await createExecutor(db).run<CompactedRow>(compactIdleKeys({ idleMs, limit: 5000 })))[0], "count");
}

/** Moves the last activity of every key but `except` two hours back: idle past a one-hour threshold. */
async function age(raw: pg.Pool, except: string[] = []) {
  await raw.query("UPDATE corq.keys SET active_at = active_at - interval '2 hours' WHERE NOT (key = ANY($1))", [
    except,
  ]);
}

const keyRows = async (raw: pg.Pool) =>
  (await raw.query("SELECT key FROM corq.keys ORDER BY key")).rows.map((r: { key: string }) => r.key);

/** A transaction on a client of its own, left open until `end`. */
async function held(raw: pg.Pool) {
  const client = await raw.connect();
  await client.query("BEGIN");
  let open = true;
  return {
    client,
    /** Commits (or rolls back); once: a second call does nothing. */
    async end(how: "COMMIT" | "ROLLBACK" = "COMMIT") {
      if (!open) return;
      open = false;
      await client.query(how).catch(() => undefined);
      client.release();
    },
  };
}

describe("idle key compaction", () => {
  it("deletes only keys idle past the threshold: queued, leased, dead, paused and recently active keys stay", async () => {
    const { seen, subscription } = recording({ maxAttempts: 1 });
    const { corq, raw } = await open({
      subscriptions: [
        {
          ...subscription,
          handle: (events, ctx) => {
            if (ctx.key === "dead") throw new Error("fails for good");
            return subscription.handle(events, ctx);
          },
        },
      ],
    });
    await corq.append("a", [e(1), e(2), e(3)]);
    for (const key of ["b", "recent", "dead", "paused"]) await corq.append(key, [e(1)]);
    await drain(corq, "s");
    await corq.pauseKey("s", "paused"); // paused with nothing queued: only the pause keeps it
    await corq.append("queued", [e(1)]);
    await corq.append("leased", [e(1)]);
    await corq.advance();
    await raw.query(
      `UPDATE corq.keys SET lease_token = gen_random_uuid(), lease_until = now() + interval '1 hour',
         available_at = now() + interval '1 hour' WHERE key = 'leased'`,
    );
    await age(raw, ["recent"]);
    expect(await compact(raw)).toEqual({ deleted: 2, busy: 0 });
    expect(await keyRows(raw)).toEqual(["dead", "leased", "paused", "queued", "recent"]);
    expect(await corq.keys("s", { status: "dead" })).toMatchObject([{ key: "dead" }]);
    // the threshold is all that kept "recent": with none it goes too
    expect(await compact(raw, 0)).toEqual({ deleted: 1, busy: 0 });
    expect(await keyRows(raw)).toEqual(["dead", "leased", "paused", "queued"]);
    expect(seen.sort()).toEqual(["a:1", "a:2", "a:3", "b:1", "paused:1", "recent:1"]);
  });

  it("a key that comes back numbers above every seq it had (SQL key); a new key starts above the floor too", async () => {
    const { seen, subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2), e(3)]);
    await corq.append("b", [e(1), e(2), e(3), e(4), e(5)]);
    await drain(corq, "s");
    await age(raw);
    expect(await compact(raw)).toMatchObject({ deleted: 2 });
    await corq.append("a", [e(4)]);
    await corq.append("b", [e(6)]);
    await corq.append("c", [e(1)]);
    seen.length = 0;
    await drain(corq, "s");
    // the floor is the highest seq of every key compacted: 5 (b's), above a's 3 as well
    expect(seen.sort()).toEqual(["a:6", "b:6", "c:6"]);
    await corq.append("a", [e(5)]);
    await drain(corq, "s");
    expect(seen.at(-1)).toBe("a:7");
  });

  it("… after compactions one after another: a later one never lowers the floor an earlier one raised", async () => {
    const { seen, subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2), e(3)]);
    await corq.append("b", [e(1), e(2), e(3), e(4), e(5)]);
    await drain(corq, "s");
    await age(raw, ["a"]);
    expect(await compact(raw)).toMatchObject({ deleted: 1 }); // b: the floor is 5
    await age(raw);
    expect(await compact(raw)).toMatchObject({ deleted: 1 }); // a, with seqs up to 3
    await corq.append("b", [e(6)]);
    await corq.append("c", [e(1)]);
    seen.length = 0;
    await drain(corq, "s");
    expect(seen.sort()).toEqual(["b:6", "c:6"]);
  });

  it("leaves the subscription's rate bucket (a key's own goes with it): the limit holds across a compaction", async () => {
    const { seen, subscription } = recording({ rateLimit: { events: 2, perMs: HOUR, by: "subscription", burst: 2 } });
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2)]);
    await drain(corq, "s");
    expect(seen).toEqual(["a:1", "a:2"]); // the hour's room
    await age(raw);
    expect(await compact(raw)).toEqual({ deleted: 1, busy: 0 });
    await corq.append("b", [e(1)]);
    seen.length = 0;
    await drain(corq, "s");
    expect(seen).toEqual([]);
    expect(await corq.key("s", "b")).toMatchObject({ status: "backoff", pending: 1, attempts: 0 });
  });

  it("… on the function-key advance", async () => {
    const { seen, subscription } = recording({ key: (event) => (event.data as { k: string }).k });
    const { corq, raw } = await open({ subscriptions: [subscription] });
    const keyed = (k: string, n: number) => ({ name: "E", data: { n, k } });
    await corq.append("x", [keyed("a", 1), keyed("a", 2), keyed("b", 1), keyed("b", 2), keyed("b", 3)]);
    await drain(corq, "s");
    await age(raw);
    expect(await compact(raw)).toMatchObject({ deleted: 2 });
    await corq.append("x", [keyed("a", 3), keyed("b", 4)]);
    seen.length = 0;
    await drain(corq, "s");
    expect(seen.sort()).toEqual(["a:4", "b:4"]);
  });

  it("… on a rewind, which gives the compacted key a row again", async () => {
    const { seen, subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2), e(3)]);
    await corq.append("b", [e(1), e(2), e(3), e(4), e(5)]);
    await drain(corq, "s");
    await age(raw);
    expect(await compact(raw)).toMatchObject({ deleted: 2 });
    expect(await corq.rewind("s", { to: "beginning", key: "a" })).toEqual({ requeued: 3 });
    seen.length = 0;
    await drain(corq, "s");
    expect(seen).toEqual(["a:6r", "a:7r", "a:8r"]);
  });

  it("… on a key paused before it came back", async () => {
    const { seen, subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2), e(3)]);
    await drain(corq, "s");
    await age(raw);
    expect(await compact(raw)).toMatchObject({ deleted: 1 });
    await corq.pauseKey("s", "a");
    await corq.append("a", [e(4)]);
    seen.length = 0;
    await drain(corq, "s");
    expect(seen).toEqual([]);
    await corq.resumeKey("s", "a");
    await drain(corq, "s");
    expect(seen).toEqual(["a:4"]);
  });
});

describe("compaction next to writers of key rows", () => {
  const byFunction: Partial<SubscriptionDefinition> = { key: (event) => event.stream };
  it.each([
    ["SQL key", {}],
    ["function key", byFunction],
  ])(
    "an advance (%s) that waited for a compaction's lock numbers the deleted key from the floor the compaction committed",
    async (_kind, definition: Partial<SubscriptionDefinition>) => {
      const { seen, subscription } = recording(definition);
      const { corq, raw } = await open({ subscriptions: [subscription] });
      await corq.append("a", [e(1), e(2), e(3)]);
      await drain(corq, "s");
      await age(raw);
      await corq.append("a", [e(4)]); // committed, not yet advanced
      const compaction = await held(raw);
      try {
        // the key's row is gone and the floor raised to 3, not committed yet
        expect(await compact(compaction.client)).toMatchObject({ deleted: 1 });
        const advancing = corq.advance();
        // its snapshot is taken; it waits for the subscription row the compaction holds
        await waitingOnLock(raw, "corq");
        await compaction.end();
        await advancing;
      } finally {
        await compaction.end("ROLLBACK");
      }
      seen.length = 0;
      await drain(corq, "s");
      expect(seen).toEqual(["a:4"]);
    },
  );

  it("a pause that waited for a compaction's lock gives the deleted key a row numbered from the committed floor", async () => {
    const { seen, subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2), e(3)]);
    await drain(corq, "s");
    await age(raw);
    const compaction = await held(raw);
    try {
      expect(await compact(compaction.client)).toMatchObject({ deleted: 1 });
      const pausing = corq.pauseKey("s", "a");
      await waitingOnLock(raw, "paused_at");
      await compaction.end();
      await pausing;
    } finally {
      await compaction.end("ROLLBACK");
    }
    await corq.append("a", [e(4)]);
    await corq.resumeKey("s", "a");
    seen.length = 0;
    await drain(corq, "s");
    expect(seen).toEqual(["a:4"]);
  });

  it("never waits for a subscription whose row another statement holds (a rewind, an advance): it skips it", async () => {
    const { corq, raw } = await open({
      subscriptions: [recording().subscription, { ...recording().subscription, name: "t" }],
    });
    await corq.append("a", [e(1)]);
    await drain(corq, "s");
    await drain(corq, "t");
    await age(raw);
    const holder = await held(raw); // as a rewind holds it for its whole transaction
    try {
      await holder.client.query("SELECT 1 FROM corq.subscriptions WHERE name = 's' FOR UPDATE");
      const done = await within(compact(raw), { timeoutMs: 3000, message: "the compaction waited for the row" });
      expect(done).toEqual({ deleted: 1, busy: 1 }); // t's key; s's next time
    } finally {
      await holder.end();
    }
    expect(await compact(raw)).toEqual({ deleted: 1, busy: 0 });
  });

  it("skips the subscription of a rewind in progress: the rewind requeues every key, the idle ones too", async () => {
    // The rewind marks its subscription and commits chunk by chunk; its requeue chunk waits here
    // for key a's row (held by the test), its snapshot taken: had b been deleted meanwhile, the
    // requeue would neither find b's row nor see it gone, and b's events would not replay.
    const { seen, subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2)]);
    await corq.append("b", [e(1), e(2), e(3)]);
    await drain(corq, "s");
    await age(raw);
    const keyHolder = await held(raw);
    let rewinding: Promise<{ requeued: number }> | undefined;
    try {
      await keyHolder.client.query("SELECT 1 FROM corq.keys WHERE key = 'a' FOR UPDATE");
      rewinding = corq.rewind("s", { to: "beginning" });
      await waitingOnLock(raw, "WITH moved AS (");
      const done = await within(compact(raw), { timeoutMs: 3000, message: "the compaction waited for the rewind" });
      expect(done).toEqual({ deleted: 0, busy: 1 });
      await keyHolder.end();
      expect(await rewinding).toEqual({ requeued: 5 });
    } finally {
      await keyHolder.end("ROLLBACK");
      await rewinding?.catch(() => undefined);
    }
    seen.length = 0;
    await drain(corq, "s");
    expect(seen.sort()).toEqual(["a:3r", "a:4r", "b:4r", "b:5r", "b:6r"]);
  });

  it("keeps a key an advance is adding events to while the compaction runs", async () => {
    const { seen, subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    await corq.append("a", [e(1), e(2)]);
    await drain(corq, "s");
    await age(raw);
    await corq.append("a", [e(3)]);
    const { id } = (await raw.query("SELECT id FROM corq.subscriptions WHERE name = 's'")).rows[0];
    const advance = await held(raw);
    try {
      await createExecutor(advance.client).run(advanceSubscription(id, 5000));
      expect(await compact(raw)).toEqual({ deleted: 0, busy: 1 });
      await advance.end();
    } finally {
      await advance.end("ROLLBACK");
    }
    expect(await compact(raw)).toEqual({ deleted: 0, busy: 0 }); // a is no longer idle
    seen.length = 0;
    await drain(corq, "s");
    expect(seen).toEqual(["a:3"]);
  });
});

describe("upgrading a populated database of the release before (0010)", () => {
  it("keeps every key at first (all count as active at the upgrade), then compacts only the idle one, whose seqs go on above", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const { seen, subscription } = recording({ maxAttempts: 5 });
    const corq = createCorq({ databaseUrl: database.url, subscriptions: [subscription] });
    try {
      const previous = migrationIndex("_stream_filter");
      await applyMigrations(client, previous + 1);
      for (const [stream, version] of [
        ["i", 0],
        ["a", 0],
        ["b", 0],
        ["c", 0],
        ["i", 1],
        ["d", 0],
        ["e", 0],
      ] as const) {
        await client.query("INSERT INTO corq.events (stream, version, name, data) VALUES ($1, $2, 'E', '{}')", [
          stream,
          version,
        ]);
      }
      // i: both events acked (idle), a: ready, b: leased for an hour, c: dead, d: paused with
      // nothing queued, e: replaying (acked, then rewound: seq 2 queued again)
      await client.query(`
        INSERT INTO corq.streams (stream, version, last_tx) SELECT stream, max(version), max(tx) FROM corq.events GROUP BY stream;
        INSERT INTO corq.subscriptions (name, kind, events, key, "from", batch_size, max_attempts, backoff_initial_ms,
            backoff_max_ms, backoff_factor, lease_ms, watermark_tx, watermark_position)
          SELECT 's', 'code', '{*}', 'stream', 'beginning', 100, 5, 0, 0, 1, 30000, tx, position
          FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1;
        INSERT INTO corq.queue (subscription_id, key, seq, tx, position, replay)
          SELECT 1, stream, CASE WHEN stream = 'e' THEN 2 ELSE 1 END, tx, position, stream = 'e'
          FROM corq.events WHERE stream IN ('a', 'b', 'c', 'e');
        INSERT INTO corq.keys (subscription_id, key, pending, attempts, available_at, lease_token, lease_until, dead_at,
            failed_position, paused_at, acked, seq, last_seq, replay_seq)
          VALUES (1, 'i', 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, 2, 2, 2, 0),
                 (1, 'a', 1, 0, now(), NULL, NULL, NULL, NULL, NULL, 0, 1, 0, 0),
                 (1, 'b', 1, 0, now() + interval '1 hour', gen_random_uuid(), now() + interval '1 hour', NULL, NULL, NULL, 0, 1, 0, 0),
                 (1, 'c', 1, 5, NULL, NULL, NULL, now(), (SELECT position FROM corq.events WHERE stream = 'c'), NULL, 0, 1, 0, 0),
                 (1, 'd', 0, 0, NULL, NULL, NULL, NULL, NULL, now(), 1, 1, 1, 0),
                 (1, 'e', 1, 0, now(), NULL, NULL, NULL, NULL, NULL, 1, 2, 1, 2);`);

      expect((await corq.migrate()).applied).toEqual(tagsFrom(previous + 1));
      const pool = client as unknown as Queryable;
      expect(await compact(pool)).toEqual({ deleted: 0, busy: 0 }); // every key was active at the upgrade
      await client.query("UPDATE corq.keys SET active_at = active_at - interval '2 hours'");
      expect(await compact(pool)).toEqual({ deleted: 1, busy: 0 });
      const left = await client.query("SELECT key FROM corq.keys ORDER BY key");
      expect(left.rows.map((r: { key: string }) => r.key)).toEqual(["a", "b", "c", "d", "e"]);
      await corq.append("i", [{ name: "E", data: {} }], { expectedVersion: 1 });
      await drain(corq, "s");
      expect(seen.sort()).toEqual(["a:1", "e:2r", "i:3"]); // b leased, c dead, d paused
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });
});

describe("housekeeping (what the cron and serve run)", () => {
  it("compacts keys idle past keyIdleMs (default 7 days) and prunes expired sessions, old webhook ids, batch records and idempotency keys", async () => {
    const { subscription } = recording();
    const { corq, raw } = await open({ subscriptions: [subscription] });
    for (const key of ["8-days", "6-days"]) await corq.append(key, [e(1)], { idempotencyKey: key });
    await drain(corq, "s");
    // idempotency keys answer for 24 hours by default
    await raw.query(`UPDATE corq.idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = '8-days'`);
    await raw.query(
      `UPDATE corq.keys SET active_at = now() - CASE key WHEN '8-days' THEN interval '8 days' ELSE interval '6 days' END`,
    );
    await raw.query(`
      INSERT INTO corq.dashboard_sessions (id, expires_at) VALUES ('expired', now() - interval '1 second'), ('live', now() + interval '1 hour');
      INSERT INTO corq.webhook_ids (id, seen_at) VALUES ('old', now() - interval '11 minutes'), ('recent', now() - interval '9 minutes');
      INSERT INTO corq.activity (subscription_id, key, started_at, finished_at, events, outcome)
        SELECT id, k, now() - ago, now() - ago, 1, 'acked' FROM corq.subscriptions,
          (VALUES ('old', interval '16 minutes'), ('recent', interval '14 minutes')) v(k, ago);`);
    const before = (await raw.query("SELECT count(*)::int AS n FROM corq.activity WHERE key NOT IN ('old', 'recent')"))
      .rows[0].n;
    expect(await corq.housekeeping()).toEqual({
      keys: 1,
      busySubscriptions: 0,
      activity: 1,
      sessions: 1,
      webhookIds: 1,
      idempotencyKeys: 1,
    });
    expect(await keyRows(raw)).toEqual(["6-days"]);
    expect((await raw.query("SELECT key FROM corq.idempotency_keys")).rows).toEqual([{ key: "6-days" }]);
    const left = async (table: string) =>
      (await raw.query(`SELECT id FROM corq.${table} ORDER BY id`)).rows.map((r: { id: string }) => r.id);
    expect(await left("dashboard_sessions")).toEqual(["live"]);
    expect(await left("webhook_ids")).toEqual(["recent"]);
    const activity = await raw.query("SELECT key FROM corq.activity WHERE key IN ('old', 'recent')");
    expect(activity.rows).toEqual([{ key: "recent" }]);
    expect(
      (await raw.query("SELECT count(*)::int AS n FROM corq.activity WHERE key NOT IN ('old', 'recent')")).rows[0].n,
    ).toBe(before);
  });

  it("deletes in chunks of 5,000 keys, at most maxChunks a pass; the rest the next pass", async () => {
    let statements = 0;
    const { corq, raw } = await open({
      subscriptions: [recording().subscription],
      keyIdleMs: HOUR,
      onStatement: () => void statements++,
    });
    const counted = async (pass: () => Promise<{ keys: number }>) => {
      statements = 0;
      const { keys } = await pass();
      return [statements, { keys }];
    };
    await corq.advance(); // the subscription's row
    await raw.query(`INSERT INTO corq.keys (subscription_id, key, seq, active_at)
      SELECT id, 'k' || i, i % 7, now() - interval '2 hours' FROM corq.subscriptions, generate_series(1, 12000) i`);
    // statements: one to prune, one per chunk (round trips: the Worker's cron counts them)
    expect(await counted(() => corq.housekeeping({ maxChunks: 2 }))).toEqual([3, { keys: 10_000 }]);
    expect(await counted(() => corq.housekeeping({ maxChunks: 2 }))).toEqual([2, { keys: 2000 }]);
    expect(await counted(() => corq.housekeeping())).toEqual([2, { keys: 0 }]);
    const { rows } = await raw.query("SELECT key_seq_floor::int AS floor FROM corq.subscriptions");
    expect(rows).toEqual([{ floor: 6 }]);
  });

  it("refuses a keyIdleMs that is not a positive integer", async () => {
    for (const keyIdleMs of [0, -1, 1.5, Number.NaN])
      expect(() => createCorq({ databaseUrl: "postgres://unused", keyIdleMs })).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
  });
});
