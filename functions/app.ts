// The app this repository's Worker runs: the example (`npm start`'s demo). A Worker of your
// own passes its own subscriptions and migrations to createWorker (corqueue/worker) instead.
import { PgDialect } from "drizzle-orm/pg-core";
import type { SubscriptionDefinition } from "../src/index.js";
import type { WorkerApp } from "./createWorker.js";
import { exampleSchema, visitorSubscriptions } from "../example/visitors.js";

export const subscriptions: SubscriptionDefinition[] = visitorSubscriptions;

// The example's statements are idempotent and bring any earlier version of its tables up to
// date (example/schema.ts), so its one migration is named by their text: a change to them is
// a new migration, applied once, and runs them all again.
const dialect = new PgDialect();
const exampleText = exampleSchema.map((statement) => dialect.sqlToQuery(statement).sql).join(";\n");

export const app: WorkerApp = {
  subscriptions,
  migrations: [{ name: `example-${fnv1a(exampleText)}`, statements: exampleSchema }],
};

/** FNV-1a, 32 bits, hex: a short stable name for a text (not a security hash). */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, "0");
}
