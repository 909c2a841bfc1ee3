// The Node runtime's cache of verified tokens (src/http/tokenCache.ts): entries end with their
// TTL, a lookup that began before a revocation is not kept, the oldest go first when it is full.
import { describe, expect, it } from "vitest";
import { createTokenCache } from "../src/http/tokenCache.js";
import type { Principal } from "../src/http/types.js";

const reader: Principal = { tokenId: "a", scopes: ["read"], streamPrefix: null };
const appender: Principal = { tokenId: "b", scopes: ["append"], streamPrefix: "orders-" };

function clock() {
  let t = 1_000;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

describe("token cache", () => {
  it("keeps verified tokens for the TTL and not a millisecond longer", () => {
    const time = clock();
    const cache = createTokenCache({ ttlMs: 1000, now: time.now });
    cache.set("h1", reader, cache.generation());
    time.advance(400);
    cache.set("h2", appender, cache.generation());
    time.advance(599);
    expect([cache.get("h1"), cache.get("h2")]).toEqual([reader, appender]);
    time.advance(1);
    expect([cache.get("h1"), cache.get("h2")]).toEqual([undefined, appender]);
    time.advance(400);
    expect([cache.get("h1"), cache.get("h2")]).toEqual([undefined, undefined]);
  });

  it("forgets everything on clear, and drops a lookup that began before it", () => {
    const cache = createTokenCache({ ttlMs: 60_000, now: clock().now });
    cache.set("h1", reader, cache.generation());
    const began = cache.generation(); // a lookup reads the token row …
    cache.clear(); // … while the token is revoked
    cache.set("h2", appender, began); // what it read may be revoked: not kept
    cache.set("h3", reader, cache.generation());
    expect([cache.get("h1"), cache.get("h2"), cache.get("h3")]).toEqual([undefined, undefined, reader]);
  });

  it("keeps nothing with a TTL of 0, and at most maxEntries (the oldest go first)", () => {
    const off = createTokenCache({ ttlMs: 0 });
    off.set("h1", reader, off.generation());
    expect(off.get("h1")).toBeUndefined();
    const small = createTokenCache({ ttlMs: 60_000, maxEntries: 2, now: clock().now });
    for (const hash of ["h1", "h2", "h3"]) small.set(hash, reader, small.generation());
    expect(["h1", "h2", "h3"].map((h) => small.get(h) !== undefined)).toEqual([false, true, true]);
  });
});
