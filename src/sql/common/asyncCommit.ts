import { sql } from "drizzle-orm";

/**
 * A condition that is always true and turns off synchronous_commit for the statement's own
 * (implicit) transaction: its commit does not wait for the WAL flush. Used by every statement
 * that only moves queue state — advance, claim, ack, fail, release — never by append.
 * Why it is safe: if Postgres crashes, the last few hundred milliseconds of such commits may
 * be lost, and losing one only makes corq deliver again (a lost ack or claim = the batch comes
 * again; a lost advance = the events are enqueued again from the older watermark): the
 * at-least-once contract holds. Events themselves are always committed synchronously.
 * Why it matters: with one key per batch, every batch is a commit; waiting for each flush
 * bounded delivery to the disk's fsync rate (measured in bench/RESULTS.md).
 */
export const asyncCommit = sql`(SELECT set_config('synchronous_commit', 'off', true)) = 'off'`;
