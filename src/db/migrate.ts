import { sql } from "drizzle-orm";
import type { Executor } from "./executor.js";
import { migrations } from "./migrations.js";
import { CorqError, present } from "../errors.js";

// Any fixed 64-bit number: the advisory lock that serialises concurrent migrate() calls (and
// the app's own migrations, appMigrations.ts).
export const MIGRATION_LOCK = 7_364_201_983;

/**
 * Applies the bundled drizzle migrations that are not applied yet, in one transaction under
 * an advisory lock: two processes migrating at once apply each migration exactly once (the
 * second waits, then finds nothing to do). drizzle's own migrator takes no lock.
 * Returns the tags applied by this call. Refuses (schema_too_new) a database that a newer corq
 * migrated: older code must not run against a schema it does not know.
 */
export async function migrate(executor: Executor): Promise<string[]> {
  return executor.transaction(async (tx) => {
    await tx.run(sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    const [row] = await tx.run<{ exists: boolean }>(sql`SELECT to_regclass('corq.migrations') IS NOT NULL AS exists`);
    const { exists } = present(row, "the migrations table check");
    const applied = new Set(
      exists ? (await tx.run<{ tag: string }>(sql`SELECT tag FROM corq.migrations`)).map((r) => r.tag) : [],
    );
    // a database migrated by a newer corq: this code would run against tables it does not know
    const known = new Set(migrations.map((m) => m.tag));
    // (an app's own migrations, `app:<name>`, are the app's business: appMigrations.ts)
    const unknown = [...applied].filter((tag) => !known.has(tag) && !tag.startsWith("app:")).sort();
    if (unknown.length > 0) {
      throw new CorqError(
        "schema_too_new",
        `the database has corq migrations this version does not know (${unknown.join(", ")}): deploy the newer corq, or restore the database`,
      );
    }
    const pending = migrations.filter((m) => !applied.has(m.tag));
    for (const migration of pending) {
      for (const statement of migration.statements) await tx.run(sql.raw(statement));
      await tx.run(sql`INSERT INTO corq.migrations (tag) VALUES (${migration.tag})`);
    }
    return pending.map((m) => m.tag);
  });
}
