import { sql, type SQL } from "drizzle-orm";
import {
  activity,
  advanceKicks,
  keys,
  queue,
  rateBuckets,
  rewindStaged,
  subscriptions,
  tenants,
  throughput,
} from "../../db/schema.js";
import type { StoredSettings } from "../advance/syncSubscriptions.js";

export interface PutRow {
  id: number;
  created: boolean;
}

/**
 * Creates or updates a push subscription in one statement. A new one starts at the
 * beginning of the log or at the xmin horizon (`from: "now"`); an update applies the new
 * filters (event names, stream prefixes: an omitted one is every stream again), key and settings from the current watermark (events already queued keep their
 * keys) and keeps the old signing secret unless a new one is given. Returns no row when the
 * name belongs to a code subscription.
 */
export function putSubscription(
  settings: StoredSettings,
  deliver: { url: string; timeoutMs: number },
  secret: { given?: string; generated: string },
): SQL {
  const d = settings;
  return sql`
    INSERT INTO ${subscriptions} AS s (name, kind, events, streams, key, "from", batch_size, max_attempts, lease_ms,
      backoff_initial_ms, backoff_max_ms, backoff_factor, max_leased_keys, tenant, tenant_weights, rate_limit, max_leased_keys_per_tenant, max_delay_ms, deliver, watermark_tx, watermark_position)
    VALUES (${d.name}, 'push', ${sql.param(d.events)}::text[], ${d.streams === null ? null : sql.param(d.streams)}::text[],
      ${d.key}, ${d.from}, ${d.batchSize}, ${d.maxAttempts},
      ${d.leaseMs}, ${d.backoff.initialMs}, ${d.backoff.maxMs}, ${d.backoff.factor}, ${d.maxLeasedKeys}::int,
      ${d.tenant}::text, ${d.tenantWeights === null ? null : JSON.stringify(d.tenantWeights)}::jsonb,
      ${d.rateLimit === null ? null : JSON.stringify(d.rateLimit)}::jsonb, ${d.maxLeasedKeysPerTenant}::int, ${d.maxDelayMs}::bigint,
      ${JSON.stringify({ ...deliver, secret: secret.given ?? secret.generated })}::jsonb,
      CASE WHEN ${d.from} = 'now' THEN pg_snapshot_xmin(pg_current_snapshot()) ELSE '0'::xid8 END, 0)
    ON CONFLICT (name) DO UPDATE SET
      events = excluded.events, streams = excluded.streams, key = excluded.key, batch_size = excluded.batch_size,
      max_attempts = excluded.max_attempts, lease_ms = excluded.lease_ms,
      backoff_initial_ms = excluded.backoff_initial_ms, backoff_max_ms = excluded.backoff_max_ms,
      backoff_factor = excluded.backoff_factor, max_leased_keys = excluded.max_leased_keys,
      tenant = excluded.tenant, tenant_weights = excluded.tenant_weights, rate_limit = excluded.rate_limit,
      max_leased_keys_per_tenant = excluded.max_leased_keys_per_tenant, max_delay_ms = excluded.max_delay_ms,
      deliver = ${JSON.stringify(deliver)}::jsonb
        || jsonb_build_object('secret', coalesce(${secret.given ?? null}::text, s.deliver->>'secret')),
      updated_at = now()
    WHERE s.kind = 'push'
    RETURNING s.id, (xmax = 0) AS created`;
}

/**
 * First half of deleting a subscription: deletes its row — a push subscription, or a code
 * subscription when `code` allows it (one this instance does not define: orphaned) — and
 * returns what was found. The row lock waits for an advance of it that is under way; once
 * the row is gone no advance can enqueue for it. Run it in a transaction with
 * deleteSubscriptionRows: that statement's snapshot is taken after this one's lock wait, so
 * it sees (and deletes) the rows such an advance committed.
 */
export function deleteSubscription(name: string, code: "keep" | "delete"): SQL {
  return sql`
    WITH target AS (SELECT id, kind FROM ${subscriptions} WHERE name = ${name} FOR UPDATE),
    removed AS (
      DELETE FROM ${subscriptions} s USING target
      WHERE s.id = target.id AND (target.kind = 'push' OR ${code === "delete"})
      RETURNING s.id
    )
    SELECT target.kind, (SELECT id FROM removed) AS removed FROM target`;
}

/** Second half: everything that belonged to the deleted subscription `id`. */
export function deleteSubscriptionRows(id: number): SQL {
  return sql`
    WITH queue_rows AS (DELETE FROM ${queue} WHERE subscription_id = ${id}),
    key_rows AS (DELETE FROM ${keys} WHERE subscription_id = ${id}),
    activity_rows AS (DELETE FROM ${activity} WHERE subscription_id = ${id}),
    throughput_rows AS (DELETE FROM ${throughput} WHERE subscription_id = ${id}),
    kick_rows AS (DELETE FROM ${advanceKicks} WHERE subscription_id = ${id}),
    staged_rows AS (DELETE FROM ${rewindStaged} WHERE subscription_id = ${id}), -- a rewind under way
    tenant_rows AS (DELETE FROM ${tenants} WHERE subscription_id = ${id}),
    bucket_rows AS (DELETE FROM ${rateBuckets} WHERE subscription_id = ${id})
    SELECT 1`;
}
