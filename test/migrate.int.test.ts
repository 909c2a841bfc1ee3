import { describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq } from "../src/index.js";
import { createTestDatabase } from "./helpers/database.js";
import { migrations } from "../src/db/migrations.js";
import { present } from "./helpers/present.js";

describe("migrate", () => {
  it("applies every migration once, even when several processes migrate at once", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const instances = Array.from({ length: 4 }, () => createCorq({ databaseUrl: database.url }));
    try {
      const results = await Promise.all(instances.map((c) => c.migrate()));
      const applied = results.flatMap((r) => r.applied);
      expect(applied.sort()).toEqual(migrations.map((m) => m.tag).sort());
      expect((await present(instances[0], "the first instance").migrate()).applied).toEqual([]);
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      const { rows } = await client.query("SELECT tag FROM corq.migrations ORDER BY tag");
      await client.end();
      expect(rows.map((r) => r.tag)).toEqual(migrations.map((m) => m.tag));
    } finally {
      await Promise.all(instances.map((c) => c.close()));
      await database.drop();
    }
  });
});
