// One error base class for everything corq raises on purpose. `code` is stable (tests,
// clients and the HTTP layer match on it); `status` is the HTTP status it maps to.

export type CorqErrorCode =
  | "invalid_input"
  | "invalid_config"
  | "version_conflict"
  | "order_conflict"
  | "conflict"
  | "unknown_subscription"
  | "unknown_key"
  | "unknown_stream"
  | "unknown_token"
  | "unknown_alert"
  | "database_unavailable"
  | "schema_too_new"
  | "retained_away"
  | "idempotency_key_reused"
  | "idempotency_in_flight"
  | "slot_moving"
  | "wrong_cell";

/** Every code the library raises, with its HTTP status (docs/http-api.md "Errors" lists them: test/errorCodes.test.ts). */
export const statusByCode: Record<CorqErrorCode, number> = {
  invalid_input: 400,
  invalid_config: 400,
  version_conflict: 409,
  order_conflict: 409,
  conflict: 409,
  unknown_subscription: 404,
  unknown_key: 404,
  unknown_stream: 404,
  unknown_token: 404,
  unknown_alert: 404,
  database_unavailable: 503,
  schema_too_new: 500,
  retained_away: 409,
  idempotency_key_reused: 422,
  idempotency_in_flight: 409,
  slot_moving: 503,
  wrong_cell: 409,
};

export class CorqError extends Error {
  readonly code: CorqErrorCode;
  readonly status: number;
  readonly details?: unknown;
  /** Top-level members of the HTTP problem body (e.g. a conflict's currentVersion). */
  readonly extra?: Record<string, unknown>;

  constructor(
    code: CorqErrorCode,
    message: string,
    options: { details?: unknown; extra?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "CorqError";
    this.code = code;
    this.status = statusByCode[code];
    this.details = options.details;
    this.extra = options.extra;
  }
}

/** Coerce anything thrown into an Error, for messages and logs. */
export function toError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new Error(typeof thrown === "string" ? thrown : (JSON.stringify(thrown) ?? String(thrown)));
}

// Postgres SQLSTATE classes that mean "the database is not there right now", not "you sent
// something wrong": connection exceptions, admin shutdown, too many connections, and the
// like (https://www.postgresql.org/docs/current/errcodes-appendix.html).
// (28: the credentials were refused, 3D: no such database — a configuration error, but for the
// caller it is the same: no database right now)
const unavailableStates = /^(08|57P|53|28|3D)/;
// The drivers' own words for a connection that failed or was cut (node-postgres / Neon's
// WebSocket and HTTP paths: an HTTP answer other than a Postgres error reaches corq only as
// "Server error (HTTP status N)", an unreachable endpoint as "Error connecting to database").
// (Neon's proxy answers "couldn't connect to compute" while a suspended compute does not wake.)
const networkErrors =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|WebSocket|socket|Connection terminated|not queryable|Client was closed|timeout exceeded when trying to connect|Error connecting to database|fetch failed|Network connection lost|couldn't connect to compute/i;

// Neon's HTTP endpoint answering with a status and no Postgres error (its driver's words)
const httpAnswer = /Server error \(HTTP status (\d{3})\)/;

/**
 * A connection that could not be made, or died before anything was sent on it (src/db/executor.ts):
 * no statement of the caller's ran. Its `code` is the driver's (57P03 starting up, 53300…).
 */
export class ConnectFailed extends Error {
  readonly code: unknown;
  constructor(cause: unknown) {
    super(`no connection to the database: ${toError(cause).message}`, { cause });
    this.name = "ConnectFailed";
    this.code = (cause as { code?: unknown } | null)?.code;
  }
}

export function isDatabaseUnavailable(error: Error & { code?: unknown }): boolean {
  if (error instanceof CorqError) return error.code === "database_unavailable";
  if (error instanceof ConnectFailed) return true;
  return (
    (typeof error.code === "string" && unavailableStates.test(error.code)) ||
    networkErrors.test(error.message) ||
    httpAnswer.test(error.message)
  );
}

