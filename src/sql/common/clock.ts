import { sql } from "drizzle-orm";

/**
 * The database clock at the moment it is read — for leases, availability and fences.
 * `now()` is the start of the transaction: a statement that waited on a row lock (an ack
 * behind an advancer, say) longer than a lease would grant a lease that is already over,
 * and a second consumer would take the key while the first still runs it (docs/architecture.md,
 * invariant 6). Read it after the lock is granted: over the rows a FOR UPDATE CTE returned
 * (fencedKey), or in a CTE that runs after the statement's waits (the claim's pick). Not in
 * an UPDATE's own SET or WHERE where the fence matters: those are evaluated before waiting
 * for a row that another session only locked, and are not evaluated again afterwards.
 */
export const lockedNow = sql`clock_timestamp()`;

/**
 * How long this statement has run so far, in ms, on the server: last in a chunk's row, what the
 * chunk held the horizon for (src/chunkSizer.ts sizes the next one from it; a time taken by the
 * client would count the network too, and shrink chunks over a far database for nothing).
 */
export const elapsedMs = sql`(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::float8`;
