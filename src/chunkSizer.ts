/**
 * Sizes a series of chunks — a rewind's, a retention pass's, an erasure's — so that each takes
 * about `targetMs`. Every chunk holds an xid while it runs, and every subscription's advance reads
 * only below the oldest one (DESIGN invariant 8): an event appended while a chunk runs waits for
 * that chunk's commit, however short the gap to the next chunk. Fixed chunks of 5,000 rows held
 * the horizon 600–900 ms each on a loaded machine, back to back (a rewind's chunk was the
 * horizon's holder in 77–91 % of samples; another subscription's live events waited p50 744 ms);
 * chunks of 1,000 kept that p50 at 59 ms. So: start small, then size each chunk from the rate of
 * the last one, at most doubling per chunk (one fast chunk on a cold cache is not a promise), never
 * below `min` (progress) nor above `max` (the caller's bound: statement size, memory). The time is
 * the chunk statement's own, read on the server (src/sql/common/clock.ts, elapsedMs): timed by the
 * client, the network's round trips to a far database (Workers → Neon) would shrink every chunk
 * to `min` while the statements themselves are short.
 */
export interface ChunkSizer {
  /** Rows for the next chunk. */
  readonly size: number;
  /** The chunk just run took `ms` for `size` rows (its size, not what it found: a last chunk is short). */
  took(ms: number): void;
}

/** 100 ms: well under a human's notice, and a fraction of a live event's end-to-end budget. */
export const CHUNK_TARGET_MS = 100;

/** The first chunk, before any has been timed (at most `max`). */
const FIRST_CHUNK = 500;

export function chunkSizer(options: { first?: number; min?: number; max: number; targetMs?: number }): ChunkSizer {
  const { max, targetMs = CHUNK_TARGET_MS } = options;
  const min = Math.min(options.min ?? 100, max);
  let size = Math.max(min, Math.min(options.first ?? FIRST_CHUNK, max));
  return {
    get size() {
      return size;
    },
    took(ms) {
      const fitting = Math.floor((size * targetMs) / Math.max(ms, 1));
      size = Math.max(min, Math.min(max, 2 * size, fitting));
    },
  };
}
