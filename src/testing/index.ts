// corqueue/testing — the test kit: handlers' events and context for unit tests (no database, no
// test framework: plain functions), and a run-until-idle driver for tests on a real database.
// docs/testing.md shows them in use.
export { deliveredEvent, deliveredEvents, TEST_EPOCH } from "./deliveredEvents.js";
export type { DeliveredEventsOptions, EventSpec } from "./deliveredEvents.js";
export { handlerContext } from "./handlerContext.js";
export type {
  HandlerContextOptions,
  RecordedAppend,
  RecordedStatement,
  StatementResults,
  TestHandlerContext,
} from "./handlerContext.js";
export { runUntilIdle } from "./runUntilIdle.js";
export type { HandledBatch, IdleReport, RunUntilIdleOptions } from "./runUntilIdle.js";
export { createTestDatabase } from "./createTestDatabase.js";
export type { TestDatabase } from "./createTestDatabase.js";
