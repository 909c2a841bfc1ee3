import { sql, type SQL } from "drizzle-orm";
import { dashboardSessions } from "../db/schema.js";

/** Records a new dashboard session valid for `ttlMs`; forgets expired ones in the same statement. */
export function startDashboardSession(id: string, ttlMs: number): SQL {
  return sql`
    WITH pruned AS (DELETE FROM ${dashboardSessions} WHERE expires_at < now())
    INSERT INTO ${dashboardSessions} (id, expires_at) VALUES (${id}, now() + ${ttlMs} * interval '1 millisecond')`;
}

/** One row when the session exists and has not expired. */
export function dashboardSessionAlive(id: string): SQL {
  return sql`SELECT 1 AS alive FROM ${dashboardSessions} WHERE id = ${id} AND expires_at > now()`;
}

/** Logout: this session only. */
export function endDashboardSession(id: string): SQL {
  return sql`DELETE FROM ${dashboardSessions} WHERE id = ${id}`;
}
