import { sql, type SQL } from "drizzle-orm";
import { alertSends, alerts } from "../../db/schema.js";

/**
 * How far before the last pass a pass looks for dead keys: a failure's dead_at is the clock
 * read inside its statement, which commits a little later — a pass between the two would not
 * see the key, and the next one, looking only after itself, would miss it. A minute is far more
 * than any statement of corq's holds (DESIGN: about a second); a key seen twice is sent once
 * (the sends remember it: its subject and dead_at).
 */
export const DEAD_KEY_LOOKBACK_MS = 60_000;
// Done sends are kept this much longer than either rule needs them (a pass that started before
// the prune may still be looking back over them).
const PRUNE_MARGIN = sql`interval '1 hour'`;

export interface AlertPassRow {
  id: number;
  name: string;
  url: string;
  secret: string;
  conditions: string[];
  lag_over: string | null;
  held_over_ms: string | null;
  min_interval_ms: string;
  /** key.dead: keys that died after this (ISO). */
  dead_since: string;
  /** [type, subject] of the state conditions sent within the min interval: not sent again yet. */
  recent: [string, string][];
  /** A send waits for its (re)try now. */
  due: boolean;
}

/**
 * A pass begins: every alert, with when its last pass was (moved to now: the next pass looks
 * for dead keys from here, less the lookback), what it sent lately, and whether a send is due;
 * sends nothing needs any more are pruned. One statement; no alert, no row (and nothing else
 * to do).
 */
export function startAlertPass(): SQL {
  const interval = (a: SQL) => sql`${a}.min_interval_ms * interval '1 millisecond'`;
  return sql`
    WITH pruned AS (
      DELETE FROM ${alertSends} s USING ${alerts} a
      WHERE s.alert_id = a.id AND s.next_at IS NULL
        AND s.queued_at < least(a.checked_at - ${DEAD_KEY_LOOKBACK_MS} * interval '1 millisecond', now() - ${interval(sql`a`)}) - ${PRUNE_MARGIN}
    ),
    passed AS (
      -- "before" is the row as this statement's snapshot has it: the previous pass's time
      UPDATE ${alerts} a SET checked_at = now() FROM ${alerts} before
      WHERE before.id = a.id
      RETURNING a.id, a.name, a.url, a.secret, a.conditions, a.lag_over, a.held_over_ms, a.min_interval_ms,
        greatest(before.checked_at - ${DEAD_KEY_LOOKBACK_MS} * interval '1 millisecond', a.created_at) AS dead_since
    )
    SELECT p.id, p.name, p.url, p.secret, p.conditions, p.lag_over, p.held_over_ms, p.min_interval_ms,
      to_json(p.dead_since)#>>'{}' AS dead_since,
      (SELECT coalesce(jsonb_agg(jsonb_build_array(s.type, s.subject) ORDER BY s.type, s.subject), '[]') FROM ${alertSends} s
        WHERE s.alert_id = p.id AND s.type <> 'key.dead' AND s.queued_at > now() - ${interval(sql`p`)}) AS recent,
      EXISTS (SELECT FROM ${alertSends} s WHERE s.alert_id = p.id AND s.next_at <= now()) AS due
    FROM passed p
    ORDER BY p.name`;
}
