import { sql, type SQL } from "drizzle-orm";
import { events, subscriptions } from "../../db/schema.js";
import { rewindState } from "../advance/advanceSubscription.js";
import { lockedNow } from "../common/clock.js";

// A rewind is a series of statements that each commit (src/rewind.ts), never one transaction:
// any transaction that holds an xid holds the cluster's xmin horizon, and with it every
// subscription's advance (docs/architecture.md, invariant 1).
//   beginRewind     marks the subscription as rewinding (its own advance waits from now on),
//                   the cursor just before the event rewound to;
//   stageChunk      the next `limit` events of the range after the cursor, in log order: those
//                   the subscription takes, with their keys, into rewind_staged; the cursor
//                   moved past them, and cleared once the range is read (a key function's
//                   subscription: readStageChunk, keys computed in JS, writeStageChunk);
//   requeueChunk    the next `limit` staged events in (key, log) order queued again;
//   finishRewind    the mark cleared: the subscription advances again.
// The range ends at the watermark, which stands still while the subscription is rewinding;
// and no advance numbers the keys' events between two chunks — so each key's replay is in
// log order and ends exactly where the key's later events begin. Staged, the requeue writes a
// key's row once (twice where a chunk ends inside its events), however many chunks of the log
// its events are spread over: a chunk of the log can touch as many keys as it has events.
// Here: the rewind's mark (begin, take over, finish) and its lease; the chunks' statements are in
// rewindStage.ts (stage) and rewindRequeue.ts (requeue).

/** The lease's end, `ms` from the database clock. */
export const leaseEnd = (ms: number) => sql`${lockedNow} + make_interval(secs => ${ms}::float8 / 1000)`;

export interface BeginRewindRow {
  id: number;
  key: string;
  /** The tx of the event at `to` (null: there is no such event; nothing began). */
  from_tx: string | null;
  /** This rewind began (else another one is under way: `rewinding` says how it is doing). */
  begun: boolean;
  rewinding: "live" | "abandoned" | null;
}

/**
 * Begins a rewind of the subscription named `subscription` from the event at position `to`
 * (inclusive) or the beginning, held by `token` for `leaseMs` — unless another rewind of it is
 * under way, or it is keyed by a function and the caller has none (`functionKey` false). The
 * row lock waits for an advance in progress: the chunks after it see what that advance enqueued.
 */
export function beginRewind(options: {
  subscription: string;
  to: number | "beginning";
  key: string | undefined;
  token: string;
  leaseMs: number;
  functionKey: boolean;
}): SQL {
  const { subscription, to, key, token, leaseMs, functionKey } = options;
  const position = to === "beginning" ? 0 : to;
  return sql`
    WITH target AS (
      SELECT s.id, s.key, s.rewind_token, s.rewind_until,
        ${to === "beginning" ? sql`'0'` : sql`(SELECT e.tx::text FROM ${events} e WHERE e.position = ${to})`} AS from_tx
      FROM ${subscriptions} s WHERE s.name = ${subscription}
    ),
    begun AS (
      -- the cursor is exclusive: (tx, position - 1) is just before (tx, position) in log order
      UPDATE ${subscriptions} s SET rewinds = s.rewinds + 1, rewind_token = ${token}::uuid,
        rewind_until = ${leaseEnd(leaseMs)}, rewind_from_tx = t.from_tx::xid8, rewind_from_position = ${position},
        rewind_cursor_tx = t.from_tx::xid8, rewind_cursor_position = ${position - 1}, rewind_key = ${key ?? null}::text
      FROM target t
      WHERE s.id = t.id AND t.from_tx IS NOT NULL AND s.rewind_token IS NULL
        AND (s.key <> 'function' OR ${functionKey})
      RETURNING s.id, s.key
    )
    SELECT t.id, coalesce(b.key, t.key) AS key, t.from_tx, b.id IS NOT NULL AS begun, ${rewindState(sql`t`)} AS rewinding
    FROM target t LEFT JOIN begun b ON true`;
}

export interface TakeOverRow {
  key: string;
  rewind_key: string | null;
  /** The range is still being staged (else: being requeued). */
  staging: boolean;
}

/**
 * Takes over a rewind whose lease is over (its holder crashed or stalled): `token` holds it
 * from now on and finishes it where it stopped. None where the subscription is keyed by a
 * function the caller does not have.
 */
export function takeOverRewind(options: {
  subscriptionId: number;
  token: string;
  leaseMs: number;
  functionKey: boolean;
}): SQL {
  const { subscriptionId, token, leaseMs, functionKey } = options;
  return sql`
    UPDATE ${subscriptions} SET rewind_token = ${token}::uuid, rewind_until = ${leaseEnd(leaseMs)}
    WHERE id = ${subscriptionId} AND rewind_token IS NOT NULL AND rewind_until < ${lockedNow}
      AND (key <> 'function' OR ${functionKey})
    RETURNING key, rewind_key, rewind_cursor_tx IS NOT NULL AS staging`;
}

/** Ends the rewind `token` holds: the subscription advances again. */
export function finishRewind(subscriptionId: number, token: string): SQL {
  return sql`
    UPDATE ${subscriptions} SET rewind_token = NULL, rewind_until = NULL, rewind_from_tx = NULL,
      rewind_from_position = NULL, rewind_cursor_tx = NULL, rewind_cursor_position = NULL, rewind_key = NULL
    WHERE id = ${subscriptionId} AND rewind_token = ${token}::uuid
    RETURNING id`;
}
