import { sql } from "drizzle-orm";
import type { StoredEvent } from "../../types.js";

/**
 * The columns of an event as `toStoredEvent` reads them; `e` is the events alias. trace_context
 * (null when untraced) is for the claim's `process` span (src/tracing.ts), never in a StoredEvent.
 */
export const eventColumns = sql.raw(
  "e.position, e.stream, e.version, e.name, e.data, e.meta, e.created_at, e.tx::text AS tx, e.deliver_at, e.trace_context",
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
    createdAt: new Date(row.created_at).toISOString(),
    ...(row.deliver_at === null || row.deliver_at === undefined
      ? {}
      : { deliverAt: new Date(row.deliver_at).toISOString() }),
  };
}
