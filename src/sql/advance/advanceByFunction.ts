import { sql, type SQL } from "drizzle-orm";
import { events, subscriptions } from "../../db/schema.js";
import { eventColumns } from "../common/eventColumns.js";
import { enqueueAndMove, rewindState, streamTaken, valueAt } from "./advanceSubscription.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { cappedDeliverAt } from "../common/delays.js";

/**
 * Read half of advancing a subscription whose key is a JS function: the next `limit` events
 * past the watermark and below the xmin horizon, with the watermark they were read from
 * (the write half only applies if it is unchanged). Events the filters (event names, stream
 * prefixes) do not match come back with `matches` false, only to move the watermark past them:
 * the key function never runs on them. `rewinding`: the subscription is being rewound (no
 * advance until that ends; see advanceSubscription). `tenant_value`: the value the
 * subscription's tenant path names (read here: one definition of paths, valueAt).
 * `queued_deliver_at`: the event's time as this subscription queues it (its delay capped at
 * maxDelayMs, delays.ts), what the write half copies to its queue row.
 */
export function readAdvanceBatch(
  subscriptionId: number,
  { names, streams, limit }: { names: string[]; streams: string[] | null; limit: number },
): SQL {
  const named = names.includes("*") ? sql`true` : sql`e.name = ANY(${sql.param(names)}::text[])`;
  const taken = streams === null ? sql`true` : streamTaken(sql`e.stream`, sql`${sql.param(streams)}::text[]`);
  return sql`
    SELECT ${eventColumns}, ${named} AND ${taken} AS matches,
           s.watermark_tx::text AS watermark_tx, s.watermark_position, s.erase_epoch,
           ${rewindState(sql`s`)} AS rewinding,
           CASE WHEN s.tenant IS NOT NULL AND s.tenant <> 'function' THEN ${valueAt(sql`s.tenant`)} END AS tenant_value,
           ${cappedDeliverAt(sql`e`, sql`s.max_delay_ms`)} AS queued_deliver_at
    FROM ${subscriptions} s, ${events} e
    WHERE s.id = ${subscriptionId}
      -- the watermark as values (scalar subqueries, as advanceSubscription has it): only then is it
      -- a bound of the index scan. As a join filter the read walked the log from its start (an
      -- estimated 76,000 at 1M events, and a walk of all of them on every advance, caught up or not)
      AND (e.tx, e.position) > ((SELECT watermark_tx FROM ${subscriptions} WHERE id = ${subscriptionId}),
                                (SELECT watermark_position FROM ${subscriptions} WHERE id = ${subscriptionId}))
      AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.tx, e.position
    LIMIT ${limit}`;
}

export interface KeyedEvent {
  tx: string;
  position: number;
  /** the event's deliver_at as the subscription queues it (ISO 8601; readAdvanceBatch's queued_deliver_at) */
  deliver_at?: string | null;
  key: string | null; // null: the key function returned nothing, or an invalid key; counted as skipped
  invalid: string | null; // why the key was refused (the key rule, or the function threw)
  tenant?: string | null; // as storedTenant gives it (null or absent: no tenant)
}

/**
 * Write half: a compare-and-set on the watermark read by `readAdvanceBatch`, and on its
 * erase_epoch. If another advancer moved the watermark meanwhile, an erasure round (whose
 * events the read may have seen) ran, or a rewind began, the UPDATE matches nothing and
 * nothing is enqueued.
 */
export function writeAdvanceBatch(
  subscriptionId: number,
  {
    read,
    last,
    matched,
  }: {
    read: { tx: string; position: number; eraseEpoch: number };
    last: { tx: string; position: number };
    matched: KeyedEvent[];
  },
): SQL {
  return sql`
    WITH matched AS (
      SELECT t.tx::xid8 AS tx, t.position, t.key, t.invalid, t.deliver_at, t.tenant
      FROM jsonb_to_recordset(${JSON.stringify(matched)}::jsonb)
        AS t(tx text, position bigint, key text, invalid text, deliver_at timestamptz, tenant text)
    ),
    ${enqueueAndMove(
      sql`${subscriptionId}::int`,
      { tx: sql`${last.tx}::xid8`, position: sql`${last.position}::bigint` },
      sql`s.watermark_tx = ${read.tx}::xid8 AND s.watermark_position = ${read.position}
          AND s.erase_epoch = ${read.eraseEpoch} AND s.rewind_token IS NULL AND ${asyncCommit}`,
    )}
    SELECT (SELECT count(*) FROM moved)::int AS applied`;
}
