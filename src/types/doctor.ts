// What `corq.doctor()`, `GET /doctor` and `corq doctor` answer (docs/operations.md, "Diagnosis: corq doctor").

/** Every finding the doctor can report; each is explained in docs/operations.md. */
export type DoctorCode =
  | "horizon_held"
  | "sessions_hidden"
  | "schema_missing"
  | "schema_behind"
  | "schema_too_new"
  | "advance_failing"
  | "advance_behind"
  | "delivery_behind"
  | "dead_keys"
  | "delayed_keys"
  | "subscription_orphaned"
  | "autovacuum_off"
  | "vacuum_behind"
  | "connections_near_limit"
  | "wake_ups_wait_for_cron";

/**
 * One thing that is wrong, and what to do about it. `error`: something corq needs stops or is
 * about to (`ok` is false, `corq doctor` exits 1); `warning`: worth a look, nothing stops.
 * Beside the four fields, a finding names what it is about in fields of its own.
 */
export interface DoctorFinding {
  severity: "error" | "warning";
  code: DoctorCode;
  message: string;
  fix: string;
  /** horizon_held: the backend holding the horizon (null: a prepared transaction or a slot nobody uses); sessions_hidden: one of them. */
  pid?: number | null;
  /** horizon_held: how long it has held the horizon, in ms (null: a slot on a Postgres that does not say since when). */
  ageMs?: number | null;
  /** horizon_held: what holds it. */
  holder?: "transaction" | "prepared transaction" | "replication slot";
  /** horizon_held: whether it stops the advance (it has a transaction id), or only vacuum. */
  holdsAdvance?: boolean;
  /** horizon_held (a transaction): its state in pg_stat_activity and the first line of its last query. */
  state?: string | null;
  query?: string | null;
  /** horizon_held: its database, role and application_name, where known. */
  database?: string | null;
  user?: string | null;
  application?: string | null;
  /** horizon_held: the prepared transaction's gid, or the replication slot's name. */
  name?: string;
  /** sessions_hidden: the sessions this role cannot see into. */
  pids?: number[];
  /** schema_*: the migrations concerned. */
  migrations?: string[];
  /** The subscription the finding is about. */
  subscription?: string;
  /** advance_failing: the last advance's error, and when it failed (ISO). */
  error?: string;
  failedAt?: string;
  /** dead_keys: how many. */
  deadKeys?: number;
  /** delayed_keys: how many keys a delayed event holds more than an hour, until when the last (ISO), and the cap. */
  delayedKeys?: number;
  delayedUntil?: string;
  maxDelayMs?: number;
  /** advance_behind: the oldest event not advanced; delivery_behind: the longest a ready key has waited (ms). */
  waitedMs?: number;
  /** delivery_behind: events acked over the last 5 minutes. */
  ackedLast5Min?: number;
  /** autovacuum_off, vacuum_behind: the table (in the corq schema), or null for the whole server. */
  table?: string | null;
  /** vacuum_behind: dead and live row versions, and the last vacuum (ISO; null: never). */
  deadRows?: number;
  liveRows?: number;
  lastVacuum?: string | null;
  /** connections_near_limit: client connections in use, and how many the server allows roles without superuser. */
  connections?: number;
  maxConnections?: number;
}

export interface DoctorReport {
  /** No finding is an error. */
  ok: boolean;
  /** Errors first, then warnings. */
  findings: DoctorFinding[];
}

export interface DoctorOptions {
  /**
   * How long a transaction, prepared transaction or replication slot may hold the xmin horizon
   * before it is a finding, in ms (default 60,000).
   */
  heldOverMs?: number;
}
