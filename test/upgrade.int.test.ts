// A database at the previous release's schema (migrations 0000-0003), with queued, leased
// and dead keys, migrated by this code and then run by it: nothing lost, nothing reordered.
import { describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq, type DeliveredEvent, type StoredEvent } from "../src/index.js";
import { migrations } from "../src/db/migrations.js";
import { createTestDatabase } from "./helpers/database.js";
import {
  applyMigrations,
  INTERLEAVED_LOG,
  insertEvents,
  migrationIndex,
  seedAdvancedSubscriptions,
  tagsFrom,
} from "./helpers/earlierRelease.js";

const PREVIOUS_RELEASE = "0003_dashboard_and_webhooks";
// the schema just before seq and rewind (0007_seq_rewind)
const BEFORE_SEQ = "0008_batch_durations";

describe("upgrading a populated database", () => {
  it("keeps every queued event, lease and dead letter, in order", async () => {
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
          handle: (events: StoredEvent[], ctx) => void handled.push(...events.map((e) => `${ctx.key}:${e.version}`)),
        },
      ],
    });
    try {
      await applyMigrations(client, migrations.findIndex((m) => m.tag === PREVIOUS_RELEASE) + 1);
      // what the previous release left behind: streams a (3 events), b (2), c (1), all advanced
      // into subscription s; key a ready, b leased for an hour, c dead (it had skipped 2 before)
      await client.query(`
        INSERT INTO corq.events (stream, version, name, data)
          SELECT stream, version, 'E', '{}' FROM (VALUES ('a', 0), ('a', 1), ('b', 0), ('a', 2), ('b', 1), ('c', 0)) v(stream, version);
        INSERT INTO corq.streams (stream, version) VALUES ('a', 2), ('b', 1), ('c', 0);
        INSERT INTO corq.subscriptions (name, kind, events, key, "from", batch_size, max_attempts, backoff_initial_ms,
            backoff_max_ms, backoff_factor, lease_ms, watermark_tx, watermark_position)
          SELECT 's', 'code', '{*}', 'stream', 'beginning', 100, 5, 0, 0, 1, 30000, tx, position
          FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1;
        INSERT INTO corq.queue (subscription_id, key, tx, position)
          SELECT 1, stream, tx, position FROM corq.events;
        INSERT INTO corq.keys (subscription_id, key, pending, attempts, available_at, lease_token, lease_until, dead_at, failed_position, skipped)
          VALUES (1, 'a', 3, 0, now(), NULL, NULL, NULL, NULL, 0),
                 (1, 'b', 2, 0, now() + interval '1 hour', gen_random_uuid(), now() + interval '1 hour', NULL, NULL, 0),
                 (1, 'c', 1, 5, NULL, NULL, NULL, now(), (SELECT position FROM corq.events WHERE stream = 'c'), 2);`);

      expect((await corq.migrate()).applied).toEqual(migrations.slice(4).map((m) => m.tag));
      // the stream remembers its last transaction: an append goes on from version 2
      expect(await corq.append("a", [{ name: "E", data: {} }], { expectedVersion: 2 })).toMatchObject({ version: 3 });
      await corq.advance();
      await corq.drain("s");
      expect(handled).toEqual(["a:0", "a:1", "a:2", "a:3"]); // b is leased, c is dead
      expect(await corq.subscription("s")).toMatchObject({
        pending: 3,
        skippedDeadLetters: 2,
        keys: { leased: 1, dead: 1 },
      });
      await client.query("UPDATE corq.keys SET lease_until = now(), available_at = now() WHERE key = 'b'"); // the old lease ends
      expect(await corq.releaseDeadLetters({ subscription: "s", key: "c" })).toEqual({ released: 1 });
      await corq.drain("s");
      expect(handled.slice(4).sort()).toEqual(["b:0", "b:1", "c:0"]);
      expect(handled.filter((h) => h.startsWith("b"))).toEqual(["b:0", "b:1"]);
      expect(await corq.subscription("s")).toMatchObject({ pending: 0, lag: 0 });
      // the batch-duration counters (GET /metrics) count on an upgraded database too
      const counted = await client.query(
        "SELECT sum(batches)::int AS n FROM corq.batch_durations WHERE outcome = 'acked'",
      );
      expect(counted.rows[0].n).toBeGreaterThan(0);
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });

  it("numbers what was queued before seqs existed: in log order, after what each key finished; leases and dead keys kept", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const handled: [string, number, number, boolean][] = []; // key, version, seq, replay
    const corq = createCorq({
      databaseUrl: database.url,
      subscriptions: [
        {
          name: "s",
          maxAttempts: 5,
          handle: (events: DeliveredEvent[], ctx) =>
            void handled.push(
              ...events.map((e) => [ctx.key, e.version, e.seq, e.replay] as [string, number, number, boolean]),
            ),
        },
      ],
    });
    try {
      await applyMigrations(client, migrations.findIndex((m) => m.tag === BEFORE_SEQ) + 1);
      // key a: a0 acked before, a1 … a3 queued (ready); b: two queued, leased for an hour; c: one
      // acked, two skipped dead letters, c3 queued and dead. Each append its own transaction.
      await insertEvents(client, [
        ["a", 0],
        ["b", 0],
        ["a", 1],
        ["c", 0],
        ["c", 1],
        ["c", 2],
        ["a", 2],
        ["b", 1],
        ["c", 3],
        ["a", 3],
      ]);
      await client.query(`
        INSERT INTO corq.streams (stream, version, last_tx)
          SELECT stream, max(version), max(tx) FROM corq.events GROUP BY stream;
        INSERT INTO corq.subscriptions (name, kind, events, key, "from", batch_size, max_attempts, backoff_initial_ms,
            backoff_max_ms, backoff_factor, lease_ms, watermark_tx, watermark_position)
          SELECT 's', 'code', '{*}', 'stream', 'beginning', 100, 5, 0, 0, 1, 30000, tx, position
          FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1;
        INSERT INTO corq.queue (subscription_id, key, tx, position)
          SELECT 1, stream, tx, position FROM corq.events
          WHERE NOT (stream = 'a' AND version = 0) AND NOT (stream = 'c' AND version < 3);
        INSERT INTO corq.keys (subscription_id, key, pending, attempts, available_at, lease_token, lease_until, dead_at,
            failed_position, acked, skipped, last_tx, last_position)
          SELECT 1, 'a', 3, 0, now(), NULL::uuid, NULL::timestamptz, NULL::timestamptz, NULL::bigint, 1, 0, tx, position
            FROM corq.events WHERE stream = 'a' AND version = 0
          UNION ALL SELECT 1, 'b', 2, 0, now() + interval '1 hour', gen_random_uuid(), now() + interval '1 hour', NULL, NULL, 0, 0, NULL, NULL
          UNION ALL SELECT 1, 'c', 1, 5, NULL, NULL, NULL, now(), position, 1, 2, NULL, NULL
            FROM corq.events WHERE stream = 'c' AND version = 3;`);

      expect((await corq.migrate()).applied).toEqual(
        migrations.slice(migrations.findIndex((m) => m.tag === BEFORE_SEQ) + 1).map((m) => m.tag),
      );
      const { rows } = await client.query("SELECT key, seq::int, position::int FROM corq.queue ORDER BY key, seq");
      const position = async (stream: string, version: number) =>
        (
          await client.query("SELECT position::int FROM corq.events WHERE stream = $1 AND version = $2", [
            stream,
            version,
          ])
        ).rows[0].position;
      expect(rows).toEqual([
        { key: "a", seq: 2, position: await position("a", 1) },
        { key: "a", seq: 3, position: await position("a", 2) },
        { key: "a", seq: 4, position: await position("a", 3) },
        { key: "b", seq: 1, position: await position("b", 0) },
        { key: "b", seq: 2, position: await position("b", 1) },
        { key: "c", seq: 4, position: await position("c", 3) },
      ]);
      expect(await corq.keys("s")).toMatchObject([
        { key: "a", status: "ready", seq: 4, pending: 3 },
        { key: "b", status: "leased", seq: 2, pending: 2 },
        { key: "c", status: "dead", seq: 4, pending: 1 },
      ]);
      await corq.append("a", [{ name: "E", data: {} }], { expectedVersion: 3 });
      await corq.advance();
      await corq.drain("s");
      expect(handled).toEqual([
        ["a", 1, 2, false],
        ["a", 2, 3, false],
        ["a", 3, 4, false],
        ["a", 4, 5, false],
      ]); // b is leased, c is dead
      await client.query("UPDATE corq.keys SET lease_until = now(), available_at = now() WHERE key = 'b'"); // the old lease ends
      expect(await corq.releaseDeadLetters({ subscription: "s", key: "c" })).toEqual({ released: 1 });
      await corq.drain("s");
      expect(handled.slice(4).sort()).toEqual([
        ["b", 0, 1, false],
        ["b", 1, 2, false],
        ["c", 3, 4, false],
      ]);
      // and a rewind numbers on from there
      expect(await corq.rewind("s", { to: "beginning", key: "c" })).toEqual({ requeued: 4 });
      await corq.drain("s");
      expect(handled.slice(7).map(([, version, seq, replay]) => [version, seq, replay])).toEqual([
        [0, 5, true],
        [1, 6, true],
        [2, 7, true],
        [3, 8, true],
      ]);
      expect(await corq.subscription("s")).toMatchObject({ pending: 0, lag: 0 });
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });

  it("stream filters: every subscription of the release before takes every stream; queued, leased, dead, paused and replaying keys go on in order", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const handled: string[] = []; // subscription key:version seq (r: replay)
    const record = (events: DeliveredEvent[], ctx: { subscription: string; key: string }) =>
      void handled.push(
        ...events.map((e) => `${ctx.subscription} ${ctx.key}:${e.version} ${e.seq}${e.replay ? "r" : ""}`),
      );
    const corq = createCorq({
      databaseUrl: database.url,
      subscriptions: [
        { name: "s", maxAttempts: 5, handle: record },
        // new after the upgrade: from the beginning, two of the five streams
        { name: "only-a-d", streams: ["a", "d"], handle: record },
      ],
    });
    try {
      const filterMigration = migrationIndex("_stream_filter");
      await applyMigrations(client, filterMigration);
      await insertEvents(client, INTERLEAVED_LOG);
      // what the release before left: a code subscription s and a push subscription p, both
      // advanced through the log; in s key a is ready, b leased for an hour, c dead, d paused,
      // e replaying (both its events acked, then rewound: queued again as seqs 3 and 4)
      await seedAdvancedSubscriptions(
        client,
        `(1, 'a', 3, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 3, 0, 0),
             (1, 'b', 2, 1, now() + interval '1 hour', gen_random_uuid(), now() + interval '1 hour', 'old', now(), NULL, NULL, NULL, 0, 2, 0, 0),
             (1, 'c', 1, 5, NULL, NULL, NULL, NULL, NULL, now(), (SELECT position FROM corq.events WHERE stream = 'c'), NULL, 0, 1, 0, 0),
             (1, 'd', 2, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, now(), 0, 2, 0, 0),
             (1, 'e', 2, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2, 4, 2, 4)`,
      );

      expect((await corq.migrate()).applied).toEqual(tagsFrom(filterMigration));
      expect(await corq.subscription("p")).toMatchObject({ kind: "push", streams: null, lag: 0 });
      expect(await corq.subscription("s")).toMatchObject({
        streams: null,
        pending: 10,
        keys: { ready: 2, leased: 1, dead: 1, paused: 1 },
      });
      await corq.append("a", [{ name: "E", data: {} }], { expectedVersion: 2 });
      await corq.append("z", [{ name: "E", data: {} }]);
      expect(await corq.advance()).toMatchObject({ s: 2, "only-a-d": 6 });
      await corq.drain("s");
      await corq.drain("only-a-d");
      const of = (subscription: string, key: string) =>
        handled.filter((h) => h.startsWith(`${subscription} ${key}:`)).map((h) => h.split(" ").slice(1).join(" "));
      // a: in order, numbered on from its counter; e: its replay; z: new; b leased, c dead, d paused
      expect(of("s", "a")).toEqual(["a:0 1", "a:1 2", "a:2 3", "a:3 4"]);
      expect(of("s", "e")).toEqual(["e:0 3r", "e:1 4r"]);
      expect(of("s", "z")).toEqual(["z:0 1"]);
      expect(handled.filter((h) => /^s [bcd]:/.test(h))).toEqual([]);
      expect(of("only-a-d", "a")).toEqual(["a:0 1", "a:1 2", "a:2 3", "a:3 4"]);
      expect(of("only-a-d", "d")).toEqual(["d:0 1", "d:1 2"]);
      expect(handled.filter((h) => h.startsWith("only-a-d "))).toHaveLength(6);

      await client.query("UPDATE corq.keys SET lease_until = now(), available_at = now() WHERE key = 'b'"); // the old lease ends
      expect(await corq.releaseDeadLetters({ subscription: "s", key: "c" })).toEqual({ released: 1 });
      await corq.resumeKey("s", "d");
      await corq.drain("s");
      expect(of("s", "b")).toEqual(["b:0 1", "b:1 2"]);
      expect(of("s", "c")).toEqual(["c:0 1"]);
      expect(of("s", "d")).toEqual(["d:0 1", "d:1 2"]);
      expect(await corq.subscription("s")).toMatchObject({ pending: 0, lag: 0 });
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });

  it("tokens: dashboard sessions of the release before stay valid (as bootstrap-admin sessions); tokens work", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const corq = createCorq({ databaseUrl: database.url, subscriptions: [{ name: "s", handle: () => undefined }] });
    try {
      const tokensMigration = migrationIndex("_tokens");
      await applyMigrations(client, tokensMigration);
      // what the release before left: two live sessions, an expired one, and a queue in flight
      await client.query(`
        INSERT INTO corq.dashboard_sessions (id, expires_at) VALUES
          ('live-one', now() + interval '1 hour'), ('live-two', now() + interval '2 hours'),
          ('expired', now() - interval '1 hour');`);
      // an event the release before appended (its columns: this code's append writes newer ones)
      await client.query(`
        INSERT INTO corq.streams (stream, version, last_tx) VALUES ('a', 0, pg_current_xact_id());
        INSERT INTO corq.events (stream, version, name, data) VALUES ('a', 0, 'E', '{}');`);

      expect((await corq.migrate()).applied).toEqual(tagsFrom(tokensMigration));
      const sessions = await client.query(
        "SELECT id, token_id FROM corq.dashboard_sessions WHERE expires_at > now() ORDER BY id",
      );
      expect(sessions.rows).toEqual([
        { id: "live-one", token_id: null },
        { id: "live-two", token_id: null },
      ]);
      const { token, id } = await corq.createToken({ name: "after the upgrade", scopes: ["read"] });
      expect(await corq.verifyToken(token)).toMatchObject({ id, scopes: ["read"] });
      // a session of that token goes with it
      await client.query(
        "INSERT INTO corq.dashboard_sessions (id, expires_at, token_id) VALUES ('t', now() + interval '1 hour', $1)",
        [id],
      );
      await corq.revokeToken(id);
      expect((await client.query("SELECT id FROM corq.dashboard_sessions ORDER BY id")).rows.map((r) => r.id)).toEqual([
        "expired",
        "live-one",
        "live-two",
      ]);
      await corq.advance();
      expect((await corq.drain("s")).events).toBe(1);
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });

  it("refuses to run the migrations of a database a newer corq migrated", async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    const corq = createCorq({ databaseUrl: database.url });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      await client.query("INSERT INTO corq.migrations (tag) VALUES ('9999_from_the_future')");
      await expect(corq.migrate()).rejects.toMatchObject({
        code: "schema_too_new",
        message: expect.stringContaining("9999_from_the_future"),
      });
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });

  it("uses a corq schema that a DBA created first", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const corq = createCorq({ databaseUrl: database.url });
    try {
      await client.query("CREATE SCHEMA corq");
      expect((await corq.migrate()).applied).toHaveLength(migrations.length);
    } finally {
      await corq.close();
      await client.end();
      await database.drop();
    }
  });
});
