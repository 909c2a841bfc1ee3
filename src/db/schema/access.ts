// Who may call: API tokens, dashboard sessions, and the webhook ids already acted on.
import { sql } from "drizzle-orm";
import { check, index, text, timestamp, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { corqSchema, createdAt } from "./corqSchema.js";

/**
 * Webhook ids already acted on (replay protection for the signed dead-letter webhook): an id is
 * kept for 10 minutes, twice the signature's timestamp window, so a captured request cannot be
 * replayed while its signature is still accepted.
 */
export const webhookIds = corqSchema.table("webhook_ids", {
  id: text("id").primaryKey(),
  seenAt: timestamp("seen_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * Dashboard logins, one row per session: logout deletes its row (ending that session only),
 * a login prunes the expired ones. The cookie holds the id and its MAC
 * (src/http/dashboard/session.ts); a cookie without its row is refused.
 */
export const dashboardSessions = corqSchema.table(
  "dashboard_sessions",
  {
    id: text("id").primaryKey(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    // the scoped token the session logged in with (its scopes are the session's); null: the
    // bootstrap admin token. Revoking the token deletes its sessions (ON DELETE CASCADE).
    tokenId: uuid("token_id").references(() => tokens.id, { onDelete: "cascade" }),
  },
  (t) => [index("dashboard_sessions_token_id_idx").on(t.tokenId)],
);

/**
 * Scoped API tokens (src/http/auth.ts). Only the SHA-256 of the secret is stored; a request's
 * token is found by that hash through the unique index (one indexed read; nothing compares the
 * secret itself). Revoking deletes the row. last_used_at is moved by the lookup itself, at most
 * once a minute per token (src/sql/operate/tokens.ts).
 */
export const tokens = corqSchema.table(
  "tokens",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    name: text("name").notNull(),
    scopes: text("scopes").array().notNull(),
    // appends only to streams whose name starts with it (null: any stream); reads are not limited
    streamPrefix: text("stream_prefix"),
    hash: text("hash").notNull(),
    createdAt: createdAt(),
    lastUsedAt: timestamp("last_used_at", { withTimezone: true }),
  },
  (t) => [
    uniqueIndex("tokens_hash_key").on(t.hash),
    check(
      "tokens_scopes_check",
      sql`cardinality(scopes) > 0 AND scopes <@ ARRAY['append', 'read', 'operate', 'admin']::text[]`,
    ),
  ],
);
