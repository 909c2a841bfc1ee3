// The shapes of the HTTP API: the zod schemas that validate requests (api.ts parses with
// them) and the shapes of the answers. src/http/openapi.ts turns both into the OpenAPI
// document, so what is validated and what is documented is one definition.
import { z } from "zod";
import {
  correlationKey,
  eventInput,
  expectedVersion,
  pushSubscriptionInput,
  streamName,
  subscriptionName,
} from "../config.js";
import { TOKEN_SCOPES, tokenId, tokenInput } from "../tokens.js";
import { retentionInput } from "../retentionPolicy.js";
import { ALERT_CONDITIONS, alertInput, alertName } from "../alertInput.js";

// ---- requests ---------------------------------------------------------------------------

export const appendBody = z.strictObject({
  events: z.array(eventInput).min(1).max(1000),
  expectedVersion: expectedVersion.optional(),
});

export const releaseBody = z.strictObject({
  subscription: subscriptionName,
  key: correlationKey.optional(),
  mode: z.enum(["retry", "skip"]).optional(),
});

/** A non-negative integer in a query string or header. */
export const count = z
  .string()
  .regex(/^\d{1,15}$/, "must be a non-negative integer")
  .transform(Number);

export const streamQuery = z.object({ from: count.optional(), limit: count.optional() });
export const logQuery = z.object({ after: count.optional(), limit: count.optional() });
export const tailQuery = z.object({
  before: count
    .refine((n) => n >= 1, "must be a position (1 or more)")
    .optional()
    .describe("the `next` of the page before: events below this position (default: from the newest)"),
  limit: count.optional().describe("1..1000, default 50"),
});
export const keyStatus = z.enum(["ready", "leased", "backoff", "dead", "paused", "idle"]);
export const keysQuery = z.object({
  status: keyStatus.optional(),
  limit: count.optional(),
  after: z
    .string()
    .max(1000)
    .refine((key) => !key.includes("\u0000"), "must not contain U+0000")
    .optional()
    .describe("the `next` of the page before (a key: keys after it, in key order)"),
});
export const deadLettersQuery = z.object({ subscription: subscriptionName.optional(), limit: count.optional() });
/** POST /subscriptions/:name/rewind */
export const rewindBody = z.strictObject({
  to: z
    .union([z.literal("beginning"), z.number().int().min(1).max(Number.MAX_SAFE_INTEGER)])
    .describe("a position of the log (inclusive), or the beginning"),
  key: correlationKey.optional().describe("only this key, from its first event at or after `to`"),
});

export const streamParams = z.object({ stream: streamName });
export const nameParams = z.object({ name: subscriptionName });
export const keyParams = z.object({
  name: subscriptionName,
  key: correlationKey.describe("percent-encoded"),
});
export const consumeParams = z.object({ subscription: subscriptionName });
/** A consumer slot (src/db/schema.ts: 1 … 1000). */
export const slot = count.refine((n) => n >= 1 && n <= 1000, "must be a consumer slot (1..1000)");
export const consumeHeaders = z.object({
  "corq-budget-ms": count.optional().describe("drain for this long (ms) instead of one batch"),
  "corq-slot": slot.optional().describe("the consumer slot a dispatcher claimed (internal)"),
});

// the largest xid8 (an unsigned 64-bit transaction id)
const XID8_MAX = 2n ** 64n - 1n;

export const appendHeaders = z.object({
  "idempotency-key": z
    .string()
    .regex(/^[\x21-\x7e]{1,200}$/, "1–200 visible ASCII characters")
    .optional()
    .describe(
      "within CORQ_IDEMPOTENCY_TTL_MS (default 24 h) the same key, stream and body from the same caller (token) " +
        "answers the first append again (Idempotent-Replayed: true) and writes nothing; another token's key is " +
        "another key, and erasing the stream forgets its keys",
    ),
});

export const dispatchHeaders = z.object({
  "corq-after-horizon": z
    .string()
    .regex(/^\d{1,20}$/, "a transaction id")
    .refine((tx) => BigInt(tx) <= XID8_MAX, "a transaction id (at most 2^64 - 1)")
    .optional()
    .describe(
      "internal: a kick's retry — wait (a few seconds at most) until the xmin horizon has passed this transaction id, answer 202, then advance and dispatch",
    ),
  "corq-wake-up": z
    .string()
    .optional()
    .describe(
      "internal: the wake-up object's alarm (a key came due before the next cron) — answer 202 at once, then advance and dispatch",
    ),
});
/** POST /dispatch with corq-after-horizon, or with corq-wake-up */
export const horizonRetry = z.union([z.object({ horizonPassed: z.boolean() }), z.object({ wokeUp: z.literal(true) })]);

