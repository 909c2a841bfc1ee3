// The Postgres schema `corq` that holds every table, and the column shapes the tables share
// (src/db/schema/*.ts, gathered by src/db/schema.ts); with it, the table of applied migrations.
import { customType, pgSchema, text, timestamp } from "drizzle-orm/pg-core";

export const corqSchema = pgSchema("corq");

/** 64-bit transaction id (Postgres 13+): the commit-safe ordering key of the log. */
export const xid8 = customType<{ data: string }>({ dataType: () => "xid8" });

export const createdAt = () => timestamp("created_at", { withTimezone: true }).notNull().defaultNow();

/** Applied migrations (our own runner: it takes an advisory lock, drizzle's does not). */
export const migrations = corqSchema.table("migrations", {
  tag: text("tag").primaryKey(),
  appliedAt: timestamp("applied_at", { withTimezone: true }).notNull().defaultNow(),
});
