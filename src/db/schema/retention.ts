// Retention: the policy with its sweep's state, and the events a sweep found still held.
import { sql } from "drizzle-orm";
import { bigint, check, integer, jsonb, text, timestamp } from "drizzle-orm/pg-core";
import { corqSchema, xid8 } from "./corqSchema.js";

/**
 * The retention policy, one row (src/sql/lifecycle/retention.ts): events older than max_age_ms
 * (null: kept forever), of streams with one of `streams` as prefix (null: every stream), that
 * every subscription has advanced past and no queue holds, are removed in chunks. `option` is
 * the library option (createCorq({ retention }), CORQ_RETENTION_*) last applied: an instance
 * whose option differs applies its own (a deploy changed it), a PUT stays until then.
 * The sweep's state: `swept_to` the next position it looks at, `held_after` where the re-check
 * of held events goes on; `horizon` is 1 + the highest position removed, (removed_tx,
 * removed_position) the last event removed in log order.
 */
export const retention = corqSchema.table(
  "retention",
  {
    id: integer("id").primaryKey().default(1),
    maxAgeMs: bigint("max_age_ms", { mode: "number" }),
    streams: text("streams").array(),
    option: jsonb("option"),
    sweptTo: bigint("swept_to", { mode: "number" }).notNull().default(0),
    heldAfter: bigint("held_after", { mode: "number" }).notNull().default(0),
    horizon: bigint("horizon", { mode: "number" }),
    removedTx: xid8("removed_tx"),
    removedPosition: bigint("removed_position", { mode: "number" }),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  () => [check("retention_one_row", sql`id = 1`)],
);

/**
 * Events a retention sweep passed that a queue still held (a backlog, a dead or paused key):
 * re-checked by later passes and removed once nothing holds them, without sweeping the log
 * below the cursor again.
 */
export const retentionHeld = corqSchema.table("retention_held", {
  position: bigint("position", { mode: "number" }).primaryKey(),
});