export const tokenParams = z.object({ id: tokenId });
/** POST /tokens */
export const tokenBody = tokenInput;

/** PUT /retention */
export const retentionBody = retentionInput;

/** GET /doctor (the library's bound: 366 days) */
export const doctorQuery = z.object({
  heldOverMs: count
    .refine((n) => n <= 366 * 86_400_000, "at most 366 days (31622400000 ms)")
    .optional()
    .describe("how long the xmin horizon may be held before it is a finding, in ms (default 60000)"),
});

/** PUT /alerts/:name (validated by corq.putAlert with this schema) */
export const alertBody = alertInput;
export const alertParams = z.object({ name: alertName });

/** PUT /subscriptions/:name (validated by corq.putSubscription with this schema). */
export const subscriptionBody = pushSubscriptionInput;

// ---- answers ----------------------------------------------------------------------------

const isoTime = z.string().describe("ISO 8601");
const json = z.unknown();

export const event = z.object({
  position: z.number().int(),
  stream: z.string(),
  version: z.number().int(),
  name: z.string(),
  data: json,
  meta: z.record(z.string(), json),
  createdAt: isoTime,
  deliverAt: isoTime.optional().describe("appended with deliverAt or delayMs: not delivered before then"),
});

export const health = z.object({ ok: z.boolean(), db: z.enum(["ok", "unavailable"]) });
export const appendResult = z.object({
  stream: z.string(),
  version: z.number().int(),
  positions: z.array(z.number().int()),
});
export const streamEvents = z.object({
  stream: z.string(),
  events: z.array(event),
  erased: z
    .literal(true)
    .optional()
    .describe("the stream was erased (DELETE /streams/:stream); events appended since are listed"),
  version: z.number().int().optional().describe("an erased stream's last version: appends continue after it"),
});
export const erased = z.object({ erased: z.number().int().describe("events this call erased") });
export const logPage = z.object({ events: z.array(event), next: z.number().int().nullable() });
export const tailPage = z.object({
  events: z.array(event).describe("newest first"),
  next: z.number().int().nullable().describe("pass as `before` for the older page; null at the log's beginning"),
});

export const subscription = z.object({
  name: z.string(),
  kind: z.enum(["code", "push"]),
  events: z.array(z.string()),
  streams: z
    .array(z.string())
    .nullable()
    .describe("stream-name prefixes: only events of streams that start with one of them; null: every stream"),
  key: z.string(),
  from: z.enum(["beginning", "now"]),
  batchSize: z.number().int(),
  maxAttempts: z.number().int(),
  leaseMs: z.number().int(),
  backoff: z.object({ initialMs: z.number().int(), maxMs: z.number().int(), factor: z.number() }),
  maxLeasedKeys: z.number().int().nullable().describe("at most this many keys leased at once (null: no cap)"),
  tenant: z
    .string()
    .nullable()
    .describe(
      'each key\'s tenant: "stream", a JSON path or "function"; claims are shared round robin between tenants (null: none)',
    ),
  tenantWeights: z.record(z.string(), z.number().int()).nullable().describe("keys per round by tenant (default 1)"),
  tenantMismatched: z
    .number()
    .int()
    .describe("events whose tenant differed from their key's (the key keeps its first)"),
  maxLeasedKeysPerTenant: z
    .number()
    .int()
    .nullable()
    .describe("at most this many keys of each tenant leased at once (null: no cap)"),
  rateLimit: z
    .object({
      events: z.number().int(),
      perMs: z.number().int(),
      by: z.enum(["key", "tenant", "subscription"]),
      burst: z.number().int().describe("deliveries that may start at once (1: one every perMs / events)"),
    })
    .nullable()
    .describe(
      "no window of `perMs` sees more than `events` deliveries start (`burst` of them at once, default 1) for each key, tenant or the subscription (null: no limit)",
    ),
  maxDelayMs: z
    .number()
    .int()
    .describe("an event's delay above this many ms is capped at it for this subscription (default a day)"),
  deliver: z.object({ url: z.string(), timeoutMs: z.number().int() }).optional(),
  paused: z.boolean(),
  watermark: z.number().int(),
  lag: z.number().int().describe("events in the log past the watermark: counted up to 10,000, estimated past that"),
  lagEstimated: z
    .boolean()
    .describe("`lag` is an estimate (over 10,000: the positions from the watermark to the head)"),
  pending: z.number().int(),
  skipped: z.number().int(),
  skippedInvalidKeys: z.number().int(),
  lastSkip: z.object({ position: z.number().int(), reason: z.string() }).nullable(),
  skippedDeadLetters: z.number().int(),
  advanceError: z.object({ message: z.string(), at: isoTime }).nullable(),
  orphaned: z.boolean(),
  keys: z.object({
    ready: z.number().int(),
    leased: z.number().int(),
    backoff: z.number().int().describe("not due yet: after a failed attempt, or waiting (below)"),
    waiting: z
      .number()
      .int()
      .describe("of backoff, keys with no failed attempt: waiting for a delayed event or a postponement"),
    waitingUntil: isoTime.nullable().describe("when the first waiting key may run"),
    delayedOverHour: z
      .number()
      .int()
      .describe("of waiting, keys held by a delayed event more than an hour ahead (capped at maxDelayMs)"),
    dead: z.number().int(),
    paused: z.number().int(),
  }),
  incarnation: z.string().describe("changes when the subscription is deleted and created again"),
  startsAt: z
    .number()
    .int()
    .nullable()
    .describe(
      'created `from: "beginning"` after retention removed events: the retention horizon then, where it began; null: it saw the whole log (or started from now)',
    ),
  oldestPendingAgeMs: z.number().nullable(),
});
export const createdSubscription = subscription.extend({
  secret: z.string().optional().describe("the signing secret: in the answer that creates the subscription only"),
});
export const subscriptionList = z.object({ subscriptions: z.array(subscription) });

