// What an alerts pass would send, from the rows of its condition statements
// (src/sql/alerts/alertConditions.ts, the doctor's heldHorizons): one candidate per alert,
// condition and subject, with the payload the receiver gets. Nothing here reads the database;
// whether a candidate is sent is the database's call (recordAlerts: the min interval).
import { formatDuration } from "./doctor.js";
import type { DeadKeyRow, SubscriptionConditionRow } from "./sql/alerts/alertConditions.js";
import type { AlertCandidate } from "./sql/alerts/alertSends.js";
import type { AlertPassRow } from "./sql/alerts/startAlertPass.js";
import type { HeldHorizonRow } from "./sql/inspect/doctor.js";
import type { AlertCondition } from "./types.js";

/** An alert as a pass evaluates it. */
export interface WatchingAlert {
  id: number;
  watches: ReadonlySet<AlertCondition>;
  lagOver: number | null;
  heldOverMs: number | null;
  minIntervalMs: number;
  /** key.dead: keys that died after this (the database's text, to the microsecond). */
  deadSince: string;
  /** `${type} ${subject}` of the state conditions sent within the min interval. */
  recent: ReadonlySet<string>;
}

export function watchingAlert(row: AlertPassRow): WatchingAlert {
  return {
    id: row.id,
    watches: new Set(row.conditions as AlertCondition[]),
    lagOver: row.lag_over === null ? null : Number(row.lag_over),
    heldOverMs: row.held_over_ms === null ? null : Number(row.held_over_ms),
    minIntervalMs: Number(row.min_interval_ms),
    deadSince: row.dead_since,
    recent: new Set(row.recent.map(([type, subject]) => `${type} ${subject}`)),
  };
}

const iso = (at: Date | string) => new Date(at).toISOString();

/** A dead key is one candidate per alert that watches it (the statement asked per alert). */
export function deadKeyCandidates(rows: DeadKeyRow[]): AlertCandidate[] {
  return rows.map((row) => ({
    alertId: row.alert_id,
    type: "key.dead",
    subject: row.subject,
    incident: row.incident,
    payload: {
      type: "key.dead",
      subscription: row.subscription,
      key: row.key,
      ...(row.position === null ? {} : { position: Number(row.position) }),
      ...(row.error === null ? {} : { error: row.error }),
      at: iso(row.dead_at),
    },
  }));
}

/**
 * Where an alert's next pass starts looking for dead keys when this one stopped at `limit` keys
 * of a subscription: at the last key it took (later ones are left for that pass; the ones taken
 * are not taken again: they are recorded). Read as a JS Date, a millisecond early at most: safe.
 */
export function deadKeyCursors(rows: DeadKeyRow[], limit: number): { alertId: number; back: string }[] {
  const groups = new Map<string, { alertId: number; count: number; last: Date }>();
  for (const row of rows) {
    const name = `${row.alert_id} ${row.subscription}`;
    const at = new Date(row.dead_at);
    const group = groups.get(name) ?? { alertId: row.alert_id, count: 0, last: at };
    group.count++;
    if (at > group.last) group.last = at;
    groups.set(name, group);
  }
  const back = new Map<number, Date>();
  for (const { alertId, count, last } of groups.values()) {
    const earliest = back.get(alertId);
    if (count >= limit && (earliest === undefined || last < earliest)) back.set(alertId, last);
  }
  return [...back].map(([alertId, at]) => ({ alertId, back: at.toISOString() }));
}

/** The subject of a condition about a subscription as a whole. */
const subscriptionSubject = (name: string) => JSON.stringify([name]);

/**
 * Subscriptions over a watching alert's lagOver whose lag was counted only up to the cap (not
 * sent about lately): their whole lag is counted for the payload (subscriptionLag).
 */
export function lagToCount(alerts: WatchingAlert[], rows: SubscriptionConditionRow[], cap: number): string[] {
  return rows
    .filter((row) => row.lag !== null && Number(row.lag) >= cap)
    .filter((row) =>
      alerts.some(
        (a) =>
          a.watches.has("subscription.lag") &&
          !a.recent.has(`subscription.lag ${subscriptionSubject(row.name)}`) &&
          Number(row.lag) > (a.lagOver ?? Number.POSITIVE_INFINITY),
      ),
    )
    .map((row) => row.name);
}

