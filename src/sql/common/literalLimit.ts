import { sql } from "drizzle-orm";

/**
 * A claim's `limit` written into the statement, not sent as a parameter: with it a parameter,
 * Postgres planned the claim of a subscription with a tenant afresh on every call (633 plans in
 * 625 calls, 5–6 ms each: a generic plan costed on a LIMIT it cannot see loses to each custom
 * one); as a number each connection keeps one plan per keysPerClaim (bench/fairnessProbe.ts).
 * Only ever a whole number ≥ 0, so nothing else can reach the SQL text.
 */
export const literalLimit = (limit: number) => sql.raw(String(Math.max(0, Math.trunc(limit))));
