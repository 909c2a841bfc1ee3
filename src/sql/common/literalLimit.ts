import { sql, type SQL } from "drizzle-orm";

/**
 * A claim's `limit` written into the statement, not sent as a parameter: with it a parameter,
 * Postgres planned the claim of a subscription with a tenant afresh on every call (633 plans in
 * 625 calls, 5–6 ms each: a generic plan costed on a LIMIT it cannot see loses to each custom
 * one); as a number each connection keeps one plan per keysPerClaim (bench/fairnessProbe.ts).
 * Only ever a whole number ≥ 0, so nothing else can reach the SQL text.
 */
export const literalLimit = (limit: number) => sql.raw(String(Math.max(0, Math.trunc(limit))));

/**
 * A locking walk whose LIMIT the planner cannot evaluate (`limit - (SELECT count(*) FROM …)`,
 * known only once the parts before it ran), under a constant LIMIT `max` it can: Postgres plans
 * an unknown LIMIT as 10 % of the rows that match, and at 1M keys that estimate, multiplied
 * through the claim's joins, took its cost past `jit_above_cost` (5.8e9, JIT-compiled for seconds
 * on PostgreSQL 15; DESIGN invariant 12). The outer LIMIT bounds the estimate; rows are locked
 * only as they are pulled, so the walk still locks no more than the inner LIMIT lets through.
 */
export const atMost = (max: number, walk: SQL) => sql`SELECT * FROM (${walk}) bounded LIMIT ${literalLimit(max)}`;
