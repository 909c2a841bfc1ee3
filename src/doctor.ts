// The doctor (corq.doctor(), GET /doctor, `corq doctor`): what is wrong with corq's database, and
// what to do, from the rows of the statements in src/sql/inspect/doctor.ts. Each check is one
// function of its rows; nothing here reads the database. The findings are explained, with the
// output of a real run, in docs/operations.md ("Diagnosis: corq doctor").
//
// Severity: `error` — something corq needs has stopped or is about to (the advance, the schema,
// new connections): act now. `warning` — worth a look; work goes on meanwhile.
import type { HeldHorizonRow, ServerStateRow, SubscriptionHealthRow, TableVacuumRow } from "./sql/inspect/doctor.js";
import type { DoctorFinding, DoctorReport } from "./types.js";

/** How long the xmin horizon may be held before it is a finding (API.md: "longer than a minute"). */
export const DEFAULT_HELD_OVER_MS = 60_000;
/**
 * An event not advanced, or a ready key not claimed, for this long: the pipeline is behind. The
 * Workers cron advances and dispatches once a minute when no append kicked; five of them missed
 * is no accident.
 */
export const BEHIND_OVER_MS = 5 * 60_000;
/**
 * vacuum_behind: this many dead row versions, more than the live ones, and no vacuum for this
 * long. At 800 events/s the keys table carried 10–20 times its live rows between autovacuum's
 * visits, one autovacuum_naptime (a minute) apart (docs/operations.md, "Sizing"): a ratio alone
 * is normal churn; ten minutes without a vacuum is not.
 */
const VACUUM_DEAD_ROWS = 10_000;
const VACUUM_QUIET_MS = 10 * 60_000;
/** Share of the connections in use at which connections_near_limit is a warning, and an error. */
const CONNECTIONS_WARNING = 0.8;
const CONNECTIONS_ERROR = 0.95;

export interface DoctorInput {
  horizons: HeldHorizonRow[];
  /** The tags in corq.migrations; null: the table does not exist (never migrated). */
  applied: string[] | null;
  /** The tags of this corq's migrations. */
  known: string[];
  /** Null when the schema is not this corq's (the statement would not run). */
  subscriptions: SubscriptionHealthRow[] | null;
  /** The code subscriptions this instance defines: another code subscription is orphaned. */
  code: ReadonlySet<string>;
  tables: TableVacuumRow[];
  server: ServerStateRow;
}

export function diagnose(input: DoctorInput): DoctorReport {
  const horizon = heldHorizonFindings(input.horizons);
  const heldAdvance = horizon.some((f) => f.holdsAdvance);
  const findings = [
    ...horizon,
    ...hiddenSessionFindings(input.horizons, input.server.role),
    ...schemaFindings(input.applied, input.known),
    ...(input.subscriptions ?? []).flatMap((row) => subscriptionFindings(row, { code: input.code, heldAdvance })),
    ...vacuumFindings(input.tables, input.server, { horizonHeld: horizon.length > 0 }),
    ...connectionFindings(input.server),
  ];
  // errors first; within a severity, in the order of the checks above
  findings.sort((a, b) => rank(a) - rank(b));
  return { ok: !findings.some((f) => f.severity === "error"), findings };
}

const rank = (finding: DoctorFinding) => (finding.severity === "error" ? 0 : 1);