export const keyState = z.object({
  key: z.string(),
  status: keyStatus,
  pending: z.number().int(),
  attempts: z.number().int(),
  availableAt: isoTime.nullable(),
  lastError: z.string().nullable(),
  lastPosition: z.number().int().nullable(),
  seq: z.number().int().describe("the last seq given to an event of this key"),
  tenant: z.string().optional().describe('the key\'s tenant, in a subscription with one ("": its event named none)'),
  pausedSince: isoTime.optional(),
  holder: z.string().nullable().optional().describe("while a lease is live: who holds it"),
  leasedSince: isoTime.nullable().optional(),
  leasedUntil: isoTime.nullable().optional(),
  reason: z.string().describe("why the key is not running (or what it is doing), in words"),
});
export const keyList = z.object({
  keys: z.array(keyState),
  next: z.string().nullable().describe("pass as `after` for the next page; null on the last page"),
});
export const rewound = z.object({ requeued: z.number().int() });

export const deadLetter = z.object({
  subscription: z.string(),
  key: z.string(),
  position: z.number().int().nullable(),
  attempts: z.number().int(),
  lastError: z.string().nullable(),
  deadAt: isoTime,
});
export const deadLetterList = z.object({ deadLetters: z.array(deadLetter) });
export const released = z.object({ released: z.number().int() });

export const stats = z.object({
  subscriptions: z.array(subscription),
  log: z.object({
    head: z.number().int().nullable(),
    events: z.number().int().describe("events in the log: counted up to 10,000, estimated past that"),
    eventsEstimated: z
      .boolean()
      .describe(
        "`events` is an estimate: the positions from the first to the head, or Postgres' own where removals left holes",
      ),
  }),
});

export const retention = z.object({
  maxAgeMs: z.number().int().nullable().describe("events older than this (ms) are removed; null: kept forever"),
  streams: z
    .array(z.string())
    .nullable()
    .describe("only streams starting with one of these prefixes; null: every stream"),
  horizon: z
    .number()
    .int()
    .nullable()
    .describe(
      "1 + the highest position retention removed (null: nothing removed yet); nothing from here on was removed, a rewind below it is refused",
    ),
});
export const retentionRun = z.object({
  deleted: z.number().int().describe("events this pass removed"),
  horizon: z.number().int().nullable(),
  done: z
    .boolean()
    .describe("false: the pass stopped at its bound with more to remove (the cron goes on; or call again)"),
});

