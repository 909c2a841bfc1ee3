import { sql, type SQL } from "drizzle-orm";
import { events, streams } from "../../db/schema.js";
import { eventColumns, type EventRow } from "../common/eventColumns.js";

/** A row of readStream: an event (null columns when there is none) and the stream's tombstone. */
export type StreamRow = { [K in keyof EventRow]: EventRow[K] | null } & {
  /** the stream's last version (null: no such stream) */
  stream_version: number | null;
  /** versions up to this one are erased (null: never erased) */
  erased_through: number | null;
};

/**
 * The events of one stream from `fromVersion`, in version order, with the stream's version and
 * tombstone on every row (one row with null event columns when there is no event to list).
 * Versions an erasure took are never listed, even while a call that was interrupted has left
 * some of them in the log (the next call removes them).
 */
export function readStream(stream: string, fromVersion: number, limit: number): SQL {
  return sql`
    SELECT ${eventColumns}, t.version AS stream_version, t.erased_through
    FROM (SELECT 1) one
    LEFT JOIN ${streams} t ON t.stream = ${stream}
    LEFT JOIN LATERAL (
      SELECT * FROM ${events} e
      WHERE e.stream = ${stream} AND e.version >= ${fromVersion} AND e.version > coalesce(t.erased_through, -1)
      ORDER BY e.version
      LIMIT ${limit}
    ) e ON true
    ORDER BY e.version`;
}