/** What holds the xmin horizon past the threshold (the statement filtered by it). */
export function heldHorizonFindings(rows: HeldHorizonRow[]): DoctorFinding[] {
  return rows.flatMap((row): DoctorFinding[] => {
    const ageMs = row.age_ms === null ? null : Math.max(0, Number(row.age_ms));
    const where = [row.application, row.user && `role ${row.user}`, row.database && `database ${row.database}`]
      .filter(Boolean)
      .join(", ");
    const about = { pid: row.pid, ageMs, holdsAdvance: row.holds_advance, database: row.database };
    if (row.holder === "transaction") {
      const pid = row.pid as number;
      const seen = `pid ${pid} (${[row.state ?? "state unknown", where].filter(Boolean).join(", ")}${row.query ? `; last query: ${row.query}` : ""})`;
      const session = { holder: row.holder, ...about, state: row.state, query: row.query, user: row.user };
      if (row.holds_advance) {
        return [
          {
            severity: "error",
            code: "horizon_held",
            message:
              `${seen} has held a transaction open for ${formatDuration(ageMs)}. It has a transaction id, so it holds the ` +
              "xmin horizon: every event committed since it began waits above the horizon, and no advance moves any " +
              "subscription past it until it ends (corq reads the log only below the horizon, so that an event whose " +
              "transaction commits late is never skipped). Vacuum removes nothing newer meanwhile.",
            fix:
              `End that transaction: commit or roll back where it was opened, or end its session: SELECT pg_terminate_backend(${pid}); ` +
              "the advances then catch up by themselves. An application that leaves transactions open (idle in " +
              "transaction: a missing commit, a connection returned to its pool mid-transaction) needs the fix there; " +
              "idle_in_transaction_session_timeout makes Postgres end such sessions by itself.",
            ...session,
            application: row.application,
          },
        ];
      }
      return [
        {
          severity: "warning",
          code: "horizon_held",
          message:
            `${seen} has held a snapshot for ${formatDuration(ageMs)}. It has written nothing, so the advance is not held, ` +
            "but vacuum's xmin horizon is: the dead rows every ack leaves in corq's queue and keys tables cannot be " +
            "removed until it ends, and claims slow down as they pile up.",
          fix:
            `Let it finish, or end it: SELECT pg_cancel_backend(${pid}) (its query) or pg_terminate_backend(${pid}) (its ` +
            "session). Long reports belong on a replica, or bounded by statement_timeout and idle_in_transaction_session_timeout.",
          ...session,
          application: row.application,
        },
      ];
    }
    if (row.holder === "prepared transaction") {
      const gid = row.name ?? "";
      const quoted = `'${gid.replaceAll("'", "''")}'`;
      return [
        {
          severity: "error",
          code: "horizon_held",
          message:
            `Prepared transaction ${quoted} (${where}) has waited ${formatDuration(ageMs)} for COMMIT PREPARED or ` +
            "ROLLBACK PREPARED. It keeps its transaction id until then, so it holds the xmin horizon: no advance moves " +
            "past the events committed since it was prepared, and vacuum removes nothing newer.",
          fix:
            "Finish it from the transaction manager that prepared it, or by hand" +
            `${row.database ? ` in database ${row.database}` : ""}: COMMIT PREPARED ${quoted}; or ROLLBACK PREPARED ${quoted}; ` +
            "(which of the two is the application's decision).",
          holder: row.holder,
          ...about,
          user: row.user,
          name: gid,
        },
      ];
    }
    if (row.holder === "replication slot") {
      const slot = row.name ?? "";
      return [
        {
          severity: "error",
          code: "horizon_held",
          message:
            `Replication slot '${slot}' (${[row.state, row.database && `database ${row.database}`].filter(Boolean).join(", ")}) ` +
            `is not in use${ageMs === null ? "" : ` and has not been for ${formatDuration(ageMs)}`}, and keeps an xmin: ` +
            "vacuum cannot remove dead rows newer than it — corq's queue and keys churn on every ack — and the server " +
            "keeps WAL for it. The advance is not held.",
          fix:
            "Start the consumer that reads it again (a standby, a change-data-capture tool), or drop the slot if " +
            `nothing will: SELECT pg_drop_replication_slot('${slot.replaceAll("'", "''")}');`,
          holder: row.holder,
          ...about,
          name: slot,
        },
      ];
    }
    return []; // "hidden": hiddenSessionFindings
  });
}

/** Sessions of other roles whose age this role may not read: a holder among them would go unnamed. */
export function hiddenSessionFindings(rows: HeldHorizonRow[], role: string): DoctorFinding[] {
  const hidden = rows.filter((row) => row.holder === "hidden");
  if (hidden.length === 0) return [];
  const pids = hidden.map((row) => row.pid as number);
  const users = [...new Set(hidden.map((row) => row.user).filter(Boolean))].join(", ");
  return [
    {
      severity: "warning",
      code: "sessions_hidden",
      message:
        `${hidden.length} session(s) of other roles${users ? ` (${users})` : ""} hold a transaction or a snapshot ` +
        `(pids ${pids.join(", ")}), and role ${role} may not see since when: one of them open for long would hold the ` +
        "xmin horizon without being named here.",
      fix: `GRANT pg_read_all_stats TO ${role}; (or pg_monitor), or run the doctor as a role that has it.`,
      pids,
    },
  ];
}

