import type { Principal, TokenCache } from "./types.js";
// The Node runtime's cache of verified scoped tokens (src/node/serve.ts; never on Workers, where
// every request looks its token up). Without it every request with a scoped token costs a
// statement on the API's pool before its own: at 1,000 appends/s, 1,000 more statements a
// second. With it a token is looked up at most once per `ttlMs` per process.
//
// Revocation still takes effect within a bound: a token revoked through this process's API is
// forgotten at once (DELETE /tokens/:id clears the cache), other serve processes are told by a
// NOTIFY (payload "tokens") and clear theirs, and whatever that misses (a lost notification, a
// revocation from the library or the CLI) ends with the entry, at most `ttlMs` later.
// Only verified tokens are kept, never a refusal: a token created a moment ago works at once.

export function createTokenCache(options: { ttlMs: number; maxEntries?: number; now?: () => number }): TokenCache {
  const maxEntries = options.maxEntries ?? 10_000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { principal: Principal; until: number }>();
  let generation = 0;
  return {
    get(hash) {
      const entry = entries.get(hash);
      if (!entry) return undefined;
      if (entry.until > now()) return entry.principal;
      entries.delete(hash);
      return undefined;
    },
    set(hash, principal, since) {
      if (options.ttlMs <= 0 || since !== generation) return;
      // the oldest first (a Map keeps insertion order)
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
      entries.delete(hash);
      entries.set(hash, { principal, until: now() + options.ttlMs });
    },
    generation: () => generation,
    clear() {
      generation++;
      entries.clear();
    },
  };
}
