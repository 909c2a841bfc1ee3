// A cell's own record of the directory's slots it holds (docs/architecture.md, "Cells"). The
// directory (src/cells/directory.ts) says where a slot lives; this row is what a write in this
// cell checks, in its own transaction: an append for a slot this cell does not hold at the
// epoch its router read, or one being moved away (fenced), writes nothing. A deployment of one
// database has no rows here and never reads the table.
import { integer, text, timestamp } from "drizzle-orm/pg-core";
import { corqSchema } from "./corqSchema.js";

export const cellSlots = corqSchema.table("cell_slots", {
  slot: integer("slot").primaryKey(),
  /** The directory's epoch for the slot when this cell took it. */
  epoch: integer("epoch").notNull(),
  /** "owned": appends go on; "fenced": a move is taking the slot away (appends wait). */
  state: text("state").notNull(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
});
