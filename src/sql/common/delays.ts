import { sql, type SQL } from "drizzle-orm";
import { queue } from "../../db/schema.js";

// Delayed events (deliverAt / delayMs, docs/flow-control.md): a key does not deliver its head
// event before that event's time, and its later events wait behind it. Kept in the key row's
// available_at wherever a key gets a new head (the advance of an idle key, an ack with more
// queued, a lease given back); the claim also stops each batch before a delayed row whose time
// has not come. Only queue rows with a deliver_at are in queue_delayed_idx: for keys without
// delays each check is one probe of an empty index range.

/**
 * Event `e`'s time (deliver_at) as a subscription with `maxDelayMs` queues it: no later than
 * maxDelayMs after its append (created_at), and null (no delay) kept null — never least(),
 * which ignores a null and would delay every event. Applied per subscription where an event is
 * queued (both advance paths, a rewind's requeue), never at the append: another subscription
 * may allow the longer delay. A key reachable through several stream prefixes (a JSON-path key)
 * can be delayed by a producer of any of them: this bounds how long (issue 47).
 */
export function cappedDeliverAt(e: SQL, maxDelayMs: SQL): SQL {
  const cap = sql`${e}.created_at + ${maxDelayMs} * interval '1 millisecond'`;
  return sql`CASE WHEN ${e}.deliver_at > ${cap} THEN ${cap} ELSE ${e}.deliver_at END`;
}

/**
 * The time the key's next queued row (the first with seq > `after`) may be delivered, when a
 * delayed row after `after` is still ahead of `at` — else null, so `greatest(at, …)` is `at`.
 * The EXISTS reads only delayed rows; the head (a primary-key probe) is read only when one is.
 */
export function heldUntil(where: { subscriptionId: SQL; key: SQL; after: SQL; at: SQL }): SQL {
  const { subscriptionId, key, after, at } = where;
  return sql`CASE WHEN EXISTS (
      SELECT 1 FROM ${queue} d WHERE d.subscription_id = ${subscriptionId} AND d.key = ${key}
        AND d.deliver_at > ${at} AND d.seq > ${after})
    THEN (SELECT h.deliver_at FROM ${queue} h WHERE h.subscription_id = ${subscriptionId} AND h.key = ${key}
            AND h.seq > ${after} ORDER BY h.seq LIMIT 1) END`;
}

/**
 * The seq of the key's first queued row after `after` whose time has not come at `at` (null:
 * none): a claim's batch stops before it, so no event after a delayed one is handed out early.
 */
export function firstHeldSeq(where: { subscriptionId: SQL; key: SQL; after: SQL; at: SQL }): SQL {
  const { subscriptionId, key, after, at } = where;
  return sql`(SELECT d.seq FROM ${queue} d WHERE d.subscription_id = ${subscriptionId} AND d.key = ${key}
      AND d.deliver_at > ${at} AND d.seq > ${after} ORDER BY d.seq LIMIT 1)`;
}
