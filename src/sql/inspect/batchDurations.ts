import { sql, type SQL } from "drizzle-orm";
import { batchDurations, subscriptions } from "../../db/schema.js";

export interface BatchDurationRow {
  subscription: string;
  outcome: string;
  /** the bucket's upper bound in seconds (Infinity: above the last bound) */
  le: number;
  batches: string;
  events: string;
  seconds: number;
}

/** The batch-duration counters (kept by a trigger on activity; see schema.ts), per existing subscription. */
export function listBatchDurations(): SQL {
  return sql`
    SELECT s.name AS subscription, d.outcome, d.le, d.batches, d.events, d.seconds
    FROM ${batchDurations} d JOIN ${subscriptions} s ON s.id = d.subscription_id
    ORDER BY s.name, d.outcome, d.le`;
}