/** corq's migrations against the code's: what runs must know every table it reads. */
export function schemaFindings(applied: string[] | null, known: string[]): DoctorFinding[] {
  if (applied === null) {
    return [
      {
        severity: "error",
        code: "schema_missing",
        message: "corq's schema is not in this database (there is no corq.migrations table): nothing of corq can run.",
        fix: "Apply it: DATABASE_URL=… npx corq migrate (or await corq.migrate()).",
      },
    ];
  }
  const findings: DoctorFinding[] = [];
  // an app's own migrations (app:<name>) are the app's business
  const unknown = applied.filter((tag) => !known.includes(tag) && !tag.startsWith("app:"));
  if (unknown.length > 0) {
    findings.push({
      severity: "error",
      code: "schema_too_new",
      message:
        `The database has corq migrations this version does not know (${unknown.join(", ")}): a newer corq migrated ` +
        "it, and this code runs against tables it does not understand (its migrate refuses).",
      fix:
        "Deploy the corq that made those migrations (or a newer one), or restore the database to this version's " +
        "schema; never roll a schema back by deploying older code.",
      migrations: unknown,
    });
  }
  const missing = known.filter((tag) => !applied.includes(tag));
  if (missing.length > 0) {
    findings.push({
      severity: "error",
      code: "schema_behind",
      message: `This corq's migrations ${missing.join(", ")} are not applied: what needs them fails.`,
      fix:
        "Apply them: DATABASE_URL=… npx corq migrate (it applies only what is missing, once, under a lock). Deploy " +
        "the schema first, then the code: the previous version runs on the new schema.",
      migrations: missing,
    });
  }
  return findings;
}

