import { sql, type SQL } from "drizzle-orm";
import { webhookIds } from "../../db/schema.js";

/**
 * Records a webhook id; returns a row only when it was not seen in the last 10 minutes (a
 * replay returns none). Forgets ids older than that in the same statement.
 */
export function rememberWebhookId(id: string): SQL {
  return sql`
    WITH forgotten AS (DELETE FROM ${webhookIds} WHERE seen_at < now() - interval '10 minutes')
    INSERT INTO ${webhookIds} (id) VALUES (${id}) ON CONFLICT (id) DO NOTHING RETURNING id`;
}
