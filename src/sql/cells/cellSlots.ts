import { sql, type SQL } from "drizzle-orm";
import { cellSlots } from "../../db/schema.js";

// A cell's rows of the slots it holds (src/db/schema/cells.ts), as moves and the directory's
// first assignment write them. A routed append checks its row (appendEvents' `fence`).

export interface CellSlotRow {
  slot: number;
  epoch: number;
  state: "owned" | "fenced";
}

/** Slots this cell holds from now on at their epochs; a row already there at a newer epoch stays. */
export function holdSlots(rows: { slot: number; epoch: number }[]): SQL {
  return sql`INSERT INTO ${cellSlots} (slot, epoch, state)
    SELECT slot, epoch, 'owned' FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS t(slot int, epoch int)
    ORDER BY slot
    ON CONFLICT (slot) DO UPDATE SET epoch = excluded.epoch, state = 'owned', updated_at = now()
    WHERE ${cellSlots}.epoch < excluded.epoch`;
}

/**
 * The fence of a move: appends to the slot here wait for this UPDATE (the rows they lock FOR
 * SHARE) and write nothing after it. Waits for the appends in flight. → the row, fenced, or none
 * (the cell does not hold the slot at that epoch).
 */
export function fenceSlot(slot: number, epoch: number): SQL {
  return sql`UPDATE ${cellSlots} SET state = 'fenced', updated_at = now()
    WHERE slot = ${slot} AND epoch = ${epoch} RETURNING slot, epoch, state`;
}

/** A rolled-back move: appends go on here. */
export function unfenceSlot(slot: number, epoch: number): SQL {
  return sql`UPDATE ${cellSlots} SET state = 'owned', updated_at = now()
    WHERE slot = ${slot} AND epoch = ${epoch} RETURNING slot`;
}

/** This cell gives the slot up (after a move's switch) or never took it (a rolled-back move's target). */
export function dropSlot(slot: number, epoch: number): SQL {
  return sql`DELETE FROM ${cellSlots} WHERE slot = ${slot} AND epoch <= ${epoch}`;
}

/** Whether this cell holds `slot` at `epoch` (owned or fenced: its data is here): a routed read's check. */
export function holdsSlot(slot: number, epoch: number): SQL {
  return sql`SELECT EXISTS (SELECT FROM ${cellSlots} WHERE slot = ${slot} AND epoch = ${epoch}) AS holds`;
}
