import { sql, type SQL } from "drizzle-orm";
import { dashboardSessions, tokens } from "../../db/schema.js";

/** Forgets the expired dashboard sessions. */
export const pruneDashboardSessions = sql`DELETE FROM ${dashboardSessions} WHERE expires_at < now()`;

/**
 * Records a new dashboard session valid for `ttlMs`, logged in with the scoped token `tokenId`
 * (null: the bootstrap admin token); forgets expired ones in the same statement (housekeeping
 * does too, when nobody logs in). No row when the token is gone (revoked since it was
 * checked): the login is refused.
 */
export function startDashboardSession(id: string, ttlMs: number, tokenId: string | null): SQL {
  return sql`
    WITH pruned AS (${pruneDashboardSessions})
    INSERT INTO ${dashboardSessions} (id, expires_at, token_id)
    SELECT ${id}, now() + ${ttlMs} * interval '1 millisecond', ${tokenId}::uuid
    WHERE ${tokenId}::uuid IS NULL OR EXISTS (SELECT 1 FROM ${tokens} WHERE id = ${tokenId}::uuid)
    RETURNING id`;
}

export interface SessionRow {
  token_id: string | null;
  scopes: string[] | null;
  stream_prefix: string | null;
}

/**
 * One row when the session exists and has not expired: the token it logged in with and that
 * token's scopes (a revoked token's sessions are gone with it, ON DELETE CASCADE).
 */
export function dashboardSession(id: string): SQL {
  return sql`
    SELECT s.token_id, t.scopes, t.stream_prefix
    FROM ${dashboardSessions} s LEFT JOIN ${tokens} t ON t.id = s.token_id
    WHERE s.id = ${id} AND s.expires_at > now() AND (s.token_id IS NULL OR t.id IS NOT NULL)`;
}

/** Logout: this session only. */
export function endDashboardSession(id: string): SQL {
  return sql`DELETE FROM ${dashboardSessions} WHERE id = ${id}`;
}