/** A subscription's advance and delivery, its dead keys, and whether any code still defines it. */
export function subscriptionFindings(
  row: SubscriptionHealthRow,
  { code, heldAdvance }: { code: ReadonlySet<string>; heldAdvance: boolean },
): DoctorFinding[] {
  const name = row.name;
  const quoted = JSON.stringify(name);
  const findings: DoctorFinding[] = [];
  if (row.advance_error !== null) {
    const failedAt = row.advance_error_at === null ? undefined : new Date(row.advance_error_at).toISOString();
    findings.push({
      severity: "error",
      code: "advance_failing",
      message:
        `Subscription ${quoted} cannot advance${failedAt ? ` (last tried ${failedAt})` : ""}: ${row.advance_error}. ` +
        "Its events stay in the log, not queued, until an advance works again; the other subscriptions go on.",
      fix:
        "Fix what the error names. Every advance (the cron, an append's kick, serve, corq.advance()) tries again by " +
        "itself and clears the error once one works.",
      subscription: name,
      error: row.advance_error,
      ...(failedAt ? { failedAt } : {}),
    });
  } else if (row.unadvanced_ms !== null && Number(row.unadvanced_ms) > BEHIND_OVER_MS) {
    const waitedMs = Number(row.unadvanced_ms);
    const rewinding = row.rewinding === "live";
    findings.push({
      severity: rewinding ? "warning" : "error",
      code: "advance_behind",
      message:
        `Subscription ${quoted} has events not advanced for ${formatDuration(waitedMs)}: the oldest past its ` +
        "watermark was appended that long ago, and nothing after it reaches the subscription's consumers. " +
        (heldAdvance
          ? "A transaction holds the xmin horizon (horizon_held): that is why."
          : rewinding
            ? "A rewind of it is under way, and its advance waits for the rewind to end."
            : "No advance has run since, or none got past the horizon."),
      fix: heldAdvance
        ? "End the transaction horizon_held names; the advance catches up by itself."
        : rewinding
          ? "Let the rewind finish (its chunks commit as they go); nothing to do unless it stops moving."
          : "Make sure something advances: on Workers the cron trigger (wrangler.toml [triggers] crons) and the " +
            "appends' kicks; npm run serve (startServe) by itself; with the library alone, call corq.advance() after " +
            "appends. POST /advance advances now.",
      subscription: name,
      waitedMs,
    });
  }
  if (!row.paused && row.ready_waited_ms !== null && Number(row.ready_waited_ms) > BEHIND_OVER_MS) {
    const waitedMs = Number(row.ready_waited_ms);
    const acked = Number(row.acked_recently);
    findings.push({
      severity: "warning",
      code: "delivery_behind",
      message:
        `Subscription ${quoted} has had a key ready for ${formatDuration(waitedMs)} with no consumer claiming it; ` +
        `it acked ${acked} event(s) over the last 5 minutes. ` +
        (acked === 0
          ? "No consumer is running for it."
          : "Its consumers are at work, but slower than the events that come in."),
      fix:
        acked === 0
          ? "Start consumers: on Workers the cron and the appends' kicks start them through the SELF service " +
            "binding (CORQ_CONCURRENCY caps them); npm run serve runs them by itself; with the library, call " +
            `corq.drain(${quoted}). POST /dispatch starts them now.`
          : "Give it more consumers (CORQ_CONCURRENCY on Workers, keysPerClaim, batchSize), or make its handler or " +
            "receiver faster.",
      subscription: name,
      waitedMs,
      ackedLast5Min: acked,
    });
  }
  if (row.dead > 0) {
    findings.push({
      severity: "warning",
      code: "dead_keys",
      message:
        `Subscription ${quoted} has ${row.dead} dead key(s): each failed maxAttempts times and holds its events, in ` +
        "order, until it is released (the other keys flow on). Retention keeps their events meanwhile.",
      fix:
        `See why: corq dead-letters ${name} (GET /dead-letters?subscription=${encodeURIComponent(name)}). Then, once ` +
        `the cause is fixed, corq retry ${name} [key] runs the failed event again; corq skip ${name} [key] drops it ` +
        "and goes on.",
      subscription: name,
      deadKeys: row.dead,
    });
  }
  if (row.delayed_keys > 0) {
    const delayedUntil = row.delayed_until === null ? undefined : new Date(row.delayed_until).toISOString();
    const maxDelayMs = Number(row.max_delay_ms);
    findings.push({
      severity: "warning",
      code: "delayed_keys",
      message:
        `Subscription ${quoted} has ${row.delayed_keys} key(s) held by a delayed event (deliverAt / delayMs) more than ` +
        `an hour ahead${delayedUntil ? `, the furthest until ${delayedUntil}` : ""}: each key's later events wait ` +
        "behind it, with no failure and no dead letter. A key reachable through several stream prefixes can be " +
        "delayed by a producer of any of them, up to the subscription's maxDelayMs " +
        `(${formatDuration(maxDelayMs)}).`,
      fix:
        `See which keys and until when: GET /subscriptions/${encodeURIComponent(name)}/keys?status=backoff (their ` +
        "reason names the delayed event). If such delays are not expected, lower maxDelayMs for the subscription " +
        "(it caps events advanced from then on) and find the producer: the delayed events' streams say whose token " +
        "appended them.",
      subscription: name,
      delayedKeys: row.delayed_keys,
      ...(delayedUntil ? { delayedUntil } : {}),
      maxDelayMs,
    });
  }
  if (row.kind === "code" && !code.has(name)) {
    findings.push({
      severity: "warning",
      code: "subscription_orphaned",
      message:
        `Code subscription ${quoted} is not defined by the instance that answers: its code is gone (or lives in ` +
        "another deployment). If nothing runs it, nothing consumes its queue, which grows with every matching " +
        "event, and it holds retention back.",
      fix:
        "Deploy the code that defines it again, or delete it: DELETE /subscriptions/" +
        `${encodeURIComponent(name)} (corq.deleteSubscription(${quoted})) removes it with its queue and keys.`,
      subscription: name,
    });
  }
  return findings;
}

