import { sql, type SQL } from "drizzle-orm";
import { events } from "../../db/schema.js";

/**
 * Whether committed events wait above the xmin horizon: an advance cannot take them yet
 * (docs/design.md, invariant 1) because an older transaction — often not an append at all, a
 * claim or an ack — was still running. Nothing will NOTIFY when that one ends, so a woken
 * advancer that sees this tries again shortly. An index probe on events (tx, position).
 */
export function eventsAboveHorizon(): SQL {
  return sql`SELECT ${waitingAboveHorizon} AS waiting`;
}

/** The condition itself, for statements that report it beside their own result. */
export const waitingAboveHorizon = sql`EXISTS (
  SELECT 1 FROM ${events} WHERE tx >= pg_snapshot_xmin(pg_current_snapshot())
)`;
