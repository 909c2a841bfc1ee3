import { sql, type SQL } from "drizzle-orm";
import { tokens } from "../../db/schema.js";
import type { TokenInfo, TokenScope } from "../../types.js";

/** How often a token's last_used_at may move: the lookup writes at most once a minute per token. */
export const LAST_USED_RESOLUTION_S = 60;

export interface TokenRow {
  id: string;
  name: string;
  scopes: string[];
  stream_prefix: string | null;
  created_at: Date | string;
  last_used_at: Date | string | null;
}

export function toTokenInfo(row: TokenRow): TokenInfo {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes as TokenScope[],
    streamPrefix: row.stream_prefix,
    createdAt: new Date(row.created_at).toISOString(),
    lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at).toISOString(),
  };
}

const columns = sql`id, name, scopes, stream_prefix, created_at, last_used_at`;

/** A new token; only the hash of its secret is stored. */
export function insertToken(token: { name: string; scopes: string[]; streamPrefix: string | null; hash: string }): SQL {
  return sql`
    INSERT INTO ${tokens} (name, scopes, stream_prefix, hash)
    VALUES (${token.name}, ${sql.param(token.scopes)}::text[], ${token.streamPrefix}, ${token.hash})
    RETURNING ${columns}`;
}

/** Every token, oldest first; never the hash. */
export function listTokens(): SQL {
  return sql`SELECT ${columns} FROM ${tokens} ORDER BY created_at, id`;
}

/** Revocation: the row goes, and its dashboard sessions with it (ON DELETE CASCADE). */
export function deleteToken(id: string): SQL {
  return sql`DELETE FROM ${tokens} WHERE id = ${id}::uuid RETURNING id`;
}

/**
 * The token whose secret hashes to `hash`: one read through the unique index. The same
 * statement moves last_used_at, but only when it is older than LAST_USED_RESOLUTION_S — so an
 * authenticated request is one read, and a write at most once a minute per token. (Two requests
 * at the turn of the minute: the second waits for the first's row lock, re-checks the condition
 * on the updated row and writes nothing.) The row returned is the one read, before the update.
 */
export function verifyToken(hash: string): SQL {
  return sql`
    WITH found AS (
      SELECT ${columns} FROM ${tokens} WHERE hash = ${hash}
    ), touched AS (
      UPDATE ${tokens} AS t SET last_used_at = now()
      FROM found
      WHERE t.id = found.id
        AND (t.last_used_at IS NULL OR t.last_used_at < now() - ${LAST_USED_RESOLUTION_S} * interval '1 second')
    )
    SELECT ${columns} FROM found`;
}
