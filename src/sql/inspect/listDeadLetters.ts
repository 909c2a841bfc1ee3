import { sql, type SQL } from "drizzle-orm";
import { events, keys, subscriptions } from "../../db/schema.js";
import { present } from "../../errors.js";
import type { DeadLetter } from "../../types.js";

/** Dead keys, newest first, with the position of the event that failed (and the event itself). */
export function listDeadLetters(subscription: string | undefined, limit: number, withEvent = false): SQL {
  return sql`
    SELECT s.name AS subscription, k.key, k.failed_position, k.attempts, k.last_error, k.dead_at
      ${withEvent ? sql`, e.stream, e.name, e.data` : sql``}
    FROM ${keys} k JOIN ${subscriptions} s ON s.id = k.subscription_id
      ${withEvent ? sql`LEFT JOIN ${events} e ON e.position = k.failed_position` : sql``}
    WHERE k.dead_at IS NOT NULL ${subscription === undefined ? sql`` : sql`AND s.name = ${subscription}`}
    ORDER BY k.dead_at DESC, s.name, k.key
    LIMIT ${limit}`;
}

export interface DeadLetterRow {
  subscription: string;
  key: string;
  failed_position: string | null;
  attempts: number;
  last_error: string | null;
  dead_at: Date;
  // with the event (listDeadLetters withEvent)
  stream?: string | null;
  name?: string | null;
  data?: unknown;
}

export function toDeadLetter(row: DeadLetterRow, withEvent: boolean): DeadLetter {
  return {
    subscription: row.subscription,
    key: row.key,
    position: row.failed_position === null ? null : Number(row.failed_position),
    attempts: row.attempts,
    lastError: row.last_error,
    deadAt: new Date(row.dead_at).toISOString(),
    ...(withEvent
      ? { event: row.name == null ? null : { stream: present(row.stream, "stream"), name: row.name, data: row.data } }
      : {}),
  };
}
