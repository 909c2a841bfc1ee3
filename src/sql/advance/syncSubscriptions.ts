import { sql, type SQL } from "drizzle-orm";
import { advanceKicks, subscriptions } from "../../db/schema.js";
import { asyncCommit } from "../common/asyncCommit.js";
import type { SubscriptionStats } from "../../types.js";

/** A subscription's settings as stored: the same fields the stats show (one definition of them). */
export type StoredSettings = Pick<
  SubscriptionStats,
  | "name"
  | "events"
  | "streams"
  | "key"
  | "from"
  | "batchSize"
  | "maxAttempts"
  | "leaseMs"
  | "backoff"
  | "maxLeasedKeys"
  | "tenant"
  | "tenantWeights"
  | "rateLimit"
  | "maxLeasedKeysPerTenant"
  | "maxDelayMs"
>;

export interface SubscriptionRow {
  id: number;
  name: string;
  kind: "code" | "push";
  events: string[];
  key: string;
}

const listColumns = sql.raw("id, name, kind, events, key");

/**
 * Registers the code subscriptions and returns every subscription (code and push), in one
 * statement. New ones start at the beginning of the log or at the current xmin horizon
 * (`from: "now"`: whatever is not yet safely readable is still delivered). Changed settings
 * apply from the current watermark; rows that did not change are not written (nor locked,
 * so this never waits behind a running advance). With `kick`, it also wakes the advancers
 * (kickAdvancers) — of every subscription, or of those whose filter takes one of `kick.names` —
 * committed before the caller advances.
 */
export function syncSubscriptions(definitions: StoredSettings[], options: { kick: false | { names?: string[] } }): SQL {
  const input = JSON.stringify(
    definitions.map((d) => ({
      name: d.name,
      events: d.events,
      streams: d.streams,
      key: d.key,
      from: d.from,
      batch_size: d.batchSize,
      max_attempts: d.maxAttempts,
      lease_ms: d.leaseMs,
      backoff_initial_ms: d.backoff.initialMs,
      backoff_max_ms: d.backoff.maxMs,
      backoff_factor: d.backoff.factor,
      max_leased_keys: d.maxLeasedKeys,
      tenant: d.tenant,
      tenant_weights: d.tenantWeights,
      rate_limit: d.rateLimit,
      max_leased_keys_per_tenant: d.maxLeasedKeysPerTenant,
      max_delay_ms: d.maxDelayMs,
    })),
  );
  return sql`
    WITH input AS (
      SELECT t.name, ARRAY(SELECT jsonb_array_elements_text(t.events)) AS events,
             CASE WHEN jsonb_typeof(t.streams) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(t.streams)) END AS streams,
             t.key, t."from", t.batch_size, t.max_attempts, t.lease_ms, t.backoff_initial_ms, t.backoff_max_ms, t.backoff_factor,
             t.max_leased_keys, t.tenant, t.tenant_weights, t.rate_limit, t.max_leased_keys_per_tenant, t.max_delay_ms
      FROM jsonb_to_recordset(${input}::jsonb) AS t(name text, events jsonb, streams jsonb, key text, "from" text,
        batch_size int, max_attempts int, lease_ms int, backoff_initial_ms int, backoff_max_ms int,
        backoff_factor float8, max_leased_keys int, tenant text, tenant_weights jsonb, rate_limit jsonb, max_leased_keys_per_tenant int,
        max_delay_ms bigint)
    ),
    inserted AS (
      INSERT INTO ${subscriptions} (name, kind, events, streams, key, "from", batch_size, max_attempts, lease_ms,
        backoff_initial_ms, backoff_max_ms, backoff_factor, max_leased_keys, tenant, tenant_weights, rate_limit, max_leased_keys_per_tenant,
        max_delay_ms, watermark_tx, watermark_position)
      SELECT name, 'code', events, streams, key, "from", batch_size, max_attempts, lease_ms,
        backoff_initial_ms, backoff_max_ms, backoff_factor, max_leased_keys, tenant, tenant_weights, rate_limit, max_leased_keys_per_tenant,
        max_delay_ms,
        CASE WHEN "from" = 'now' THEN pg_snapshot_xmin(pg_current_snapshot()) ELSE '0'::xid8 END, 0
      -- only names not there yet: the unique check of an existing name would wait for an
      -- advance that is updating that subscription's row
      FROM input WHERE NOT EXISTS (SELECT 1 FROM ${subscriptions} s WHERE s.name = input.name)
      ON CONFLICT (name) DO NOTHING
      RETURNING ${listColumns}
    ),
    updated AS (
      UPDATE ${subscriptions} s SET events = i.events, streams = i.streams, key = i.key, batch_size = i.batch_size,
        max_attempts = i.max_attempts, lease_ms = i.lease_ms, backoff_initial_ms = i.backoff_initial_ms,
        backoff_max_ms = i.backoff_max_ms, backoff_factor = i.backoff_factor, max_leased_keys = i.max_leased_keys,
        tenant = i.tenant, tenant_weights = i.tenant_weights, rate_limit = i.rate_limit,
        max_leased_keys_per_tenant = i.max_leased_keys_per_tenant, max_delay_ms = i.max_delay_ms, updated_at = now()
      FROM input i
      WHERE s.name = i.name AND s.kind = 'code'
        AND (s.events, s.streams, s.key, s.batch_size, s.max_attempts, s.lease_ms, s.backoff_initial_ms, s.backoff_max_ms, s.backoff_factor,
             s.max_leased_keys, s.tenant, s.tenant_weights, s.rate_limit, s.max_leased_keys_per_tenant, s.max_delay_ms)
            IS DISTINCT FROM
            (i.events, i.streams, i.key, i.batch_size, i.max_attempts, i.lease_ms, i.backoff_initial_ms, i.backoff_max_ms, i.backoff_factor,
             i.max_leased_keys, i.tenant, i.tenant_weights, i.rate_limit, i.max_leased_keys_per_tenant, i.max_delay_ms)
      RETURNING s.id, s.name, s.kind, s.events, s.key
    )
    ${options.kick ? sql`, ${kickAdvancers(options.kick.names)}` : sql``}
    SELECT * FROM inserted
    UNION ALL SELECT * FROM updated
    UNION ALL SELECT ${listColumns} FROM ${subscriptions}
      WHERE id NOT IN (SELECT id FROM updated)
    ORDER BY id`;
}

/**
 * The CTE `kicked`: bumps the kick counter (advance_kicks) of every subscription, or of those
 * whose filter takes one of `names`, in id order so concurrent kicks never deadlock. A row of
 * its own per subscription: never waits for a running advance. See advanceSubscription
 * (coalesced advancers). Committed without waiting for the WAL flush (asyncCommit): a kick
 * lost in a crash only leaves the events to the cron's advance, as a failed kick does.
 */
function kickAdvancers(names: string[] | undefined): SQL {
  const takes = names === undefined ? sql`true` : sql`('*' = ANY(events) OR events && ${sql.param(names)}::text[])`;
  return sql`kicked AS (
      INSERT INTO ${advanceKicks} AS k (subscription_id, kicked)
      SELECT id, 1 FROM ${subscriptions} WHERE ${takes} AND ${asyncCommit} ORDER BY id
      ON CONFLICT (subscription_id) DO UPDATE SET kicked = k.kicked + 1
    )`;
}
