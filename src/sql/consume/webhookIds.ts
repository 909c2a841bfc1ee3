import { sql, type SQL } from "drizzle-orm";
import { webhookIds } from "../../db/schema.js";

/** Forgets the webhook ids older than their window (10 minutes, twice the signature's). */
export const forgetWebhookIds = sql`DELETE FROM ${webhookIds} WHERE seen_at < now() - interval '10 minutes'`;

/**
 * Records a webhook id; returns a row only when it was not seen in the last 10 minutes (a
 * replay returns none). Forgets ids older than that in the same statement (housekeeping does
 * too, when no webhook comes).
 */
export function rememberWebhookId(id: string): SQL {
  return sql`
    WITH forgotten AS (${forgetWebhookIds})
    INSERT INTO ${webhookIds} (id) VALUES (${id}) ON CONFLICT (id) DO NOTHING RETURNING id`;
}
