// Alerts: their definitions (put, listed, deleted) and the pass that sends them — run by the
// Worker's cron (POST /alerts/check in an invocation of its own) and by `serve`'s loop every
// second, or by whoever calls checkAlerts.
import { z } from "zod";
import { alertName, parseAlert } from "../alertInput.js";
import {
  deadKeyCandidates,
  deadKeyCursors,
  horizonCandidates,
  lagToCount,
  subscriptionCandidates,
  watchingAlert,
} from "../alertCandidates.js";
import { ALERT_TIMEOUT_MS, sendAlert } from "../alertDelivery.js";
import { parseOrThrow } from "../config.js";
import { CorqError, present } from "../errors.js";
import type { PushTransport } from "../pushTransport.js";
import {
  deadKeysSince,
  subscriptionConditions,
  subscriptionLag,
  type DeadKeyRow,
  type SubscriptionConditionRow,
} from "../sql/alerts/alertConditions.js";
import {
  claimAlertSends,
  recordAlerts,
  settleAlertSends,
  type AlertCandidate,
  type ClaimedSendRow,
  type SendResult,
  type SettledRow,
} from "../sql/alerts/alertSends.js";
import { startAlertPass, type AlertPassRow } from "../sql/alerts/startAlertPass.js";
import { heldHorizons, type HeldHorizonRow } from "../sql/inspect/doctor.js";
import { deleteAlert, listAlerts, putAlert, toAlertInfo, type AlertRow } from "../sql/operate/alerts.js";
import type { AlertCheck, AlertCondition, Corq } from "../types.js";
import { newSigningSecret } from "../webhookSignature.js";
import type { PartDeps } from "./options.js";

// Dead keys a pass takes per alert and subscription; more are taken by the passes after it (a
// pass records each one it takes, and the next looks on from the last).
const DEAD_KEYS_PER_PASS = 500;
// Sends a receiver may have in flight from one pass: a slow receiver holds at most this many
// of them for its timeout, never the pass's other sends beyond that.
const SENDS_AT_ONCE = 8;
// a sender's lease on a send outlives its timeout: another pass takes it over only after that
const SEND_LEASE_MS = ALERT_TIMEOUT_MS + 5000;

const checkOptions = z.object({
  maxSends: z.number().int().min(1).max(1000).default(100),
  stop: z.instanceof(AbortSignal).optional(),
});

export type AlertsPart = Pick<Corq, "putAlert" | "alerts" | "deleteAlert" | "checkAlerts">;

