import { sql, type SQL } from "drizzle-orm";
import { events, streams } from "../../db/schema.js";
import type { EventInput } from "../../types.js";
import { WAKE_CHANNEL } from "./notify.js";

export interface AppendRow {
  // null: nothing was written — the expected version did not hold, or the stream's last
  // event comes from a newer transaction than this one (see streamHead)
  version: number | null;
  positions: number[];
}

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
 */
export function appendEvents(
  stream: string,
  input: EventInput[],
  { expectedVersion, notify }: { expectedVersion?: number; notify?: boolean } = {},
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
  return sql`
    WITH locked AS (SELECT pg_advisory_xact_lock(hashtextextended(${stream}, ${APPENDING}))),
    claim AS (${claim}),
    input AS (
      SELECT e, ord FROM jsonb_array_elements(${JSON.stringify(input)}::jsonb) WITH ORDINALITY AS t(e, ord)
    ),
    inserted AS (
      INSERT INTO ${events} (stream, version, name, data, meta)
      SELECT ${stream}, claim.version - ${n} + input.ord::int, input.e->>'name', input.e->'data',
             coalesce(input.e->'meta', '{}'::jsonb)
      FROM claim, input
      ORDER BY input.ord
      RETURNING position, version
    )
    SELECT (SELECT version FROM claim) AS version,
           coalesce((SELECT json_agg(position ORDER BY version) FROM inserted), '[]'::json) AS positions
           ${notify ? sql`, (SELECT pg_notify(${WAKE_CHANNEL}, 'append') FROM claim) AS notified` : sql``}`;
}

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
