import { sql, type SQL } from "drizzle-orm";
import { corqSchema, events, keys, migrations, subscriptions, throughput } from "../../db/schema.js";
import { rewindState } from "../advance/advanceSubscription.js";
import { delayedOverHour } from "./subscriptionStats.js";

// The doctor's statements (src/doctor.ts turns their rows into findings). Each reads catalog
// views or a handful of index probes: cheap when the database is in trouble, which is when it
// runs. Ages come as a number of ms (bigint: text in the drivers), xids not at all.

/** ms since `at`, as a bigint (text in the drivers: Number() it). */
const msSince = (at: SQL) => sql`(extract(epoch FROM clock_timestamp() - ${at}) * 1000)::bigint`;

/**
 * What holds the xmin horizon longer than `heldOverMs`:
 * - a transaction with a transaction id (any database: xids are the cluster's) — it stops every
 *   advance, which reads the log below `pg_snapshot_xmin(pg_current_snapshot())`, the oldest
 *   running xid (docs/architecture.md, invariant 1); one with only a snapshot (a long query, a
 *   repeatable-read transaction, in this database) holds vacuum back, not the advance;
 * - a prepared transaction (two-phase commit): it keeps its xid until COMMIT / ROLLBACK PREPARED;
 * - a replication slot nobody reads that keeps an xmin or catalog_xmin (since `inactive_since`,
 *   Postgres 17+; read through to_jsonb so that older servers answer too, with no age).
 * And, whatever their age, the sessions of other roles this role may not see into (no
 * pg_read_all_stats): their xid shows, not since when (holder 'hidden').
 * `query: false` (an alerts pass): a session's query text stays in the database — it may be
 * another application's, with a secret in its SQL, and an alert goes to a receiver outside.
 */
export function heldHorizons(heldOverMs: number, options: { query?: boolean } = {}): SQL {
  const longer = (since: SQL) => sql`clock_timestamp() - ${since} > ${heldOverMs}::float8 * interval '1 millisecond'`;
  const query = options.query === false ? sql`NULL` : sql`left(split_part(a.query, chr(10), 1), 200)`;
  return sql`
    SELECT 'transaction' AS holder, a.pid, NULL AS name, a.datname AS database, a.usename AS "user",
      nullif(a.application_name, '') AS application, a.state, ${query} AS query,
      ${msSince(sql`a.xact_start`)} AS age_ms, a.backend_xid IS NOT NULL AS holds_advance
    FROM pg_stat_activity a
    WHERE a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL AND ${longer(sql`a.xact_start`)}
      AND (a.backend_xid IS NOT NULL OR (a.backend_xmin IS NOT NULL AND a.datname = current_database()))
    UNION ALL
    SELECT 'hidden', a.pid, NULL, a.datname, a.usename, nullif(a.application_name, ''), NULL, NULL, NULL,
      a.backend_xid IS NOT NULL
    FROM pg_stat_activity a
    WHERE a.pid <> pg_backend_pid() AND a.query = '<insufficient privilege>'
      AND (a.backend_xid IS NOT NULL OR (a.backend_xmin IS NOT NULL AND a.datname = current_database()))
    UNION ALL
    SELECT 'prepared transaction', NULL, p.gid, p.database, p.owner::text, NULL, NULL, NULL,
      ${msSince(sql`p.prepared`)}, true
    FROM pg_prepared_xacts p
    WHERE ${longer(sql`p.prepared`)}
    UNION ALL
    SELECT 'replication slot', NULL, s.slot_name::text, s.database::text, NULL, NULL, s.slot_type, NULL,
      ${msSince(sql`(to_jsonb(s) ->> 'inactive_since')::timestamptz`)}, false
    FROM pg_replication_slots s
    WHERE NOT s.active AND (s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL)
      AND coalesce(${longer(sql`(to_jsonb(s) ->> 'inactive_since')::timestamptz`)}, true)
    ORDER BY age_ms DESC NULLS LAST, pid`;
}

export interface HeldHorizonRow {
  holder: "transaction" | "hidden" | "prepared transaction" | "replication slot";
  pid: number | null;
  /** The prepared transaction's gid, or the slot's name. */
  name: string | null;
  database: string | null;
  user: string | null;
  application: string | null;
  /** A session's state; a slot's type (physical, logical). */
  state: string | null;
  query: string | null;
  age_ms: string | null;
  holds_advance: boolean;
}

/** The tags of the migrations applied (undefined_table, 42P01, where corq was never migrated). */
export function appliedMigrations(): SQL {
  return sql`SELECT tag FROM ${migrations} ORDER BY tag`;
}

