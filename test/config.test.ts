import { describe, expect, it } from "vitest";
import { createCorq } from "../src/index.js";
import { jsonProblem } from "../src/config.js";
import { createWorker } from "../functions/createWorker.js";
import { refused } from "./helpers/refused.js";

const handle = () => undefined;
const configError = refused;

describe("createCorq validates its configuration up front", () => {
  it.each([
    ["bad name", { name: "no spaces", handle }],
    ["bad key path", { name: "s", key: "data", handle }],
    ["key path into an unknown column", { name: "s", key: "payload.x", handle }],
    ["batch size 0", { name: "s", batchSize: 0, handle }],
    ["maxAttempts 0", { name: "s", maxAttempts: 0, handle }],
    ["backoff max < initial", { name: "s", backoff: { initialMs: 10, maxMs: 5 }, handle }],
    ["unknown from", { name: "s", from: "yesterday", handle }],
    ["empty event filter", { name: "s", events: [], handle }],
    ["bad event name", { name: "s", events: ["has space"], handle }],
    ["missing handler", { name: "s" }],
  ])("rejects %s", (_, definition) => {
    const error = configError(() => createCorq({ databaseUrl: "postgres://x", subscriptions: [definition as never] }));
    expect(error.code).toBe("invalid_config");
  });

  it("rejects a duplicate subscription name and a missing database", () => {
    expect(
      configError(() =>
        createCorq({
          databaseUrl: "postgres://x",
          subscriptions: [
            { name: "a", handle },
            { name: "a", handle },
          ],
        }),
      ).message,
    ).toMatch(/twice/);
    expect(configError(() => createCorq({})).code).toBe("invalid_config");
  });

  it("names the offending field", () => {
    const error = configError(() =>
      createCorq({ databaseUrl: "postgres://x", subscriptions: [{ name: "ok", batchSize: -1, handle }] }),
    );
    expect(error.message).toContain("subscriptions[0].batchSize");
  });

  it("bounds a key path: at most 32 segments and 512 bytes (a 300,000-segment path made one advance run ~115 s)", () => {
    const path = (segments: number, segment = "a") => ["data", ...Array(segments - 1).fill(segment)].join(".");
    const accepted = [path(32), `data.${"a".repeat(507)}`]; // 32 segments; exactly 512 bytes
    for (const key of accepted) {
      expect(() =>
        createCorq({ databaseUrl: "postgres://x", subscriptions: [{ name: "s", key, handle }] }),
      ).not.toThrow();
    }
    for (const [key, reason] of [
      [path(33), /at most 32 segments/],
      [path(300_000), /at most 32 segments/],
      [`data.${"a".repeat(508)}`, /at most 512 bytes/],
      [path(20, "b".repeat(30)), /at most 512 bytes/],
    ] as const) {
      const subscriptions = [{ name: "s", key, handle }];
      const refused = configError(() => createCorq({ databaseUrl: "postgres://x", subscriptions }));
      expect(refused).toMatchObject({ code: "invalid_config", status: 400 });
      expect(refused.message).toMatch(/^subscriptions\[0\]\.key: /);
      expect(refused.message).toMatch(reason);
      // a Worker refuses it when its module is evaluated (the deploy fails, not the first request)
      expect(configError(() => createWorker({ subscriptions })).message).toMatch(reason);
    }
  });

  it("takes a stream filter of 1–100 stream-name prefixes of 1–200 characters, exact prefixes without wildcards", () => {
    const accepted = [
      ["orders-"],
      ["orders-", "invoices-"],
      Array.from({ length: 100 }, (_, i) => `p${i}-`),
      ["x".repeat(200)],
    ];
    for (const streams of accepted) {
      expect(() =>
        createCorq({ databaseUrl: "postgres://x", subscriptions: [{ name: "s", streams, handle }] }),
      ).not.toThrow();
    }
    for (const [streams, reason] of [
      [[], /at least one prefix/],
      [[""], /streams\.0: /],
      [["orders-*"], /no wildcards/],
      [["100%"], /no wildcards/],
      [["-orders"], /streams\.0: /],
      [["orders-", 7], /streams\.1: /],
      ["orders-", /streams: /],
      [null, /streams: /],
      [Array.from({ length: 101 }, (_, i) => `p${i}-`), /at most 100 prefixes/],
      [["x".repeat(201)], /streams\.0: /],
    ] as const) {
      const subscriptions = [{ name: "s", streams, handle }] as never;
      const refused = configError(() => createCorq({ databaseUrl: "postgres://x", subscriptions }));
      expect(refused, JSON.stringify(streams)).toMatchObject({ code: "invalid_config", status: 400 });
      expect(refused.message).toMatch(/^subscriptions\[0\]\.streams/);
      expect(refused.message).toMatch(reason);
      expect(configError(() => createWorker({ subscriptions })).message).toMatch(reason);
    }
  });

  it("refuses a malformed subscription name before touching the database", async () => {
    const corq = createCorq({ databaseUrl: "postgres://nowhere.invalid/x" });
    await expect(corq.consume("no spaces allowed")).rejects.toMatchObject({ code: "invalid_input", status: 400 });
  });
});

describe("event data and meta", () => {
  const nested = (levels: number) => Array.from({ length: levels - 1 }).reduce<unknown>((inner) => ({ inner }), {});
  it("are JSON of at most 64 levels, without U+0000 or lone surrogates", () => {
    expect(jsonProblem(nested(64))).toBeNull();
    expect(jsonProblem([nested(63)])).toBeNull();
    expect(jsonProblem(nested(65))).toBe("nested deeper than 64 levels");
    expect(jsonProblem({ text: "a\u0000b" })).toMatch(/U\+0000/);
    expect(jsonProblem({ text: "\ud800" })).toMatch(/lone surrogate/);
    expect(jsonProblem({ "\udc00": 1 })).toMatch(/lone surrogate/);
  });
});
