// The log: its events, each stream's last version, and the answers of idempotent appends.
import { sql } from "drizzle-orm";
import { bigint, index, integer, jsonb, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";
import { corqSchema, createdAt, xid8 } from "./corqSchema.js";

/** The append-only log. Log order is (tx, position), never position alone (docs/architecture.md, invariant 1). */
export const events = corqSchema.table(
  "events",
  {
    position: bigint("position", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    stream: text("stream").notNull(),
    version: integer("version").notNull(),
    name: text("name").notNull(),
    data: jsonb("data").notNull(),
    meta: jsonb("meta").notNull().default({}),
    createdAt: createdAt(),
    tx: xid8("tx").notNull().default(sql`pg_current_xact_id()`),
    // Not delivered before this time (deliverAt / delayMs at the append); null: at once.
    deliverAt: timestamp("deliver_at", { withTimezone: true }),
    // The W3C trace context the event was appended under: its `send` span's traceparent (with a
    // tracer), or the append's own valid traceparent as given (without one), then a space and the
    // tracestate when there is one (src/tracing.ts). Null when the append had neither: it writes
    // nothing more.
    traceContext: text("trace_context"),
  },
  (t) => [
    uniqueIndex("events_stream_version_key").on(t.stream, t.version),
    index("events_tx_position_idx").on(t.tx, t.position),
  ],
);

/** One row per stream: its last version. The row lock serialises appends to one stream. */
export const streams = corqSchema.table("streams", {
  stream: text("stream").primaryKey(),
  version: integer("version").notNull(),
  // The transaction of the stream's last append. The log is read in (tx, position) order, so
  // an append from an OLDER transaction would sort before versions committed earlier: such an
  // append is refused (a retryable conflict) and within a stream log order is version order.
  lastTx: xid8("last_tx"),
  // The tombstone of an erasure (src/sql/log/eraseStream.ts): versions up to erased_through are
  // erased (or being erased: a call that was interrupted is finished by the next one); the row,
  // its version and last_tx stay, so expectedVersion keeps its meaning and appends continue.
  erasedThrough: integer("erased_through"),
  erasedEvents: bigint("erased_events", { mode: "number" }).notNull().default(0),
  erasedAt: timestamp("erased_at", { withTimezone: true }),
  // positions the last erasure round removed: the next round (or call) looks for queue rows of
  // them once more — an advance of a subscription created during that round may have queued them
  eraseSweep: bigint("erase_sweep", { mode: "number" }).array(),
});

/**
 * Idempotent appends (an append's `idempotencyKey`, the HTTP Idempotency-Key header): one row per
 * (stream, key) that wrote, committed with its events, holding what the append answered and a
 * fingerprint of what it was sent. Within the window the same key replays that answer; the
 * housekeeping prunes rows past it (created_at, by the index).
 */
export const idempotencyKeys = corqSchema.table(
  "idempotency_keys",
  {
    /** Whose key it is: only appends of the same scope (the same token) replay it or are refused by it. */
    scope: text("scope").notNull().default(""),
    stream: text("stream").notNull(),
    key: text("key").notNull(),
    /** SHA-256 (hex) of the events and expectedVersion as sent. */
    fingerprint: text("fingerprint").notNull(),
    version: integer("version").notNull(),
    /** The appended events' positions, in input order (a JSON array of numbers). */
    positions: jsonb("positions").notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ name: "idempotency_keys_pkey", columns: [t.stream, t.scope, t.key] }),
    index("idempotency_keys_created_at_idx").on(t.createdAt),
  ],
);