/** advance.failed and subscription.lag, per watching alert, leaving out what it sent lately. */
export function subscriptionCandidates(
  alerts: WatchingAlert[],
  rows: SubscriptionConditionRow[],
  options: { wholeLag: ReadonlyMap<string, number>; now: Date },
): AlertCandidate[] {
  const candidates: AlertCandidate[] = [];
  for (const alert of alerts) {
    for (const row of rows) {
      const subject = subscriptionSubject(row.name);
      const fresh = (type: AlertCondition) => alert.watches.has(type) && !alert.recent.has(`${type} ${subject}`);
      if (fresh("advance.failed") && row.advance_error !== null) {
        candidates.push({
          alertId: alert.id,
          type: "advance.failed",
          subject,
          incident: null,
          payload: {
            type: "advance.failed",
            subscription: row.name,
            error: row.advance_error,
            at: iso(row.advance_error_at ?? options.now),
          },
        });
      }
      const counted = row.lag === null ? null : Number(row.lag);
      if (fresh("subscription.lag") && counted !== null && alert.lagOver !== null && counted > alert.lagOver) {
        candidates.push({
          alertId: alert.id,
          type: "subscription.lag",
          subject,
          incident: null,
          payload: {
            type: "subscription.lag",
            subscription: row.name,
            lag: options.wholeLag.get(row.name) ?? counted,
            at: options.now.toISOString(),
          },
        });
      }
    }
  }
  return candidates;
}

/**
 * horizon.held: what holds the advance (a transaction with a transaction id, a prepared
 * transaction) longer than a watching alert's heldOverMs. A snapshot alone holds vacuum, not
 * the advance, and a slot no transaction: those are the doctor's to name, not an alert's.
 * The receiver is told the pid, state, age and database, never the session's query text (the
 * statement leaves it out, heldHorizons { query: false }): that session may be another
 * application's, in another database, with a secret in its SQL (issue 47). `corq doctor`
 * (admin) names it in full.
 */
export function horizonCandidates(
  alerts: WatchingAlert[],
  rows: HeldHorizonRow[],
  options: { now: Date },
): AlertCandidate[] {
  const held = rows.filter((row) => row.holder !== "hidden" && row.holds_advance && row.age_ms !== null);
  const candidates: AlertCandidate[] = [];
  for (const alert of alerts) {
    if (!alert.watches.has("horizon.held") || alert.heldOverMs === null) continue;
    for (const row of held) {
      const ageMs = Math.max(0, Number(row.age_ms));
      if (ageMs <= alert.heldOverMs) continue;
      const subject = JSON.stringify([row.holder, row.pid ?? row.name]);
      if (alert.recent.has(`horizon.held ${subject}`)) continue;
      candidates.push({
        alertId: alert.id,
        type: "horizon.held",
        subject,
        incident: null,
        payload: { type: "horizon.held", error: heldHorizonText(row, ageMs), at: options.now.toISOString() },
      });
    }
  }
  return candidates;
}

/** A held horizon in an alert's words: who (pid or a prepared transaction), its state, database, how long. */
function heldHorizonText(row: HeldHorizonRow, ageMs: number): string {
  const database = row.database === null ? [] : [`database ${row.database}`];
  const doctor = "corq doctor names it in full, with what to do.";
  if (row.holder === "prepared transaction") {
    return (
      `A prepared transaction${row.database === null ? "" : ` in database ${row.database}`} has waited ` +
      `${formatDuration(ageMs)} for ` +
      "COMMIT PREPARED or ROLLBACK PREPARED. It keeps its transaction id until then, so it holds the xmin horizon: " +
      `no advance moves past the events committed since it was prepared. ${doctor}`
    );
  }
  return (
    `pid ${row.pid} (${[row.state ?? "state unknown", ...database].join(", ")}) has held a transaction open for ` +
    `${formatDuration(ageMs)}. It has a transaction id, so it holds the xmin horizon: no advance moves any ` +
    `subscription past the events committed since it began until it ends. ${doctor}`
  );
}
