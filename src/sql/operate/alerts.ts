import { sql, type SQL } from "drizzle-orm";
import { alertSends, alerts } from "../../db/schema.js";
import { WAKE_CHANNEL } from "../log/notify.js";
import type { StoredAlert } from "../../alertInput.js";
import type { AlertCondition, AlertInfo, AlertSend } from "../../types.js";

export interface AlertRow {
  name: string;
  url: string;
  conditions: string[];
  lag_over: string | null;
  held_over_ms: string | null;
  min_interval_ms: string;
  sent: string;
  failed: string;
  last_send: (Omit<AlertSend, "sentAt"> & { sentAt: string | null }) | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const iso = (at: Date | string) => new Date(at).toISOString();
const numberOrNull = (text: string | null) => (text === null ? null : Number(text));

// node-postgres returns bigint as text: thresholds and counters become numbers here; never the secret
export function toAlertInfo(row: AlertRow): AlertInfo {
  const last = row.last_send;
  return {
    name: row.name,
    url: row.url,
    on: row.conditions as AlertCondition[],
    lagOver: numberOrNull(row.lag_over),
    heldOverMs: numberOrNull(row.held_over_ms),
    minIntervalMs: Number(row.min_interval_ms),
    sent: Number(row.sent),
    failed: Number(row.failed),
    lastSend: last === null ? null : toAlertSend(last),
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

// in the documented order (jsonb keeps its keys in its own); sentAt is jsonb's rendering of a
// timestamptz (the session's time zone): as ISO here
function toAlertSend(last: NonNullable<AlertRow["last_send"]>): AlertSend {
  const { type, subscription, key, at, sentAt, attempts, error, retrying } = last;
  return {
    type,
    ...(subscription === undefined ? {} : { subscription }),
    ...(key === undefined ? {} : { key }),
    at,
    sentAt: sentAt === null ? null : iso(sentAt),
    attempts,
    error,
    retrying,
  };
}

const columns = sql`name, url, conditions, lag_over, held_over_ms, min_interval_ms, sent, failed, last_send, created_at, updated_at`;

/**
 * Creates or replaces an alert by name in one statement. A replace keeps the signing secret
 * unless a new one is given, and drops what it had queued or remembered for conditions it no
 * longer watches (a send still due for one would otherwise go out). It wakes `serve` processes
 * (NOTIFY "alerts"), whose alert passes run only while there are alerts.
 */
export function putAlert(name: string, alert: StoredAlert, secret: { given?: string; generated: string }): SQL {
  const conditions = sql.param(alert.conditions);
  return sql`
    WITH put AS (
      INSERT INTO ${alerts} AS a (name, url, secret, conditions, lag_over, held_over_ms, min_interval_ms)
      VALUES (${name}, ${alert.url}, ${secret.given ?? secret.generated}, ${conditions}::text[], ${alert.lagOver},
        ${alert.heldOverMs}, ${alert.minIntervalMs})
      ON CONFLICT (name) DO UPDATE SET
        url = excluded.url, secret = coalesce(${secret.given ?? null}::text, a.secret), conditions = excluded.conditions,
        lag_over = excluded.lag_over, held_over_ms = excluded.held_over_ms, min_interval_ms = excluded.min_interval_ms,
        updated_at = now()
      RETURNING a.id, ${columns}, (xmax = 0) AS created
    ),
    dropped AS (
      DELETE FROM ${alertSends} s USING put WHERE s.alert_id = put.id AND s.type <> ALL (${conditions}::text[])
    )
    SELECT ${columns}, created FROM put, LATERAL (SELECT pg_notify(${WAKE_CHANNEL}, 'alerts')) woke`;
}

/** Every alert, by name; never a secret. */
export function listAlerts(): SQL {
  return sql`SELECT ${columns} FROM ${alerts} ORDER BY name`;
}

/** Deletes an alert by name, with its sends (ON DELETE CASCADE): one still due is not sent. */
export function deleteAlert(name: string): SQL {
  return sql`DELETE FROM ${alerts} WHERE name = ${name} RETURNING id`;
}
