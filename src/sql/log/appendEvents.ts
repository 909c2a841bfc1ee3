import { sql, type SQL } from "drizzle-orm";
import { cellSlots, events, idempotencyKeys, streams } from "../../db/schema.js";
import type { EventInput } from "../../types.js";
import { WAKE_CHANNEL } from "./notify.js";

export interface AppendRow {
  // null: nothing was written — the expected version did not hold, or the stream's last
  // event comes from a newer transaction than this one (see streamHead), or (idempotent) the
  // key was used before or is in flight
  version: number | null;
  positions: number[];
  /** Idempotent appends only: false when another append with the key was in flight. */
  free?: boolean;
  /** Idempotent appends only: what an earlier append with the key answered, if it is within the window. */
  prior_version?: number | null;
  prior_positions?: number[] | null;
  /** Whether that earlier append was sent the same events and expectedVersion. */
  prior_same?: boolean | null;
  /** Routed appends only (`fence`): the cell's row of the slot as the append found it. */
  fence_epoch?: number | null;
  fence_state?: string | null;
}

/** Where a routed append's router sent it (src/cells/): the slot of its tenant, at the directory's epoch. */
export interface Fence {
  slot: number;
  epoch: number;
}

/** An append's idempotency key, with the fingerprint of what it was sent. */
export interface Idempotency {
  /**
   * Whose key it is: only an append of the same scope replays the key's answer, is refused by it
   * or waits for it in flight. '' for the library's own appends (and rows from before scopes);
   * the HTTP API's are named by src/http/idempotencyScope.ts.
   */
  scope: string;
  key: string;
  /** The events and expectedVersion as sent, as JSON text: its SHA-256 is the fingerprint. */
  sent: string;
  /** How long a key answers with its first append (CORQ_IDEMPOTENCY_TTL_MS). */
  ttlMs: number;
}

// Seed of the advisory lock "an append of <scope> with idempotency key <key> to <stream> is in
// flight": taken with a try, so a second append with the key answers 409 at once instead of
// waiting behind the first (for an outbox append, until the caller's transaction ends). Keyed by
// the three, as the key's row is: another token's append with the key, or the key on another
// stream, is not held back. (Newline-separated: a scope and a key have none, so no two triples
// make the same text.)
export const IDEMPOTENT = 736_420_200;

// The appending transaction may not be older than the one of the stream's last event: the
// log is read in (tx, position) order, so its events would sort before versions committed
// earlier (an outbox transaction that took its id before another client appended).
const notOlder = (lastTx: SQL, current: SQL = sql`pg_current_xact_id()`) =>
  sql`(${lastTx} IS NULL OR ${lastTx} <= ${current})`;

// Seed of the advisory lock "appending to stream <name>": a 64-bit hash of the name (one bigint
// key: a space of its own beside the advancer's two-int4 locks). An append takes it BEFORE its
// transaction takes an id (an advisory lock needs none; a row lock or a write does), so an
// append in a transaction of its own gets an id newer than every earlier append to the stream:
// never older than the stream's last. Without it, the id was taken while the statement read
// its input, before it waited for the stream's row, and a newer transaction could take the row
// first: 901 of 4,000 appends by 40 concurrent clients to 2 streams were refused
// (order_conflict). An outbox transaction that took its id before still can be (the check's
// job). (An expectedVersion append can still come back empty on a stale snapshot: its
// statement's snapshot predates the wait. corq.append runs it once more then.)
export const APPENDING = 736_420_199;

/**
 * One statement: move the stream's version (the row lock serialises appends to one stream,
 * and the WHERE is the optimistic-concurrency check), then insert the events in input order
 * (WITH ORDINALITY … ORDER BY ord: positions follow the input, docs/architecture.md invariant 5).
 * `expectedVersion`: undefined = any, -1 = the stream must not exist, n = its version is n.
 * Nothing is written when the check fails; streamHead then says why.
 * `notify`: the statement also NOTIFYs the wake channel (notify.ts) when it wrote, delivered
 * when the caller's transaction commits (the outbox: corq.append with `tx`); Postgres folds
 * identical ones of one transaction into one. An append in a transaction of its own NOTIFYs
 * after its commit instead (CorqOptions.notify): a NOTIFYing transaction holds a global lock
 * through its WAL flush.
 * `traceContext`: the W3C trace context every event of this append keeps (src/tracing.ts); null
 * (a parameter either way: one statement text) when the append has none.
 */
