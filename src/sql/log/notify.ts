import { sql, type SQL } from "drizzle-orm";

/**
 * The channel Node processes (`npm run serve`, src/node/) LISTEN on. A notification is a hint
 * to look now, never the work itself: one lost (a LISTEN connection that dropped) costs only
 * latency, the safety-net timer and the re-check after every reconnect find the work anyway.
 * Payloads: "append" (new events: advance, then consume), "ready" (keys became ready:
 * consume), "tokens" (a token was revoked: forget the verified ones, src/http/tokenCache.ts) and
 * "alerts" (an alert was put: its passes start, src/node/runner.ts). A listener ignores every
 * other payload, and "probe:<uuid>" (notifyProbe) is one of those for all but the listener that
 * sent it. Postgres folds identical notifications of one transaction into one.
 */
export const WAKE_CHANNEL = "corq_wake";

export type WakePayload = "append" | "ready" | "tokens" | "alerts";

/** Sends wake-ups in a statement (and so a transaction) of its own. */
export function notifyWake(...payloads: WakePayload[]): SQL {
  return sql`SELECT ${sql.join(
    payloads.map((payload) => sql`pg_notify(${WAKE_CHANNEL}, ${payload})`),
    sql`, `,
  )}`;
}

/** What a probe's payload starts with (src/node/wakeListener.ts): not a wake-up, every other listener ignores it. */
export const PROBE_PREFIX = "probe:";

/**
 * A listener's self-check: sent on another connection than the LISTEN's (through a
 * transaction-mode pooler the LISTEN's own NOTIFY may run on the server session that holds the
 * LISTEN and come back, while nothing sent elsewhere ever does).
 */
export function notifyProbe(token: string): SQL {
  return sql`SELECT pg_notify(${WAKE_CHANNEL}, ${PROBE_PREFIX + token})`;
}
