// An app's own migrations (createCorq / createWorker `migrations`): each applied once, in
// order, even when several processes (or Worker isolates) apply them at once; they never make
// corq think a newer corq migrated the database; a bad list is refused up front.
import { describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq, CorqError } from "../src/index.js";
import { createTestDatabase } from "./helpers/database.js";

const app = [
  { name: "rooms", statements: ["CREATE TABLE rooms (id text PRIMARY KEY)"] },
  // not idempotent on purpose: a second run would fail
  { name: "rooms-seed", statements: ["INSERT INTO rooms VALUES ('12')", "INSERT INTO rooms VALUES ('14')"] },
];

describe("app migrations", () => {
  it("apply once each, in order, when four processes migrate at once; a later one is applied alone", async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    const instances = Array.from({ length: 4 }, () => createCorq({ databaseUrl: database.url, migrations: app }));
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const results = await Promise.all(instances.map((c) => c.migrate()));
      expect(results.flatMap((r) => r.applied).sort()).toEqual(["app:rooms", "app:rooms-seed"]);
      expect((await client.query("SELECT id FROM rooms ORDER BY id")).rows).toEqual([{ id: "12" }, { id: "14" }]);

      const later = createCorq({
        databaseUrl: database.url,
        migrations: [...app, { name: "rooms-name", statements: ["ALTER TABLE rooms ADD COLUMN name text"] }],
      });
      expect((await later.migrate()).applied).toEqual(["app:rooms-name"]);
      await later.close();
      // corq's own check for a newer schema ignores the app's tags
      expect((await createCorq({ databaseUrl: database.url }).migrate()).applied).toEqual([]);
    } finally {
      await client.end();
      await Promise.all(instances.map((c) => c.close()));
      await database.drop();
    }
  });

  it("refuses duplicate or malformed names before touching the database", () => {
    const refused = (migrations: unknown) => {
      try {
        createCorq({ databaseUrl: "postgres://nowhere/none", migrations: migrations as never });
        return "accepted";
      } catch (error) {
        return error instanceof CorqError ? error.code : String(error);
      }
    };
    expect(refused([app[0], app[0]])).toBe("invalid_config");
    expect(refused([{ name: "has space", statements: [] }])).toBe("invalid_config");
    expect(refused([{ name: "ok", statements: [""] }])).toBe("invalid_config");
    expect(refused(app)).toBe("accepted");
  });
});
