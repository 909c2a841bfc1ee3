import { sql } from "drizzle-orm";
import type { StoredEvent } from "../../types.js";

// A time as a StoredEvent gives it (ISO 8601, UTC, milliseconds), formatted by the database:
// a consumer then parses no Date per event (it did twice: the driver's parse, then
// toISOString). MS truncates the microseconds, as Date did.
const isoTime = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The columns of an event as `toStoredEvent` reads them; `e` is the events alias. trace_context
 * (null when untraced) is for the claim's `process` span and what its batch passes on to a
 * handler or a push receiver (src/tracing.ts), never in a StoredEvent.
 */
export const eventColumns = sql.raw(
  `e.position, e.stream, e.version, e.name, e.data, e.meta, ${isoTime("e.created_at")} AS created_at, e.tx::text AS tx, ` +
    `${isoTime("e.deliver_at")} AS deliver_at, e.trace_context`,
);

/** The same columns, all null (a row of a UNION that carries no event: the claim's key rows). */
export const noEventColumns = sql.raw(
  "NULL::bigint AS position, NULL::text AS stream, NULL::int AS version, NULL::text AS name, NULL::jsonb AS data, " +
    "NULL::jsonb AS meta, NULL::text AS created_at, NULL::text AS tx, NULL::text AS deliver_at, NULL::text AS trace_context",
);

export interface EventRow {
  position: string | number;
  stream: string;
  version: number;
  name: string;
  data: unknown;
  meta: unknown;
  created_at: Date | string;
  tx: string;
  deliver_at: Date | string | null;
  trace_context?: string | null;
}

export function toStoredEvent(row: EventRow): StoredEvent {
  return {
    position: Number(row.position),
    stream: row.stream,
    version: row.version,
    name: row.name,
    data: row.data as StoredEvent["data"],
    meta: row.meta as StoredEvent["meta"],
    createdAt: iso(row.created_at),
    ...(row.deliver_at === null || row.deliver_at === undefined ? {} : { deliverAt: iso(row.deliver_at) }),
  };
}

/** eventColumns' times are ISO already; a statement that selects the column itself gets a Date (or the driver's text). */
const iso = (time: Date | string): string =>
  typeof time === "string" && time.endsWith("Z") ? time : new Date(time).toISOString();
