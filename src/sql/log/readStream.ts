import { sql, type SQL } from "drizzle-orm";
import { events } from "../../db/schema.js";
import { eventColumns } from "../common/eventColumns.js";

/** The events of one stream from `fromVersion`, in version order. */
export function readStream(stream: string, fromVersion: number, limit: number): SQL {
  return sql`
    SELECT ${eventColumns} FROM ${events} e
    WHERE e.stream = ${stream} AND e.version >= ${fromVersion}
    ORDER BY e.version
    LIMIT ${limit}`;
}
