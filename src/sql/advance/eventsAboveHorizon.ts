import { sql, type SQL } from "drizzle-orm";
import { events } from "../../db/schema.js";

/**
 * Whether committed events wait above the xmin horizon: an advance cannot take them yet
 * (docs/design.md, invariant 1) because an older transaction — often not an append at all, a
 * claim or an ack — was still running. Nothing will NOTIFY when that one ends, so a woken
 * advancer that sees this tries again shortly. An index probe on events (tx, position).
 */
export function eventsAboveHorizon(): SQL {
  return sql`SELECT ${newestAboveHorizon} IS NOT NULL AS waiting`;
}

/**
 * The transaction of the newest committed event above the horizon (text), or null: for
 * statements that report it beside their own result. A backward probe of events (tx, position).
 */
export const newestAboveHorizon = sql`(
  SELECT tx::text FROM ${events} WHERE tx >= pg_snapshot_xmin(pg_current_snapshot()) ORDER BY tx DESC LIMIT 1
)`;

/**
 * Whether the horizon has passed transaction `tx` (every transaction up to it has ended): an
 * advance can then take the events it wrote. Newer appends do not hold this back.
 */
export function horizonPassed(tx: string): SQL {
  return sql`SELECT pg_snapshot_xmin(pg_current_snapshot()) > ${tx}::xid8 AS passed`;
}
