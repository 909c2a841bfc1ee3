import { sql, type SQL } from "drizzle-orm";
import { keys, subscriptions } from "../../db/schema.js";

/**
 * Per unpaused subscription: keys ready to claim, counted up to `cap` by range scans of the
 * partial ready index that stop at `cap`. (A count of the leased keys beside it, which nothing
 * read, walked every key in backoff behind them: 3,700 of the estimated cost per subscription
 * at 1M keys, past `jit_above_cost` at 30 subscriptions.)
 * Paused keys are never claimed, so they do not count (and the index leaves them out).
 * What a dispatcher needs to decide how many consumer invocations to start.
 * Each count reads the live keys, then the replaying ones: the index's second column,
 * `(last_seq < replay_seq)`, named as it is indexed (claimBatch.ts, pickKeys), so each read is
 * one range of the index bounded by available_at. Without it the range was bounded by the
 * subscription alone: a count that found fewer than `cap` ready keys went on through every
 * leased and backoff key behind them. In index order (ORDER BY available_at, which the walk has
 * for free): unordered, the planner read the ready keys with a Seq Scan (a guess that the first
 * `cap` rows of the heap will do) or a bitmap of every match, which cannot stop at `cap`.
 */
export function readyKeys(cap: number): SQL {
  return sql`
    SELECT s.name, s.kind, (SELECT count(*) FROM (
        (SELECT 1 FROM ${keys} k WHERE k.subscription_id = s.id AND (k.last_seq < k.replay_seq) IS FALSE
           AND k.available_at <= now() AND k.paused_at IS NULL ORDER BY k.available_at LIMIT ${cap})
        UNION ALL
        (SELECT 1 FROM ${keys} k WHERE k.subscription_id = s.id AND (k.last_seq < k.replay_seq) IS TRUE
           AND k.available_at <= now() AND k.paused_at IS NULL ORDER BY k.available_at LIMIT ${cap})
        LIMIT ${cap}) counted)::int AS ready
    FROM ${subscriptions} s
    WHERE NOT s.paused`;
}
