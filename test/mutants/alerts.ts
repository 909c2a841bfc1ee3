// Mutants of alerts and the dashboard: receivers below admin, payloads (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

export const alertsMutants: Mutant[] = [
  // --- receivers below admin (issue 47, finding 4) --------------------------------------
  {
    name: "alerts: an operate session sees alert receivers' whole URLs on the dashboard",
    edits: one(
      "src/http/dashboard/routes.tsx",
      'const admin = principal !== undefined && scopesAllow(principal.scopes, "admin");',
      'const admin = principal !== undefined && scopesAllow(principal.scopes, "operate");',
    ),
    tests: ["test/worker/alerts.worker.test.ts"],
  },
  {
    name: "alerts: a receiver's URL redacted to its path (the relay's capability kept)",
    edits: one(
      "src/http/redactedUrl.ts",
      "return `${url.protocol}//${url.host}`;",
      "return `${url.protocol}//${url.host}${url.pathname}`;",
    ),
    tests: ["test/worker/alerts.worker.test.ts", "test/worker/api.worker.test.ts"],
  },
  {
    name: "alerts: an operate token sees push URLs whole in GET /subscriptions and /stats",
    edits: one(
      "src/http/api.ts",
      'if (!subscription.deliver || (principal && scopesAllow(principal.scopes, "admin"))) return subscription;',
      'if (!subscription.deliver || (principal && scopesAllow(principal.scopes, "operate"))) return subscription;',
    ),
    tests: ["test/worker/api.worker.test.ts"],
  },
  {
    name: "alerts: pause and resume answer the push URL whole to an operate token",
    edits: one(
      "src/http/api.ts",
      "return c.json(asSeenBy(c, await c.var.corq().subscription(name)));",
      "return c.json(await c.var.corq().subscription(name));",
    ),
    tests: ["test/worker/api.worker.test.ts"],
  },
  // --- payloads (issue 47, finding 5) ---------------------------------------------------
  {
    name: "alerts: horizon.held sends the holding session's query text (read again and named in the message)",
    edits: [
      {
        file: "src/corq/alerts.ts",
        search: "heldHorizons(heldOverMs, { query: false })",
        replace: "heldHorizons(heldOverMs)",
      },
      {
        file: "src/alertCandidates.ts",
        search: '`pid ${row.pid} (${[row.state ?? "state unknown", ...database].join(", ")}) has held',
        replace: '`pid ${row.pid} (${[row.state ?? "state unknown", ...database, row.query].join(", ")}) has held',
      },
    ],
    tests: ["test/alerts.int.test.ts"],
  },
  {
    name: "alerts: horizon.held in the doctor's words (application, role and last query to the receiver)",
    edits: [
      {
        file: "src/alertCandidates.ts",
        search: 'import { formatDuration } from "./doctor.js";',
        replace: 'import { formatDuration, heldHorizonFindings } from "./doctor.js";',
      },
      {
        file: "src/alertCandidates.ts",
        search: "error: heldHorizonText(row, ageMs),",
        replace: "error: heldHorizonFindings([row])[0]?.message ?? heldHorizonText(row, ageMs),",
      },
    ],
    tests: ["test/alerts.int.test.ts"],
  },
  // --- the rules of a send ---------------------------------------------------------------
  {
    name: "alerts: minIntervalMs ignored by the database (a condition that holds is sent every pass)",
    edits: one(
      "src/sql/alerts/alertSends.ts",
      "WHERE s.queued_at <= now() - (SELECT a.min_interval_ms FROM ${alerts} a WHERE a.id = s.alert_id) * interval '1 millisecond'",
      "WHERE s.queued_at <= now()",
    ),
    tests: ["test/alerts.int.test.ts"],
  },
  {
    name: "alerts: an alert sent for a condition it does not watch (advance.failed to a lag alert)",
    edits: one(
      "src/alertCandidates.ts",
      "const fresh = (type: AlertCondition) => alert.watches.has(type) && !alert.recent.has(`${type} ${subject}`);",
      "const fresh = (type: AlertCondition) => !alert.recent.has(`${type} ${subject}`);",
    ),
    tests: ["test/alerts.int.test.ts"],
  },
  {
    name: "alerts: the signature over the payload as stored, not the body sent (fields in another order)",
    edits: one(
      "src/alertDelivery.ts",
      "signature = await sign(send.secret, { id: send.messageId, timestamp, body });",
      "signature = await sign(send.secret, { id: send.messageId, timestamp, body: JSON.stringify(send.payload) });",
    ),
    tests: ["test/alerts.int.test.ts"],
  },
  {
    name: "alerts: a receiver's non-2xx answer taken as sent (never retried)",
    edits: one(
      "src/alertDelivery.ts",
      "error: response.status >= 200 && response.status <= 299 ? null : `HTTP ${response.status}`",
      "error: response.status >= 200 && response.status <= 599 ? null : `HTTP ${response.status}`",
    ),
    tests: ["test/alerts.int.test.ts"],
  },
];
