import { sql, type SQL } from "drizzle-orm";
import { alertSends, alerts } from "../../db/schema.js";
import type { AlertPayload } from "../../types.js";

// An alert's send: recorded (the insert that wins the row is the one that sends: several
// processes or invocations send once), claimed with a lease by one sender, settled with the
// receiver's answer — sent, or retried with backoff, or given up.

/** Tries per send; after a failure the next comes 1 s, 4 s, 16 s, 64 s, 256 s later (~6 min in all). */
export const MAX_SEND_ATTEMPTS = 6;
const BACKOFF_FIRST_MS = 1000;
const BACKOFF_FACTOR = 4;

export interface AlertCandidate {
  alertId: number;
  type: AlertPayload["type"];
  subject: string;
  /** key.dead: the death (a new one may be sent once the min interval is over); null otherwise. */
  incident: string | null;
  payload: AlertPayload;
}

/**
 * Records what is to be sent, and moves back the dead-key cursor of alerts whose pass stopped at
 * its limit (`moveBack`: the next pass starts there). A candidate takes its row only when the
 * row's last send is older than the alert's min interval (and, for a dead key, was about another
 * death) and no sender holds it; otherwise nothing is sent — the rule "at most one per alert,
 * type and subject per minIntervalMs", kept by the database whoever evaluates.
 */
export function recordAlerts(candidates: AlertCandidate[], moveBack: { alertId: number; back: string }[]): SQL {
  const input = candidates.map((c) => ({
    alert_id: c.alertId,
    type: c.type,
    subject: c.subject,
    incident: c.incident,
    payload: c.payload,
  }));
  const moves = moveBack.map((m) => ({ alert_id: m.alertId, back: m.back }));
  return sql`
    WITH recorded AS (
      INSERT INTO ${alertSends} AS s (alert_id, type, subject, incident, message_id, payload, next_at)
      SELECT c.alert_id, c.type, c.subject, c.incident, 'msg_' || replace(gen_random_uuid()::text, '-', ''), c.payload, now()
      FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        AS c(alert_id int, type text, subject text, incident text, payload jsonb)
      JOIN ${alerts} a ON a.id = c.alert_id -- an alert deleted meanwhile sends nothing
      -- one lock order for passes that meet: no deadlock between their upserts
      ORDER BY c.alert_id, c.type, c.subject
      ON CONFLICT (alert_id, type, subject) DO UPDATE SET
        incident = excluded.incident, message_id = excluded.message_id, payload = excluded.payload,
        queued_at = now(), attempts = 0, next_at = now(), sending_until = NULL, sent_at = NULL, last_error = NULL
      WHERE s.queued_at <= now() - (SELECT a.min_interval_ms FROM ${alerts} a WHERE a.id = s.alert_id) * interval '1 millisecond'
        AND (excluded.incident IS NULL OR s.incident IS DISTINCT FROM excluded.incident)
        AND (s.sending_until IS NULL OR s.sending_until < now())
      RETURNING 1
    ),
    moved AS (
      UPDATE ${alerts} a SET checked_at = least(a.checked_at, m.back)
      FROM jsonb_to_recordset(${JSON.stringify(moves)}::jsonb) AS m(alert_id int, back timestamptz)
      WHERE a.id = m.alert_id
    )
    SELECT (SELECT count(*) FROM recorded)::int AS recorded`;
}

export interface ClaimedSendRow {
  alert_id: number;
  type: string;
  subject: string;
  message_id: string;
  payload: AlertPayload;
  attempts: number;
  url: string;
  secret: string;
}

/**
 * Up to `max` sends due now, oldest first, each leased to this sender for `leaseMs` (past it,
 * another pass takes the send over: a sender that died loses nothing) with its attempt counted.
 * SKIP LOCKED: concurrent passes take different sends.
 */
export function claimAlertSends(max: number, leaseMs: number): SQL {
  return sql`
    WITH due AS (
      SELECT alert_id, type, subject FROM ${alertSends}
      WHERE next_at <= now() AND (sending_until IS NULL OR sending_until < now())
      ORDER BY next_at
      LIMIT ${max}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${alertSends} s SET sending_until = now() + ${leaseMs} * interval '1 millisecond', attempts = s.attempts + 1
    FROM due, ${alerts} a
    WHERE (s.alert_id, s.type, s.subject) = (due.alert_id, due.type, due.subject) AND a.id = s.alert_id
    RETURNING s.alert_id, s.type, s.subject, s.message_id, s.payload, s.attempts, a.url, a.secret`;
}

export interface SendResult {
  alertId: number;
  type: string;
  subject: string;
  messageId: string;
  /** null: the receiver took it (2xx); else why not, in words of ours. */
  error: string | null;
}

export interface SettledRow {
  sent: number;
  retrying: number;
  failed: number;
}

/**
 * What the receivers answered: a send taken is done; a failed one is due again after its
 * backoff, or given up after MAX_SEND_ATTEMPTS. A row whose message id changed meanwhile (a new
 * send took it over after this lease ran out) is left alone. Each alert's counters and last send
 * (GET /alerts, the dashboard) are updated in the same statement.
 */
export function settleAlertSends(results: SendResult[]): SQL {
  const input = results.map((r) => ({
    alert_id: r.alertId,
    type: r.type,
    subject: r.subject,
    message_id: r.messageId,
    error: r.error,
  }));
  return sql`
    WITH r AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        AS r(alert_id int, type text, subject text, message_id text, error text)
    ),
    settled AS (
      UPDATE ${alertSends} s SET
        sending_until = NULL,
        sent_at = CASE WHEN r.error IS NULL THEN now() END,
        next_at = CASE WHEN r.error IS NULL OR s.attempts >= ${MAX_SEND_ATTEMPTS} THEN NULL
          ELSE now() + ${BACKOFF_FIRST_MS} * power(${BACKOFF_FACTOR}, s.attempts - 1) * interval '1 millisecond' END,
        last_error = r.error
      FROM r
      WHERE (s.alert_id, s.type, s.subject, s.message_id) = (r.alert_id, r.type, r.subject, r.message_id)
      RETURNING s.alert_id, s.type, s.payload, s.attempts, s.sent_at, s.last_error, s.next_at
    ),
    counted AS (
      SELECT alert_id,
        count(*) FILTER (WHERE last_error IS NULL) AS sent,
        count(*) FILTER (WHERE last_error IS NOT NULL AND next_at IS NULL) AS failed,
        (array_agg(
          jsonb_strip_nulls(jsonb_build_object('type', type, 'subscription', payload->'subscription', 'key', payload->'key'))
            || jsonb_build_object('at', payload->'at', 'sentAt', sent_at, 'attempts', attempts, 'error', last_error,
                 'retrying', next_at IS NOT NULL)
          ORDER BY payload->>'at' DESC))[1] AS last
      FROM settled
      GROUP BY alert_id
    ),
    summary AS (
      -- the newest condition seen stays the last send (a retry of an older one settles later)
      UPDATE ${alerts} a SET sent = a.sent + c.sent, failed = a.failed + c.failed,
        last_send = CASE WHEN a.last_send IS NULL OR a.last_send->>'at' <= c.last->>'at' THEN c.last ELSE a.last_send END
      FROM counted c WHERE a.id = c.alert_id
    )
    SELECT count(*) FILTER (WHERE last_error IS NULL)::int AS sent,
      count(*) FILTER (WHERE last_error IS NOT NULL AND next_at IS NOT NULL)::int AS retrying,
      count(*) FILTER (WHERE last_error IS NOT NULL AND next_at IS NULL)::int AS failed
    FROM settled`;
}