// The retryable part of the above: what the same statement, sent again on a new connection after
// a short wait, can get past — 08xxx connection exceptions, 57P01 admin_shutdown (a restart,
// pg_terminate_backend, a Neon compute suspend), 57P02 crash_shutdown, 57P03 cannot_connect_now
// (starting up), 53300 too_many_connections — the drivers' network errors, and Neon's HTTP
// endpoint answering 429 (its rate limit) or 5xx. Not 28xxx or 3D000: wrong credentials or a
// missing database stay so however often they are tried.
const transientStates = /^(08|57P0[123]$|53300$)/;
const transientHttp = /Server error \(HTTP status (429|50[0-4])\)/;

/**
 * Whether an error (a driver's, or the CorqError("database_unavailable") wrapping it) is worth
 * sending the statement again for on a new connection — where sending it again is safe whether or
 * not the first one committed (a fenced settlement, a claim, an advance: src/db/retries.ts).
 */
export function isTransient(thrown: unknown): boolean {
  const error = unwrapped(thrown);
  if (error instanceof CorqError) return false;
  if (error instanceof ConnectFailed) return true;
  return (
    (typeof error.code === "string" && transientStates.test(error.code)) ||
    networkErrors.test(error.message) ||
    transientHttp.test(error.message)
  );
}

// The errors that prove the statement did not commit, so ANY statement (an append too) may be sent
// again: Postgres answered it with an error that ended its transaction — 57P01/57P02/57P03 (a
// backend terminated or a server stopping or starting: the FATAL comes before the statement's
// ReadyForQuery, and a commit is never interrupted), 53300 (no connection slot), 08001/08004 (the
// connection was never made or was refused), 40001/40P01 (a serialization failure or deadlock:
// rolled back) — or the statement never left: no connection could be made, a client that had
// already died, Neon's proxy finding no compute to run it on. A connection that closed while the
// statement was out (ECONNRESET, "Connection terminated", 08006, an HTTP 5xx) proves nothing:
// the statement may have committed with only its answer lost.
const neverCommittedStates = /^(57P0[123]|53300|08001|08004|40001|40P01)$/;
const neverSent =
  /ECONNREFUSED|not queryable|timeout exceeded when trying to connect|couldn't connect to compute|Server error \(HTTP status 429\)/i;

/** Whether `thrown` proves its statement did not commit (sending it again cannot apply it twice). */
export function neverCommitted(thrown: unknown): boolean {
  const error = unwrapped(thrown);
  if (error instanceof CorqError) return false;
  if (error instanceof ConnectFailed) return true;
  return (typeof error.code === "string" && neverCommittedStates.test(error.code)) || neverSent.test(error.message);
}

/** The driver's error inside a CorqError("database_unavailable"), or the error itself. */
function unwrapped(thrown: unknown): Error & { code?: unknown } {
  const error = toError(thrown) as Error & { code?: unknown };
  if (error instanceof CorqError && error.code === "database_unavailable" && error.cause !== undefined)
    return unwrapped(error.cause);
  return error;
}

const httpStatusTexts: Record<string, string> = {
  429: "Too Many Requests: the endpoint's rate limit",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  507: "Insufficient Storage: Neon answers so for a request or result over its size limit",
};

/**
 * A driver error that means "no database right now" as the CorqError corq documents; others as
 * they are. Every status Neon's HTTP endpoint answers with (no Postgres error: 429, 5xx, 507…) is
 * such an error, its status in the message — never an unexplained 500.
 */
export function fromDriverError(thrown: unknown): unknown {
  if (thrown instanceof CorqError) return thrown;
  const error = toError(thrown);
  const status = httpAnswer.exec(error.message)?.[1];
  if (status !== undefined) {
    const text = httpStatusTexts[status];
    return new CorqError(
      "database_unavailable",
      `the database's HTTP endpoint answered HTTP ${status}${text ? ` (${text})` : ""}; try again`,
      { cause: thrown, extra: { upstreamStatus: Number(status) } },
    );
  }
  if (!isDatabaseUnavailable(error)) return thrown;
  return new CorqError("database_unavailable", "the database is unreachable; try again", { cause: thrown });
}

/**
 * A column the statement guarantees is set in this row (e.g. a claimed key's lease token): the
 * value, typed as present. A null here is a broken invariant of the SQL, not bad input: it
 * throws rather than let a null travel on as if it were a value.
 */
export function present<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw new Error(`corq: ${what} is missing from a row that must have it`);
  return value;
}
