import { sql, type SQL } from "drizzle-orm";
import { consumerSlots } from "../db/schema.js";
import { lockedNow } from "./clock.js";

/**
 * Claims up to `want` free consumer slots among the first `max` (CORQ_CONCURRENCY), each busy
 * for `holdMs`, in ONE statement: concurrent dispatchers take different slots (SKIP LOCKED),
 * so together they never start more than `max` consumers. A slot is free when released or
 * when its holder's time is over (a consumer that crashed).
 */
export function claimConsumerSlots(max: number, want: number, holdMs: number): SQL {
  return sql`
    WITH free AS (
      SELECT slot FROM ${consumerSlots}
      WHERE slot <= ${max} AND (busy_until IS NULL OR busy_until <= ${lockedNow})
      ORDER BY slot LIMIT ${want}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${consumerSlots} c SET busy_until = ${lockedNow} + ${holdMs} * interval '1 millisecond'
    FROM free WHERE c.slot = free.slot
    RETURNING c.slot`;
}

/** Frees a slot whose consumer is done. */
export function releaseConsumerSlot(slot: number): SQL {
  return sql`UPDATE ${consumerSlots} SET busy_until = NULL WHERE slot = ${slot}`;
}
