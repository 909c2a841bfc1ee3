import { sql, type SQL } from "drizzle-orm";
import { pruneActivityCtes } from "../activity/activity.js";
import { forgetWebhookIds } from "../consume/webhookIds.js";
import { pruneDashboardSessions } from "../operate/dashboardSessions.js";
import { idempotencyKeys } from "../../db/schema.js";

export interface PrunedRow {
  activity: number;
  sessions: number;
  webhook_ids: number;
  idempotency_keys: number;
}

/**
 * The operational tables that would otherwise grow with time, pruned in ONE statement: batch
 * records and throughput buckets older than `activityOlderThanMs` (with the batch-duration
 * counters of deleted subscriptions: pruneActivity), expired dashboard sessions, and webhook
 * ids past their replay window, and idempotency keys past theirs (`idempotencyTtlMs`). Logins and webhooks prune these too, but only while they come.
 */
export function pruneOperational({
  activityOlderThanMs,
  idempotencyTtlMs,
}: {
  activityOlderThanMs: number;
  idempotencyTtlMs: number;
}): SQL {
  return sql`
    WITH ${pruneActivityCtes(activityOlderThanMs)},
    sessions AS (${pruneDashboardSessions} RETURNING 1),
    webhooks AS (${forgetWebhookIds} RETURNING 1),
    idempotency AS (
      DELETE FROM ${idempotencyKeys} WHERE created_at <= now() - ${idempotencyTtlMs} * interval '1 millisecond' RETURNING 1
    )
    SELECT (SELECT count(*) FROM pruned)::int AS activity, (SELECT count(*) FROM sessions)::int AS sessions,
      (SELECT count(*) FROM webhooks)::int AS webhook_ids, (SELECT count(*) FROM idempotency)::int AS idempotency_keys`;
}
