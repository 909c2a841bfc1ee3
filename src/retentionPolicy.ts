// The retention policy as callers give it (createCorq's option, setRetention, PUT /retention),
// validated here before anything is written.
import { z } from "zod";
import { streamPrefixes } from "./config.js";

/**
 * The longest maxAgeMs: 100 years. `now() - maxAgeMs` must stay a timestamp Postgres can hold,
 * and beyond a century "forever" (null) is what is meant.
 */
export const MAX_RETENTION_MS = 100 * 365 * 24 * 3_600_000;

export const retentionInput = z.strictObject({
  maxAgeMs: z
    .number()
    .int("must be a positive integer (milliseconds) or null")
    .min(1, "must be a positive integer (milliseconds) or null")
    .max(MAX_RETENTION_MS, `at most ${MAX_RETENTION_MS} (100 years); null keeps the log forever`)
    .nullable()
    .describe("remove events older than this many milliseconds; null (the default) keeps the log forever"),
  streams: streamPrefixes
    .nullable()
    .optional()
    .describe("only events of streams whose name starts with one of these prefixes; left out or null: every stream"),
});

/** A validated policy, as stored: streams deduplicated, null for every stream. */
export interface StoredPolicy {
  maxAgeMs: number | null;
  streams: string[] | null;
}

export function storedPolicy(input: z.output<typeof retentionInput>): StoredPolicy {
  return { maxAgeMs: input.maxAgeMs, streams: input.streams ? [...new Set(input.streams)] : null };
}
