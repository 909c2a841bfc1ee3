// The directory as a router holds it: slot → cell and epoch, read once and again whenever a cell
// refuses a routed write (`wrong_cell`: the slot moved) — never trusted for a write by itself,
// since every routed write checks the epoch in its own transaction (appendEvents' fence).
import type { Executor } from "../db/executor.js";
import { CorqError } from "../errors.js";
import { listSlots, type SlotRow } from "../sql/cells/directory.js";
import type { StreamPlace } from "../types/cells.js";
import { slotOf } from "./slots.js";

export interface Router {
  place(stream: string): Promise<StreamPlace>;
  placeSlot(slot: number): Promise<SlotRow>;
  slots(): Promise<SlotRow[]>;
  /** Reads the directory again at the next place(). */
  forget(): void;
}

export function createRouter(directory: () => Promise<Executor>, tenantOf: (stream: string) => string): Router {
  let table: Promise<SlotRow[]> | undefined;
  const load = () => {
    table ??= directory()
      .then((db) => db.run<SlotRow>(listSlots(), { repeatable: true }))
      .then((rows) => {
        if (rows.length === 0)
          throw new CorqError(
            "invalid_config",
            "the cells' directory has no slots: run migrate() (corq cells migrate) first",
          );
        return rows;
      });
    // a failed read is not kept: the next call reads again
    table.catch(() => {
      table = undefined;
    });
    return table;
  };
  const placeSlot = async (slot: number) => {
    const rows = await load();
    const row = rows[slot];
    if (!row) throw new CorqError("invalid_input", `slot ${slot} is not in the directory (0..${rows.length - 1})`);
    return row;
  };
  return {
    async place(stream) {
      const tenant = tenantOf(stream);
      if (typeof tenant !== "string")
        throw new CorqError(
          "invalid_config",
          `the tenant function returned ${typeof tenant} for "${stream}", not a string`,
        );
      const slot = slotOf(tenant, (await load()).length);
      const { cell, epoch } = await placeSlot(slot);
      return { stream, tenant, slot, cell, epoch };
    },
    placeSlot,
    slots: load,
    forget() {
      table = undefined;
    },
  };
}
