import { sql, type SQL } from "drizzle-orm";
import { events } from "../../db/schema.js";
import { eventColumns } from "../common/eventColumns.js";

/**
 * The global log in the safe read order (docs/architecture.md, invariant 1): only events whose
 * transaction is below the xmin horizon (no transaction that could still commit an earlier
 * one is running), ordered by (tx, position). The cursor is a position; its tx is looked
 * up, so reading on after the last returned event never skips a late-committing one.
 */
export function readLog(afterPosition: number, limit: number): SQL {
  const cursor =
    afterPosition > 0
      ? sql`(e.tx, e.position) > ((SELECT tx FROM ${events} WHERE position = ${afterPosition}), ${afterPosition}::bigint)`
      : sql`true`;
  return sql`
    SELECT ${eventColumns} FROM ${events} e
    WHERE ${cursor} AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.tx, e.position
    LIMIT ${limit}`;
}

/** Whether an event exists at `position` (a readLog cursor must name a real event). */
export function eventExists(position: number): SQL {
  return sql`SELECT 1 AS found FROM ${events} WHERE position = ${position}`;
}
