import { sql, type SQL } from "drizzle-orm";
import { pruneActivityCtes } from "../activity/activity.js";
import { forgetWebhookIds } from "../consume/webhookIds.js";
import { pruneDashboardSessions } from "../operate/dashboardSessions.js";

export interface PrunedRow {
  activity: number;
  sessions: number;
  webhook_ids: number;
}

/**
 * The operational tables that would otherwise grow with time, pruned in ONE statement: batch
 * records and throughput buckets older than `activityOlderThanMs` (with the batch-duration
 * counters of deleted subscriptions: pruneActivity), expired dashboard sessions, and webhook
 * ids past their replay window. Logins and webhooks prune these too, but only while they come.
 */
export function pruneOperational({ activityOlderThanMs }: { activityOlderThanMs: number }): SQL {
  return sql`
    WITH ${pruneActivityCtes(activityOlderThanMs)},
    sessions AS (${pruneDashboardSessions} RETURNING 1),
    webhooks AS (${forgetWebhookIds} RETURNING 1)
    SELECT (SELECT count(*) FROM pruned)::int AS activity, (SELECT count(*) FROM sessions)::int AS sessions,
      (SELECT count(*) FROM webhooks)::int AS webhook_ids`;
}
