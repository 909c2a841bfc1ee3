// The whole corq schema, in its own Postgres schema `corq`. drizzle-kit generates
// the migrations in drizzle/ from this file; what drizzle cannot express (storage
// settings) lives in custom migrations there. The tables are defined by topic in
// src/db/schema/; this module gathers them, so drizzle-kit and every import read one place.
export { corqSchema, migrations } from "./schema/corqSchema.js";
export * from "./schema/log.js";
export * from "./schema/subscriptions.js";
export * from "./schema/queue.js";
export * from "./schema/activity.js";
export * from "./schema/access.js";
export * from "./schema/retention.js";
export * from "./schema/alerts.js";
export * from "./schema/cells.js";
