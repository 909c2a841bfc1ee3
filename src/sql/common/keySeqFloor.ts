import { sql, type SQL } from "drizzle-orm";
import { subscriptions } from "../../db/schema.js";

// Seqs are never reused (a receiver dedupes with "seq <= last seen"), also after a key's row is
// deleted: compaction (src/sql/housekeeping/compactIdleKeys.ts) raises its subscription's
// key_seq_floor to the highest seq of the rows it deletes, in the statement that deletes them,
// and every statement that creates a key row numbers it from the floor — the advance
// (enqueueAndMove: the floor its watermark UPDATE returns), the rewind's requeue chunks
// (the floor their lease UPDATE returns) and pauseKey (the subscription row it reads, locked FOR SHARE). The floor is per subscription, so a key that comes back may skip seqs (a
// gap), never repeat one.
//
// Read it only from the subscription row as locked, never with the statement's snapshot: a
// writer that waited for a compaction's lock on that row has a snapshot from before the
// compaction committed (invariant 6). Its old floor would restart the deleted key below the
// seqs it had. A row lock (FOR SHARE and stronger; not FOR KEY SHARE, which may keep the old
// row version) returns the row's latest version.

/** The floor of subscription `subscriptionId`, read from its row locked FOR SHARE: a scalar for a key row created now. */
export function seqFloor(subscriptionId: SQL | number): SQL {
  return sql`(SELECT key_seq_floor FROM ${subscriptions} WHERE id = ${subscriptionId} FOR SHARE)`;
}