export function appendEvents(
  stream: string,
  input: EventInput[],
  {
    expectedVersion,
    notify,
    idempotency,
    traceContext = null,
    fence,
  }: {
    expectedVersion?: number;
    notify?: boolean;
    idempotency?: Idempotency;
    traceContext?: string | null;
    fence?: Fence;
  } = {},
): SQL {
  const n = input.length;
  // the stream's row is written only FROM `locked` (below): the transaction id is taken after
  // the stream's turn came (see APPENDING)
  const claim =
    expectedVersion === undefined
      ? sql`INSERT INTO ${streams} AS s (stream, version, last_tx) SELECT ${stream}, ${n - 1}, pg_current_xact_id() FROM locked
            ON CONFLICT (stream) DO UPDATE SET version = s.version + ${n}, last_tx = pg_current_xact_id()
            WHERE ${notOlder(sql`s.last_tx`)}
            RETURNING version`
      : expectedVersion === -1
        ? sql`INSERT INTO ${streams} (stream, version, last_tx) SELECT ${stream}, ${n - 1}, pg_current_xact_id() FROM locked
              ON CONFLICT (stream) DO NOTHING
              RETURNING version`
        : // the id through `locked` in the WHERE too: the planner scans streams before the CTE,
          // and a bare pg_current_xact_id() there would take the id before the lock
          sql`UPDATE ${streams} SET version = version + ${n}, last_tx = pg_current_xact_id() FROM locked
              WHERE stream = ${stream} AND version = ${expectedVersion}
                AND ${notOlder(sql`last_tx`, sql`(SELECT pg_current_xact_id() FROM locked)`)}
              RETURNING version`;
  const fingerprint = (sent: string) => sql`encode(sha256(convert_to(${sent}, 'UTF8')), 'hex')`;
  const window = (ttlMs: number) => sql`now() - ${ttlMs} * interval '1 millisecond'`;
  // Idempotent: the stream is locked (and anything written) only when no append with the key is
  // in flight (the try-lock) and none within the window is visible; the key's row commits with
  // the events. A row the snapshot could not see (committed after the statement began) makes
  // the row's insert write nothing: the statement then fails (corq.idempotency_race) rather
  // than keep the events twice, and the caller runs it again.
  // Routed (cells): the cell's slot row, locked FOR SHARE once the stream's turn came (a row lock
  // takes the transaction id: see APPENDING). A move's fence (an UPDATE of the row) waits for the
  // appends in flight, and every later one sees the row as the move left it (a row lock reads its
  // latest version, not the statement's snapshot). Nothing is written unless this cell holds the
  // slot at the router's epoch and no move is taking it away.
  const streamLocked = fence ? sql`stream_locked` : sql`locked`;
  const fenced = fence
    ? sql`,
      fence AS (SELECT epoch, state FROM ${cellSlots} c, stream_locked WHERE slot = ${fence.slot} FOR SHARE OF c),
      locked AS (SELECT FROM fence WHERE epoch = ${fence.epoch} AND state = 'owned')`
    : sql``;
  const guard = idempotency
    ? sql`free AS (
        SELECT pg_try_advisory_xact_lock(hashtextextended(${idempotency.scope} || chr(10) || ${stream} || chr(10) || ${idempotency.key}, ${IDEMPOTENT})) AS free
      ),
      prior AS (
        SELECT version, positions, fingerprint = ${fingerprint(idempotency.sent)} AS same
        FROM ${idempotencyKeys}
        WHERE scope = ${idempotency.scope} AND stream = ${stream} AND key = ${idempotency.key}
          AND created_at > ${window(idempotency.ttlMs)}
      ),
      ${streamLocked} AS (
        SELECT pg_advisory_xact_lock(hashtextextended(${stream}, ${APPENDING})) FROM free
        WHERE free AND NOT EXISTS (SELECT FROM prior)
      )${fenced},`
    : sql`${streamLocked} AS (SELECT pg_advisory_xact_lock(hashtextextended(${stream}, ${APPENDING})))${fenced},`;
  const record = idempotency
    ? sql`,
      recorded AS (
        INSERT INTO ${idempotencyKeys} AS k (scope, stream, key, fingerprint, version, positions)
        SELECT ${idempotency.scope}, ${stream}, ${idempotency.key}, ${fingerprint(idempotency.sent)}, claim.version,
               coalesce((SELECT jsonb_agg(position ORDER BY version) FROM inserted), '[]'::jsonb)
        FROM claim
        -- a row past the window is the key's to take again
        ON CONFLICT (scope, stream, key) DO UPDATE SET fingerprint = excluded.fingerprint, version = excluded.version,
          positions = excluded.positions, created_at = now()
        WHERE k.created_at <= ${window(idempotency.ttlMs)}
        RETURNING 1
      )`
    : sql``;
  const answer = idempotency
    ? sql`, (SELECT free FROM free) AS free, (SELECT version FROM prior) AS prior_version,
           (SELECT positions FROM prior) AS prior_positions, (SELECT same FROM prior) AS prior_same,
           CASE WHEN EXISTS (SELECT FROM claim) AND NOT EXISTS (SELECT FROM recorded)
             THEN corq.idempotency_race() END AS race`
    : sql``;
  // deliver_at: delayMs from the statement's start on the database clock (one clock for every
  // consumer); deliverAt as given (ISO 8601 with its offset, checked by parseEvents)
  return sql`
    WITH ${guard}
    claim AS (${claim}),
    input AS (
      SELECT e, ord FROM jsonb_array_elements(${JSON.stringify(input)}::jsonb) WITH ORDINALITY AS t(e, ord)
    ),
    inserted AS (
      INSERT INTO ${events} (stream, version, name, data, meta, deliver_at, trace_context)
      SELECT ${stream}, claim.version - ${n} + input.ord::int, input.e->>'name', input.e->'data',
             coalesce(input.e->'meta', '{}'::jsonb),
             CASE WHEN input.e ? 'delayMs'
               THEN statement_timestamp() + (input.e->>'delayMs')::bigint * interval '1 millisecond'
               ELSE (input.e->>'deliverAt')::timestamptz END,
             ${traceContext}::text
      FROM claim, input
      ORDER BY input.ord
      RETURNING position, version
    )${record}
    SELECT (SELECT version FROM claim) AS version,
           coalesce((SELECT json_agg(position ORDER BY version) FROM inserted), '[]'::json) AS positions
           ${notify ? sql`, (SELECT pg_notify(${WAKE_CHANNEL}, 'append') FROM claim) AS notified` : sql``}
           ${answer}
           ${fence ? fenceAnswer(fence.slot) : sql``}`;
}

// The slot row as the append found it: locked (`fence`) when the append took the stream's turn;
// read plainly when it did not (an idempotent replay or a key in flight: nothing is written, and
// the answer is the same in either cell while a move copies the key's row).
const fenceAnswer = (slot: number) => sql`,
  coalesce((SELECT epoch FROM fence), (SELECT epoch FROM ${cellSlots} WHERE slot = ${slot})) AS fence_epoch,
  coalesce((SELECT state FROM fence), (SELECT state FROM ${cellSlots} WHERE slot = ${slot})) AS fence_state`;

export interface StreamHeadRow {
  version: number;
}

/**
 * The stream's version, read after a refused append in a statement of its own: the append's
 * snapshot predates the append it waited for, so the version it saw may be stale. If the
 * expected version holds, the append was refused for order.
 */
export function streamHead(stream: string): SQL {
  return sql`SELECT version FROM ${streams} WHERE stream = ${stream}`;
}
