// The app's own schema (its projections' tables), beside corq's: named migrations applied in
// order, each once, recorded in corq.migrations as `app:<name>` — under the same advisory lock
// as corq's, so two processes (or two Worker isolates) migrating at once apply each exactly once.
// They need corq's schema first (`corq migrate`). corq's own schema name stays `corq`.
import { sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import { CorqError } from "../errors.js";
import type { Executor } from "./executor.js";
import { MIGRATION_LOCK } from "./migrate.js";

export interface AppMigration {
  /** Stable and unique: it is what records the migration as applied. Never rename one that ran. */
  name: string;
  /** Run in order, in one transaction with the others pending. */
  statements: (string | SQL)[];
}

/** Tags of app migrations in corq.migrations; migrate() ignores them when it checks for a newer corq. */
export const APP_TAG_PREFIX = "app:";

const appMigrations = z
  .array(
    z.object({
      name: z
        .string()
        .min(1)
        .max(200)
        .regex(/^[\w.-]+$/, "letters, digits, '_', '.', '-'"),
      statements: z.array(z.union([z.string().min(1), z.custom<SQL>((s) => typeof s === "object" && s !== null)])),
    }),
  )
  .refine((list) => new Set(list.map((m) => m.name)).size === list.length, "migration names must be unique");

export function parseAppMigrations(input: unknown): AppMigration[] {
  const parsed = appMigrations.safeParse(input);
  if (!parsed.success) {
    throw new CorqError("invalid_config", `invalid app migrations: ${parsed.error.issues[0]?.message}`, {
      details: parsed.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })),
    });
  }
  return parsed.data as AppMigration[];
}

/** The app migrations not applied yet: one statement, no transaction (what a Worker checks per isolate). */
export async function pendingAppMigrations(executor: Executor, migrations: AppMigration[]): Promise<AppMigration[]> {
  if (migrations.length === 0) return [];
  const rows = await executor.run<{ tag: string }>(
    sql`SELECT tag FROM corq.migrations WHERE tag LIKE ${`${APP_TAG_PREFIX}%`}`,
  );
  const applied = new Set(rows.map((r) => r.tag));
  return migrations.filter((m) => !applied.has(APP_TAG_PREFIX + m.name));
}

/** Applies the pending app migrations in one transaction; returns their tags (`app:<name>`). */
export async function applyAppMigrations(executor: Executor, migrations: AppMigration[]): Promise<string[]> {
  if ((await pendingAppMigrations(executor, migrations)).length === 0) return [];
  return executor.transaction(async (tx) => {
    await tx.run(sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    const pending = await pendingAppMigrations(tx, migrations); // again, under the lock
    for (const migration of pending) {
      for (const statement of migration.statements)
        await tx.run(typeof statement === "string" ? sql.raw(statement) : statement);
      await tx.run(sql`INSERT INTO corq.migrations (tag) VALUES (${APP_TAG_PREFIX + migration.name})`);
    }
    return pending.map((m) => APP_TAG_PREFIX + m.name);
  });
}