/** Autovacuum on, and keeping up with the dead rows of corq's tables (every ack makes some). */
export function vacuumFindings(
  tables: TableVacuumRow[],
  server: ServerStateRow,
  { horizonHeld }: { horizonHeld: boolean },
): DoctorFinding[] {
  const findings: DoctorFinding[] = [];
  if (!server.autovacuum || !server.track_counts) {
    findings.push({
      severity: "error",
      code: "autovacuum_off",
      message:
        `${server.autovacuum ? "track_counts is off, and autovacuum needs it" : "Autovacuum is off on this server"}: ` +
        "nothing removes the dead rows every ack leaves in corq's queue and keys tables, so they grow without bound " +
        "and claims slow down.",
      fix:
        "Turn it on: ALTER SYSTEM SET autovacuum = on; ALTER SYSTEM SET track_counts = on; SELECT pg_reload_conf(); " +
        "— or VACUUM corq's tables from a scheduler every minute.",
      table: null,
    });
  }
  for (const row of tables) {
    const table = `corq.${row.table}`;
    if (row.autovacuum_disabled) {
      findings.push({
        severity: "error",
        code: "autovacuum_off",
        message: `Autovacuum is switched off for ${table} (autovacuum_enabled): its dead rows are never removed.`,
        fix: `ALTER TABLE ${table} RESET (autovacuum_enabled);`,
        table: row.table,
      });
    }
    const dead = Number(row.dead);
    const live = Number(row.live);
    const quietMs = row.vacuumed_ms === null ? null : Number(row.vacuumed_ms);
    if (dead < VACUUM_DEAD_ROWS || dead <= live || (quietMs !== null && quietMs <= VACUUM_QUIET_MS)) continue;
    findings.push({
      severity: "warning",
      code: "vacuum_behind",
      message:
        `${table} has ${dead} dead row versions beside ${live} live ones, and vacuum has not run on it ` +
        `${quietMs === null ? "yet" : `for ${formatDuration(quietMs)}`}. ` +
        (horizonHeld
          ? "The xmin horizon is held (horizon_held): vacuum cannot remove them until that ends."
          : "Autovacuum visits each database once per autovacuum_naptime (a minute by default): it is behind, or blocked."),
      fix: horizonHeld
        ? "End what holds the horizon (horizon_held); autovacuum then catches up by itself."
        : `VACUUM (VERBOSE) ${table}; says what it removes and what it cannot. Check that autovacuum workers are not ` +
          "all busy (autovacuum_max_workers, pg_stat_progress_vacuum) and that no lock keeps them out (pg_locks).",
      table: row.table,
      deadRows: dead,
      liveRows: live,
      lastVacuum: row.last_vacuum === null ? null : new Date(row.last_vacuum).toISOString(),
    });
  }
  return findings;
}

/** Connections in use against what the server allows: past it, new ones are refused (53300). */
export function connectionFindings(server: ServerStateRow): DoctorFinding[] {
  const { connections, max_connections: max } = server;
  const share = max > 0 ? connections / max : 1;
  if (share < CONNECTIONS_WARNING) return [];
  return [
    {
      severity: share >= CONNECTIONS_ERROR ? "error" : "warning",
      code: "connections_near_limit",
      message:
        `${connections} of the ${max} connections roles without superuser may open are in use ` +
        `(${Math.round(share * 100)} %): the next ones are refused (too many clients), and corq answers 503 meanwhile.`,
      fix:
        "See who holds them: SELECT usename, application_name, state, count(*) FROM pg_stat_activity GROUP BY 1, 2, 3 " +
        "ORDER BY 4 DESC; Then lower pool sizes (createCorq's poolSize: 10 per process by default), put a pooler in " +
        "front (PgBouncer, Neon's pooled endpoint), or raise max_connections.",
      connections,
      maxConnections: max,
    },
  ];
}

/** "45 s", "2 min 5 s", "3 h 10 min", "2 d 4 h": how long, for people. */
export function formatDuration(ms: number | null): string {
  if (ms === null) return "an unknown time";
  const s = Math.floor(ms / 1000);
  if (s < 1) return `${Math.round(ms)} ms`;
  if (s < 60) return `${s} s`;
  const [d, h, m] = [Math.floor(s / 86_400), Math.floor(s / 3600) % 24, Math.floor(s / 60) % 60];
  if (d > 0) return h > 0 ? `${d} d ${h} h` : `${d} d`;
  if (h > 0) return m > 0 ? `${h} h ${m} min` : `${h} h`;
  return s % 60 > 0 ? `${m} min ${s % 60} s` : `${m} min`;
}
