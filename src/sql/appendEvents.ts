import { sql, type SQL } from "drizzle-orm";
import { events, streams } from "../db/schema.js";
import type { EventInput } from "../types.js";

export interface AppendRow {
  version: number | null; // null: the expected version did not hold, nothing was written
  current: number | null; // the stream's version as this statement saw it (for the error message)
  positions: number[];
}

/**
 * One statement: move the stream's version (the row lock serialises appends to one stream,
 * and the WHERE is the optimistic-concurrency check), then insert the events in input order
 * (WITH ORDINALITY … ORDER BY ord: positions follow the input, docs/design.md invariant 5).
 * `expectedVersion`: undefined = any, -1 = the stream must not exist, n = its version is n.
 */
export function appendEvents(stream: string, input: EventInput[], expectedVersion?: number): SQL {
  const n = input.length;
  const claim =
    expectedVersion === undefined
      ? sql`INSERT INTO ${streams} AS s (stream, version) VALUES (${stream}, ${n - 1})
            ON CONFLICT (stream) DO UPDATE SET version = s.version + ${n}
            RETURNING version`
      : expectedVersion === -1
        ? sql`INSERT INTO ${streams} (stream, version) VALUES (${stream}, ${n - 1})
              ON CONFLICT (stream) DO NOTHING
              RETURNING version`
        : sql`UPDATE ${streams} SET version = version + ${n}
              WHERE stream = ${stream} AND version = ${expectedVersion}
              RETURNING version`;
  return sql`
    WITH claim AS (${claim}),
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
           (SELECT version FROM ${streams} WHERE stream = ${stream}) AS current,
           coalesce((SELECT json_agg(position ORDER BY version) FROM inserted), '[]'::json) AS positions`;
}