export function createAlerts({
  executor,
  settings: { pushAllowPrivate },
  transport,
}: PartDeps & { transport: PushTransport }): AlertsPart {
  return {
    async putAlert(name, input) {
      parseOrThrow(alertName, name, "invalid_input", "name");
      const alert = parseAlert(input, { allowPrivate: pushAllowPrivate });
      const generated = newSigningSecret();
      const [row] = await (await executor()).run<AlertRow & { created: boolean }>(
        putAlert(name, alert, { given: alert.secret, generated }),
      );
      const put = present(row, "the alert row");
      const info = toAlertInfo(put);
      return put.created
        ? { created: true, alert: info, secret: alert.secret ?? generated }
        : { created: false, alert: info };
    },

    async alerts() {
      return (await (await executor()).run<AlertRow>(listAlerts())).map(toAlertInfo);
    },

    async deleteAlert(name) {
      parseOrThrow(alertName, name, "invalid_input", "name");
      const rows = await (await executor()).run(deleteAlert(name));
      if (rows.length === 0) throw new CorqError("unknown_alert", `no alert named "${name}"`);
    },

    /**
     * One pass (docs/operations.md, "Alerts"):
     *   start     every alert, its last pass, what it sent lately (1 statement; no alert: done)
     *   look      the conditions its alerts watch: dead keys since the last pass, subscriptions'
     *             advance errors and lag, what holds the xmin horizon (1 statement each, only
     *             for conditions some alert watches; and one more to count a large lag whole)
     *   record    what is new, kept to one send per alert, type and subject per min interval
     *   send      the sends due (new ones, retries), leased to this pass, SENDS_AT_ONCE at a
     *             time, each within ALERT_TIMEOUT_MS; then their outcomes in one statement
     * Nothing is held open while a receiver answers. A pass that dies mid-way loses nothing:
     * what it recorded is sent by the next, what it leased is taken over when the lease ends.
     */
    async checkAlerts(options = {}) {
      const { maxSends, stop } = parseOrThrow(checkOptions, options, "invalid_input", "options");
      const db = await executor();
      const passed = (await db.run<AlertPassRow>(startAlertPass())).map((row) => ({ row, alert: watchingAlert(row) }));
      const done = (sent: Omit<AlertCheck, "alerts">): AlertCheck => ({ alerts: passed.length, ...sent });
      const nothing = { sent: 0, retrying: 0, failed: 0 };
      if (passed.length === 0) return done(nothing);
      const alerts = passed.map((p) => p.alert);
      const watching = (condition: AlertCondition) => alerts.filter((a) => a.watches.has(condition));
      const now = new Date();
      const candidates: AlertCandidate[] = [];
      let cursors: { alertId: number; back: string }[] = [];

      const deadWatchers = watching("key.dead");
      if (deadWatchers.length > 0) {
        const since = deadWatchers.map((a) => ({ id: a.id, since: a.deadSince, minIntervalMs: a.minIntervalMs }));
        const rows = await db.run<DeadKeyRow>(deadKeysSince(since, DEAD_KEYS_PER_PASS));
        candidates.push(...deadKeyCandidates(rows));
        cursors = deadKeyCursors(rows, DEAD_KEYS_PER_PASS);
      }

      const lagWatchers = watching("subscription.lag");
      if (lagWatchers.length > 0 || watching("advance.failed").length > 0) {
        // counted up to one past the highest threshold: enough to tell every alert's "over"
        const cap = lagWatchers.length === 0 ? 0 : Math.max(...lagWatchers.map((a) => a.lagOver ?? 0)) + 1;
        const rows = await db.run<SubscriptionConditionRow>(subscriptionConditions(cap));
        const toCount = lagToCount(alerts, rows, cap);
        const wholeLag = new Map<string, number>();
        if (toCount.length > 0) {
          for (const row of await db.run<{ name: string; lag: string }>(subscriptionLag(toCount)))
            wholeLag.set(row.name, Number(row.lag));
        }
        candidates.push(...subscriptionCandidates(alerts, rows, { wholeLag, now }));
      }

      const horizonWatchers = watching("horizon.held");
      if (horizonWatchers.length > 0) {
        const heldOverMs = Math.min(...horizonWatchers.map((a) => a.heldOverMs ?? Number.MAX_SAFE_INTEGER));
        const rows = await db.run<HeldHorizonRow>(heldHorizons(heldOverMs, { query: false }));
        candidates.push(...horizonCandidates(alerts, rows, { now }));
      }

      let recorded = 0;
      if (candidates.length > 0 || cursors.length > 0) {
        const [row] = await db.run<{ recorded: number }>(recordAlerts(unique(candidates), cursors));
        recorded = row?.recorded ?? 0;
      }
      if ((recorded === 0 && !passed.some((p) => p.row.due)) || stop?.aborted) return done(nothing);
      return done(await sendDue(db, { maxSends }));
    },
  };

  async function sendDue(db: Awaited<ReturnType<PartDeps["executor"]>>, { maxSends }: { maxSends: number }) {
    const claimed = await db.run<ClaimedSendRow>(claimAlertSends(maxSends, SEND_LEASE_MS));
    if (claimed.length === 0) return { sent: 0, retrying: 0, failed: 0 };
    const results: SendResult[] = [];
    const queue = [...claimed];
    const worker = async () => {
      for (let send = queue.shift(); send !== undefined; send = queue.shift()) {
        const { error } = await sendAlert(transport, {
          url: send.url,
          secret: send.secret,
          messageId: send.message_id,
          payload: send.payload,
        });
        results.push({
          alertId: send.alert_id,
          type: send.type,
          subject: send.subject,
          messageId: send.message_id,
          error,
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(SENDS_AT_ONCE, claimed.length) }, worker));
    const [row] = await db.run<SettledRow>(settleAlertSends(results));
    return present(row, "the settled sends");
  }
}

/** One candidate per alert, type and subject (an upsert may touch a row once per statement). */
function unique(candidates: AlertCandidate[]): AlertCandidate[] {
  const seen = new Map<string, AlertCandidate>();
  for (const c of candidates) seen.set(`${c.alertId} ${c.type} ${c.subject}`, c);
  return [...seen.values()];
}