/**
 * Per subscription, what the doctor judges it by: its advance error, its dead keys (their
 * partial index), the oldest event past its watermark in log order (one probe of events (tx,
 * position)), the longest a live ready key has waited for a consumer (one probe of the ready
 * index, live part: a replay's keys wait their turn on purpose), what it acked over the last 5
 * minutes (the dashboard's 10-second buckets), whether a rewind holds its advance, and its keys
 * held by a delayed event more than an hour ahead (two range probes of the ready index, live and
 * replaying: only those keys are read) with the furthest of their times and its maxDelayMs.
 */
export function subscriptionHealth(): SQL {
  return sql`
    SELECT s.name, s.kind, s.paused, s.advance_error, s.advance_error_at,
      ${rewindState(sql`s`)} AS rewinding,
      (SELECT count(*) FROM ${keys} k WHERE k.subscription_id = s.id AND k.dead_at IS NOT NULL)::int AS dead,
      (SELECT ${msSince(sql`e.created_at`)} FROM ${events} e
        WHERE (e.tx, e.position) > (s.watermark_tx, s.watermark_position)
        ORDER BY e.tx, e.position LIMIT 1) AS unadvanced_ms,
      (SELECT ${msSince(sql`k.available_at`)} FROM ${keys} k
        WHERE k.subscription_id = s.id AND k.available_at IS NOT NULL AND k.paused_at IS NULL
          AND (k.last_seq < k.replay_seq) IS FALSE
        ORDER BY k.available_at LIMIT 1) AS ready_waited_ms,
      (SELECT coalesce(sum(t.events), 0) FROM ${throughput} t
        WHERE t.subscription_id = s.id AND t.bucket > now() - interval '5 minutes')::bigint AS acked_recently,
      s.max_delay_ms, d.delayed_keys, d.delayed_until
    FROM ${subscriptions} s
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS delayed_keys, max(d.available_at) AS delayed_until FROM (
        ${delayedPart(false)}
        UNION ALL
        ${delayedPart(true)}) d
    ) d
    ORDER BY s.name`;
}

const delayedPart = (replaying: boolean) => sql`SELECT k.available_at FROM ${keys} k
        WHERE k.subscription_id = s.id AND (k.last_seq < k.replay_seq) IS ${replaying ? sql`TRUE` : sql`FALSE`}
          AND k.available_at > now() + interval '1 hour' AND k.paused_at IS NULL AND ${delayedOverHour}`;

export interface SubscriptionHealthRow {
  name: string;
  kind: "code" | "push";
  paused: boolean;
  advance_error: string | null;
  advance_error_at: Date | string | null;
  rewinding: "live" | "abandoned" | null;
  dead: number;
  unadvanced_ms: string | null;
  /** Negative: the first ready key's time has not come yet (nothing waits). */
  ready_waited_ms: string | null;
  acked_recently: string;
  max_delay_ms: string;
  /** Keys held by a delayed event more than an hour ahead, and the furthest of their times. */
  delayed_keys: number;
  delayed_until: Date | string | null;
}

/**
 * corq's tables as the statistics collector sees them: dead and live row versions, the last
 * vacuum, and whether autovacuum is switched off for the table (a boolean reloption, in any of
 * the spellings Postgres accepts for false).
 */
export function tableVacuum(): SQL {
  return sql`
    SELECT t.relname::text AS "table", t.n_live_tup AS live, t.n_dead_tup AS dead,
      greatest(t.last_autovacuum, t.last_vacuum) AS last_vacuum,
      ${msSince(sql`greatest(t.last_autovacuum, t.last_vacuum)`)} AS vacuumed_ms,
      EXISTS (SELECT FROM unnest(c.reloptions) o
        WHERE o ~* '^autovacuum_enabled=(f|fa|fal|fals|false|n|no|of|off|0)$') AS autovacuum_disabled
    FROM pg_stat_user_tables t JOIN pg_class c ON c.oid = t.relid
    WHERE t.schemaname = ${corqSchema.schemaName}
    ORDER BY t.relname`;
}

export interface TableVacuumRow {
  table: string;
  live: string;
  dead: string;
  last_vacuum: Date | string | null;
  vacuumed_ms: string | null;
  autovacuum_disabled: boolean;
}

/**
 * The server's side: client connections in use against what roles without superuser may open
 * (max_connections less the reserved ones; reserved_connections is Postgres 16+), and whether
 * autovacuum runs at all (it needs track_counts). Sessions of other roles this role may not see
 * into have no backend_type: counted by the mark Postgres puts in their query instead.
 */
export function serverState(): SQL {
  return sql`
    SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
              OR query = '<insufficient privilege>' AND usename IS NOT NULL)::int AS connections,
      current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
        - coalesce(current_setting('reserved_connections', true)::int, 0) AS max_connections,
      current_setting('autovacuum') = 'on' AS autovacuum, current_setting('track_counts') = 'on' AS track_counts,
      current_user::text AS role`;
}

export interface ServerStateRow {
  connections: number;
  max_connections: number;
  autovacuum: boolean;
  track_counts: boolean;
  /** The role the doctor runs as. */
  role: string;
}
