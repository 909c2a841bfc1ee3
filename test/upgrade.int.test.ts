// A database at the previous release's schema (migrations 0000-0003), with queued, leased
// and dead keys, migrated by this code and then run by it: nothing lost, nothing reordered.
import { describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq, type StoredEvent } from "../src/index.js";
import { migrations } from "../src/db/migrations.js";
import { createTestDatabase } from "./helpers/database.js";

const PREVIOUS_RELEASE = "0003_dashboard_and_webhooks";

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
      for (const migration of migrations.slice(0, migrations.findIndex((m) => m.tag === PREVIOUS_RELEASE) + 1)) {
        for (const statement of migration.statements) await client.query(statement);
        await client.query("INSERT INTO corq.migrations (tag) VALUES ($1)", [migration.tag]);
      }
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
      const tokensMigration = migrations.findIndex((m) => m.tag.endsWith("_tokens"));
      expect(tokensMigration).toBeGreaterThan(0);
      for (const migration of migrations.slice(0, tokensMigration)) {
        for (const statement of migration.statements) await client.query(statement);
        await client.query("INSERT INTO corq.migrations (tag) VALUES ($1)", [migration.tag]);
      }
      // what the release before left: two live sessions, an expired one, and a queue in flight
      await client.query(`
        INSERT INTO corq.dashboard_sessions (id, expires_at) VALUES
          ('live-one', now() + interval '1 hour'), ('live-two', now() + interval '2 hours'),
          ('expired', now() - interval '1 hour');`);
      await corq.append("a", [{ name: "E", data: {} }]);

      expect((await corq.migrate()).applied).toEqual(migrations.slice(tokensMigration).map((m) => m.tag));
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
