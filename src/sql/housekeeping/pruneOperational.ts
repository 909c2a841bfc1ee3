import { sql, type SQL } from "drizzle-orm";
import { pruneActivityCtes } from "../activity/activity.js";
import { forgetWebhookIds } from "../consume/webhookIds.js";
import { pruneDashboardSessions } from "../operate/dashboardSessions.js";
import { idempotencyKeys, keys, rateBuckets, tenants } from "../../db/schema.js";

export interface PrunedRow {
  activity: number;
  sessions: number;
  webhook_ids: number;
  idempotency_keys: number;
  tenants: number;
}

/**
 * The operational tables that would otherwise grow with time, pruned in ONE statement: batch
 * records and throughput buckets older than `activityOlderThanMs` (with the batch-duration
 * counters of deleted subscriptions: pruneActivity), expired dashboard sessions, and webhook
 * ids past their replay window, and idempotency keys past theirs (`idempotencyTtlMs`). Logins and webhooks prune these too, but only while they come.
 * And tenants (fairness) not served for `tenantIdleMs` whose keys have no work, up to 5,000 a
 * pass, with their rate-limit buckets: a tenant that comes back gets its row again from the
 * advance, first in line.
 */
export function pruneOperational({
  activityOlderThanMs,
  idempotencyTtlMs,
  tenantIdleMs,
}: {
  activityOlderThanMs: number;
  idempotencyTtlMs: number;
  tenantIdleMs: number;
}): SQL {
  return sql`
    WITH ${pruneActivityCtes(activityOlderThanMs)},
    sessions AS (${pruneDashboardSessions} RETURNING 1),
    webhooks AS (${forgetWebhookIds} RETURNING 1),
    idempotency AS (
      DELETE FROM ${idempotencyKeys} WHERE created_at <= now() - ${idempotencyTtlMs} * interval '1 millisecond' RETURNING 1
    ),
    idle_tenants AS (
      -- only a row with no turn (due_at null: no work known), rechecked on the row as it is when
      -- locked: a writer that gave one of its keys work meanwhile set a turn, and keeps the row;
      -- rows taken in primary-key order, skipping any another statement holds (no deadlock with
      -- the writers, which lock tenant rows in that order too)
      DELETE FROM ${tenants} t WHERE t.due_at IS NULL AND (t.subscription_id, t.tenant) IN (
        SELECT n.subscription_id, n.tenant FROM ${tenants} n
        WHERE n.due_at IS NULL AND coalesce(n.served_at, '-infinity') <= now() - ${tenantIdleMs} * interval '1 millisecond'
          -- one probe of keys_tenant_ready_idx: no key of it has work
          AND NOT EXISTS (SELECT FROM ${keys} k WHERE k.subscription_id = n.subscription_id AND k.tenant = n.tenant
                            AND k.available_at IS NOT NULL AND k.paused_at IS NULL)
        ORDER BY n.subscription_id, n.tenant LIMIT 5000
        FOR UPDATE SKIP LOCKED)
      RETURNING t.subscription_id, t.tenant
    ),
    -- with their rate-limit buckets (a tenant that comes back starts with full room)
    tenant_buckets AS (
      DELETE FROM ${rateBuckets} b USING idle_tenants t
      WHERE b.subscription_id = t.subscription_id AND b.scope = 't:' || t.tenant
    )
    SELECT (SELECT count(*) FROM pruned)::int AS activity, (SELECT count(*) FROM sessions)::int AS sessions,
      (SELECT count(*) FROM webhooks)::int AS webhook_ids, (SELECT count(*) FROM idempotency)::int AS idempotency_keys,
      (SELECT count(*) FROM idle_tenants)::int AS tenants`;
}
