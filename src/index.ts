// corq — correlated queues on a Postgres event log. Runs in Node and in Workers.
export { createCorq } from "./corq.js";
export { createCells } from "./cells/createCells.js";
// drizzle's `sql` template, which `ctx.run` and `ctx.tx` take: from here, the app uses the same
// drizzle-orm copy as corq (a peer dependency), so an `SQL` it builds is the one corq expects.
export { sql, type SQL } from "drizzle-orm";
export { defineSubscription } from "./defineSubscription.js";
export { CorqError, type CorqErrorCode } from "./errors.js";
export type { Connection, Queryable } from "./db/executor.js";
export type { AppMigration } from "./db/appMigrations.js";
export type * from "./types.js";
export { toPrometheus, BATCH_DURATION_BUCKETS } from "./metrics.js";
export { TOKEN_SCOPES } from "./tokens.js";
