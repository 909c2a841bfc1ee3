// corq — correlated queues on a Postgres event log. Runs in Node and in Workers.
export { createCorq } from "./corq.js";
export { defineSubscription } from "./defineSubscription.js";
export { CorqError, type CorqErrorCode } from "./errors.js";
export type { Connection, Queryable } from "./db/executor.js";
export type { AppMigration } from "./db/appMigrations.js";
export type * from "./types.js";
export { toPrometheus, BATCH_DURATION_BUCKETS } from "./metrics.js";
export { TOKEN_SCOPES } from "./tokens.js";
