import { sql, type SQL } from "drizzle-orm";
import { consumerSlots, keys, subscriptions } from "../../db/schema.js";
import { lockedNow } from "../common/clock.js";
import { statusFilter } from "../inspect/listKeys.js";
import { newestAboveHorizon } from "../advance/eventsAboveHorizon.js";

export interface ConsumerPlanRow {
  /** a subscription with ready keys (and `ready`, their count up to `max` × keysPerClaim), or null */
  name: string | null;
  ready: number | null;
  /** the consumers its ready keys want: one per keysPerClaim of them, rounded up */
  consumers: number | null;
  /** a consumer slot claimed, or null */
  slot: number | null;
  /**
   * On a row of its own when committed events wait above the xmin horizon (no advance can take
   * them yet): the transaction of the newest of them, as text
   */
  waiting: string | null;
}

// Ready keys counted per subscription at most: enough for every slot's claims at the usual
// settings (8 × 16), a bounded range scan at the largest (1,000 slots × 256 keys would read
// 256,000 index entries per dispatch). The Node runner reads ready keys up to the same bound.
export const READY_COUNT_CAP = 10_000;

/**
 * What a dispatcher needs, in ONE statement: per consumable subscription (unpaused; push, or
 * code defined in `codeSubscriptions`) its ready keys — a paused key is never claimed, so it
 * does not count — counted up to `max` × `keysPerClaim` (at most READY_COUNT_CAP) by a range
 * scan of the ready index that stops there; and a consumer slot per `keysPerClaim` ready keys
 * of a subscription (rounded up: a consumer drains one subscription, and each of its claims
 * takes that many keys in one statement — one consumer per key would start consumers that find
 * their keys claimed by the first and end after one empty claim), up to `want`, among the
 * first `max` slots (CORQ_CONCURRENCY) that are free, each busy for `holdMs` — less the
 * `covered` slots the caller already holds for these keys. Concurrent dispatchers take
 * different slots (SKIP LOCKED), so together they never start more than `max` consumers. A
 * slot is free when released or when its holder's time is over (a consumer that crashed).
 */
export function claimConsumerSlots(options: {
  max: number;
  want: number;
  holdMs: number;
  codeSubscriptions: string[];
  /** keys a consumer claims per statement (CORQ_KEYS_PER_CLAIM); 1: a slot per ready key */
  keysPerClaim?: number;
  covered?: number;
}): SQL {
  const { max, want, holdMs, codeSubscriptions, keysPerClaim = 1, covered = 0 } = options;
  const countUpTo = Math.min(max * keysPerClaim, READY_COUNT_CAP);
  return sql`
    WITH counted AS (
      SELECT s.name, (SELECT count(*) FROM (
          SELECT 1 FROM ${keys} k WHERE k.subscription_id = s.id AND ${statusFilter.ready} LIMIT ${countUpTo}
        ) r)::int AS ready
      FROM ${subscriptions} s
      WHERE NOT s.paused AND (s.kind = 'push' OR s.name = ANY(${sql.param(codeSubscriptions)}::text[]))
    ),
    ready AS (
      SELECT name, ready, (ready + ${keysPerClaim} - 1) / ${keysPerClaim} AS consumers FROM counted
    ),
    free AS (
      SELECT slot FROM ${consumerSlots}
      WHERE slot <= ${max} AND (busy_until IS NULL OR busy_until <= ${lockedNow})
      ORDER BY slot LIMIT (SELECT greatest(0, least(${want}, coalesce(sum(consumers), 0) - ${covered})) FROM ready)
      FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE ${consumerSlots} c SET busy_until = ${lockedNow} + ${holdMs} * interval '1 millisecond'
      FROM free WHERE c.slot = free.slot
      RETURNING c.slot
    )
    SELECT name, ready, consumers, NULL::int AS slot, NULL::text AS waiting FROM ready WHERE ready > 0
    UNION ALL SELECT NULL, NULL, NULL, slot, NULL FROM claimed
    UNION ALL SELECT NULL, NULL, NULL, NULL, w.tx FROM (SELECT ${newestAboveHorizon} AS tx) w WHERE w.tx IS NOT NULL`;
}

/** Frees a slot whose consumer is done. */
export function releaseConsumerSlot(slot: number): SQL {
  return sql`UPDATE ${consumerSlots} SET busy_until = NULL WHERE slot = ${slot}`;
}
