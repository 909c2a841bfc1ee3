// The Worker's knobs (src/http/env.ts) and their defaults, as docs/deploy.md lists them: a
// value that is missing, malformed or out of range is the default.
import { describe, expect, it } from "vitest";
import { settings } from "../src/http/env.js";

describe("the Worker's knobs", () => {
  it("default to what docs/deploy.md says", () => {
    expect(settings({})).toMatchObject({
      maxBodyBytes: 1_048_576, // CORQ_MAX_BODY_BYTES: 1 MiB
      concurrency: 8, // CORQ_CONCURRENCY
      dbDriver: "http", // CORQ_DB_DRIVER
      consumerBudgetMs: 10_000, // CORQ_CONSUMER_BUDGET_MS
      maxSubrequests: 50, // CORQ_MAX_SUBREQUESTS: Cloudflare's Free plan
      keysPerClaim: 4, // CORQ_KEYS_PER_CLAIM
      replayKeys: 1, // CORQ_REPLAY_KEYS: a quarter of the keys per claim, at least 1
      publicAppend: false, // CORQ_PUBLIC_APPEND
      local: false, // CORQ_LOCAL
      authFailureLimit: 10, // CORQ_AUTH_FAILURE_LIMIT
      authFailureWindowMs: 60_000, // CORQ_AUTH_FAILURE_WINDOW_S
      pushAllowPrivate: false, // CORQ_PUSH_ALLOW_PRIVATE
    });
  });

  it("takes valid values, up to each maximum (CORQ_CONCURRENCY at most 1,000)", () => {
    expect(
      settings({
        CORQ_MAX_BODY_BYTES: "40000",
        CORQ_CONCURRENCY: "1000",
        CORQ_DB_DRIVER: "websocket",
        CORQ_CONSUMER_BUDGET_MS: "2000",
        CORQ_MAX_SUBREQUESTS: "10000",
        CORQ_KEYS_PER_CLAIM: "8",
        CORQ_REPLAY_KEYS: "3",
        CORQ_PUBLIC_APPEND: "true",
        CORQ_LOCAL: "true",
        CORQ_AUTH_FAILURE_LIMIT: "3",
        CORQ_AUTH_FAILURE_WINDOW_S: "5",
        CORQ_PUSH_ALLOW_PRIVATE: "true",
      }),
    ).toMatchObject({
      maxBodyBytes: 40_000,
      concurrency: 1000,
      dbDriver: "websocket",
      consumerBudgetMs: 2000,
      maxSubrequests: 10_000,
      keysPerClaim: 8,
      replayKeys: 3,
      publicAppend: true,
      local: true,
      authFailureLimit: 3,
      authFailureWindowMs: 5000,
      pushAllowPrivate: true,
    });
  });

  it.each([
    ["CORQ_CONCURRENCY", ["0", "1001", "-3", "2.5", "eight", ""], "concurrency", 8],
    ["CORQ_CONSUMER_BUDGET_MS", ["0", "900001", "soon"], "consumerBudgetMs", 10_000],
    ["CORQ_MAX_SUBREQUESTS", ["0", "1e9", "many"], "maxSubrequests", 50],
    ["CORQ_REPLAY_KEYS", ["0", "257", "1.5", "two"], "replayKeys", 1],
    ["CORQ_MAX_BODY_BYTES", ["0", String(100 * 1_048_576 + 1), "1MB"], "maxBodyBytes", 1_048_576],
  ] as const)("falls back to the default for a malformed %s", (name, values, field, fallback) => {
    for (const value of values) expect(settings({ [name]: value })[field], `${name}=${value}`).toBe(fallback);
  });

  it("opens appends only for CORQ_PUBLIC_APPEND=true exactly", () => {
    for (const value of ["1", "yes", "TRUE", "True", " true", ""])
      expect(settings({ CORQ_PUBLIC_APPEND: value }).publicAppend, value).toBe(false);
  });
});
