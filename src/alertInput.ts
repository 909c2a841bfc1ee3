// An alert as callers give it (putAlert, PUT /alerts/:name, `corq alerts put`), validated here
// before anything is written: the URL and secret by the push subscriptions' rules (the same
// private-address refusal, CORQ_PUSH_ALLOW_PRIVATE), the conditions by name, every threshold 1
// or more.
import { z } from "zod";
import { parseOrThrow, subscriptionName } from "./config.js";
import { CorqError } from "./errors.js";
import { privateHostProblem } from "./privateAddress.js";
import { deliverConfig } from "./pushDelivery.js";
import type { AlertCondition } from "./types.js";

export const ALERT_CONDITIONS = ["key.dead", "subscription.lag", "advance.failed", "horizon.held"] as const;

/** minIntervalMs left out: 10 minutes (API.md). */
export const DEFAULT_MIN_INTERVAL_MS = 600_000;
/** lagOver left out: a thousand events not handled. */
export const DEFAULT_LAG_OVER = 1000;
/** heldOverMs left out: a minute, as the doctor's horizon_held. */
export const DEFAULT_ALERT_HELD_OVER_MS = 60_000;
// ms thresholds: up to 366 days (the doctor's bound); beyond that an alert would never come
const MAX_MS = 366 * 86_400_000;

/** An alert's name: the rule of a subscription's. */
export const alertName = subscriptionName;

const milliseconds = (what: string) =>
  z
    .number()
    .int("must be a whole number of milliseconds")
    .min(1, "must be 1 or more")
    .max(MAX_MS, `at most ${MAX_MS} (366 days)`)
    .describe(what);

/** What putAlert and PUT /alerts/:name accept. Strict: a misspelt field is refused, never ignored. */
export const alertInput = z
  .strictObject({
    url: deliverConfig.shape.url.describe("where each alert is POSTed"),
    secret: deliverConfig.shape.secret.describe(
      "the Standard Webhooks signing secret; left out: one is made (a replace keeps the old one)",
    ),
    on: z
      .array(z.enum(ALERT_CONDITIONS))
      .min(1, "at least one condition")
      .max(20)
      .describe("the conditions that send an alert"),
    lagOver: z
      .number()
      .int("must be a whole number of events")
      .min(1, "must be 1 or more")
      .max(Number.MAX_SAFE_INTEGER)
      .optional()
      .describe(
        `subscription.lag: more than this many events not handled (not advanced, or queued); default ${DEFAULT_LAG_OVER}`,
      ),
    heldOverMs: milliseconds(
      `horizon.held: a transaction holding the xmin horizon longer than this; default ${DEFAULT_ALERT_HELD_OVER_MS}`,
    ).optional(),
    minIntervalMs: milliseconds(
      `at most one alert per condition and key (or subscription, or transaction) this often; default ${DEFAULT_MIN_INTERVAL_MS} (10 minutes)`,
    ).optional(),
  })
  .superRefine((alert, ctx) => {
    // a threshold for a condition it does not watch is a mistake, not a setting to keep
    const needs: [keyof typeof alert, AlertCondition][] = [
      ["lagOver", "subscription.lag"],
      ["heldOverMs", "horizon.held"],
    ];
    for (const [field, condition] of needs) {
      if (alert[field] !== undefined && !alert.on.includes(condition))
        ctx.addIssue({ code: "custom", path: [field], message: `only with "${condition}" in on` });
    }
  });

/** An alert as stored: conditions deduplicated, defaults filled in. */
export interface StoredAlert {
  url: string;
  /** Given by the caller; undefined: make one (or keep the old one). */
  secret: string | undefined;
  conditions: AlertCondition[];
  lagOver: number | null;
  heldOverMs: number | null;
  minIntervalMs: number;
}

export function parseAlert(input: unknown, options: { allowPrivate: boolean }): StoredAlert {
  const alert = parseOrThrow(alertInput, input, "invalid_input", "");
  const problem = options.allowPrivate ? null : privateHostProblem(new URL(alert.url));
  if (problem) {
    const message = `${problem}; set CORQ_PUSH_ALLOW_PRIVATE=true (or pushAllowPrivate) to send alerts to private networks`;
    throw new CorqError("invalid_input", `url: ${message}`, { details: [{ path: "url", message }] });
  }
  const conditions = ALERT_CONDITIONS.filter((c) => alert.on.includes(c));
  return {
    url: alert.url,
    secret: alert.secret,
    conditions,
    lagOver: conditions.includes("subscription.lag") ? (alert.lagOver ?? DEFAULT_LAG_OVER) : null,
    heldOverMs: conditions.includes("horizon.held") ? (alert.heldOverMs ?? DEFAULT_ALERT_HELD_OVER_MS) : null,
    minIntervalMs: alert.minIntervalMs ?? DEFAULT_MIN_INTERVAL_MS,
  };
}
