// Alerts: where and when to send them, and the newest send about each subject.
import { sql } from "drizzle-orm";
import { bigint, check, index, integer, jsonb, primaryKey, text, timestamp } from "drizzle-orm/pg-core";
import { corqSchema, createdAt } from "./corqSchema.js";

/**
 * Alerts (src/corq/alerts.ts, docs/operations.md "Alerts"): where to POST, signed with `secret`
 * (shown once, as a push subscription's), on which conditions, with their thresholds.
 * checked_at: the last pass that looked (the cron, serve's loop): dead keys are looked for from
 * a little before it (a failure's dead_at is read before its statement commits). last_send:
 * what the newest send said (the dashboard, GET /alerts); sent / failed: sends delivered, and
 * given up after their retries.
 */
export const alerts = corqSchema.table(
  "alerts",
  {
    id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
    name: text("name").notNull().unique("alerts_name_key"),
    url: text("url").notNull(),
    secret: text("secret").notNull(),
    conditions: text("conditions").array().notNull(),
    lagOver: bigint("lag_over", { mode: "number" }),
    heldOverMs: bigint("held_over_ms", { mode: "number" }),
    minIntervalMs: bigint("min_interval_ms", { mode: "number" }).notNull(),
    checkedAt: timestamp("checked_at", { withTimezone: true }).notNull().defaultNow(),
    sent: bigint("sent", { mode: "number" }).notNull().default(0),
    failed: bigint("failed", { mode: "number" }).notNull().default(0),
    lastSend: jsonb("last_send"),
    createdAt: createdAt(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  () => [
    check(
      "alerts_conditions_check",
      sql`cardinality(conditions) > 0 AND conditions <@ ARRAY['key.dead', 'subscription.lag', 'advance.failed', 'horizon.held']::text[]`,
    ),
  ],
);

/**
 * One row per alert, condition type and subject (a subscription's key, a subscription, a
 * transaction holding the horizon): the newest send about it. A condition seen again within the
 * alert's min_interval_ms of queued_at (or, for a dead key, the same death: `incident`) sends
 * nothing; the insert that wins the row is the one that sends, so several processes send once.
 * next_at: due for a try (null: sent, or given up); sending_until: a sender's lease, past which
 * another takes the send over. Done rows are pruned once neither rule needs them.
 */
export const alertSends = corqSchema.table(
  "alert_sends",
  {
    alertId: integer("alert_id")
      .notNull()
      .references(() => alerts.id, { onDelete: "cascade" }),
    type: text("type").notNull(),
    subject: text("subject").notNull(),
    incident: text("incident"),
    messageId: text("message_id").notNull(),
    payload: jsonb("payload").notNull(),
    queuedAt: timestamp("queued_at", { withTimezone: true }).notNull().defaultNow(),
    attempts: integer("attempts").notNull().default(0),
    nextAt: timestamp("next_at", { withTimezone: true }),
    sendingUntil: timestamp("sending_until", { withTimezone: true }),
    sentAt: timestamp("sent_at", { withTimezone: true }),
    lastError: text("last_error"),
  },
  (t) => [
    primaryKey({ name: "alert_sends_pkey", columns: [t.alertId, t.type, t.subject] }),
    // the sends due: empty but for the moments an alert goes out (or waits for its retry)
    index("alert_sends_next_at_idx").on(t.nextAt).where(sql`next_at IS NOT NULL`),
  ],
);