const severity = z.enum(["error", "warning"]);
export const doctorFinding = z.looseObject({
  severity: severity.describe("error: something corq needs stops, act now; warning: worth a look"),
  code: z.enum([
    "horizon_held",
    "sessions_hidden",
    "schema_missing",
    "schema_behind",
    "schema_too_new",
    "advance_failing",
    "advance_behind",
    "delivery_behind",
    "dead_keys",
    "delayed_keys",
    "subscription_orphaned",
    "autovacuum_off",
    "vacuum_behind",
    "connections_near_limit",
    "wake_ups_wait_for_cron",
  ]),
  message: z.string().describe("what is wrong, in words"),
  fix: z.string().describe("what to do"),
  pid: z
    .number()
    .int()
    .nullable()
    .optional()
    .describe("horizon_held: the backend (null: a prepared transaction or a slot)"),
  ageMs: z.number().int().nullable().optional().describe("horizon_held: how long it has held the horizon"),
  holdsAdvance: z.boolean().optional().describe("horizon_held: it has a transaction id and stops every advance"),
  subscription: z.string().optional(),
  table: z.string().nullable().optional(),
});
export const doctorReport = z.object({
  ok: z.boolean().describe("no finding is an error"),
  findings: z
    .array(doctorFinding)
    .describe("errors first; each with the fields of what it is about (docs/operations.md)"),
});

export const advanced = z.object({ advanced: z.record(z.string(), z.number().int()) });
export const dispatched = z.object({
  advanced: z.record(z.string(), z.number().int()),
  dispatched: z.number().int(),
  consumedHere: z.number().int(),
});
export const consumed = z.union([
  z.object({
    key: z.string(),
    events: z.number().int(),
    outcome: z.enum(["acked", "retry", "dead", "expired", "released", "postponed"]),
    error: z.string().optional(),
    batches: z.number().int().optional().describe("with corq-budget-ms: batches drained"),
    eventsTotal: z.number().int().optional().describe("with corq-budget-ms: events drained"),
  }),
  z.object({ batches: z.number().int(), subrequests: z.number().int() }).describe("with corq-slot"),
]);

const alertCondition = z.enum(ALERT_CONDITIONS);
export const alert = z.object({
  name: z.string(),
  url: z.string(),
  on: z.array(alertCondition),
  lagOver: z.number().int().nullable().describe("set when `on` has subscription.lag"),
  heldOverMs: z.number().int().nullable().describe("set when `on` has horizon.held"),
  minIntervalMs: z.number().int(),
  sent: z.number().int().describe("alerts the receiver took (a 2xx)"),
  failed: z.number().int().describe("alerts given up after their retries"),
  lastSend: z
    .object({
      type: alertCondition,
      subscription: z.string().optional(),
      key: z.string().optional(),
      at: isoTime.describe("when the condition was seen (the payload's `at`)"),
      sentAt: isoTime.nullable().describe("when the receiver took it; null: retried, or given up"),
      attempts: z.number().int(),
      error: z.string().nullable().describe("why the last attempt failed (a status or a short reason)"),
      retrying: z.boolean().describe("false once sent or given up"),
    })
    .nullable()
    .describe("the newest send"),
  createdAt: isoTime,
  updatedAt: isoTime,
});
export const createdAlert = alert.extend({
  secret: z.string().optional().describe("the signing secret: in the answer that creates the alert only"),
});
export const alertList = z.object({ alerts: z.array(alert) });
export const alertCheck = z.object({
  alerts: z.number().int().describe("alerts evaluated (0: there are none)"),
  sent: z.number().int().describe("sends the receivers took"),
  retrying: z.number().int().describe("sends that failed and are retried later (1 s, 4 s, 16 s … apart)"),
  failed: z.number().int().describe("sends that failed their last try: given up"),
});
/** What an alert POSTs (not an answer of the API: docs/operations.md, "Alerts"). */
export const alertPayload = z.object({
  type: alertCondition,
  subscription: z.string().optional(),
  key: z.string().optional(),
  position: z.number().int().optional(),
  error: z.string().optional(),
  lag: z.number().int().optional(),
  at: isoTime,
});

export const token = z.object({
  id: z.string(),
  name: z.string(),
  scopes: z.array(z.enum(TOKEN_SCOPES)),
  streamPrefix: z.string().nullable(),
  createdAt: isoTime,
  lastUsedAt: isoTime.nullable(),
});
export const createdToken = token.extend({ token: z.string().describe("the secret: in this answer only") });
export const tokenList = z.object({ tokens: z.array(token) });

/** Every refusal (RFC 9457); `errors` lists the fields refused, when the refusal is about fields. */
export const problem = z.looseObject({
  type: z.string().describe("urn:corq:problem:<code>"),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
