// What a receiver of a rate-limited subscription sees: the most delivery starts in any window.

/**
 * The most of `times` (epoch ms) that fall in one window [t, t + windowMs), over every t: a
 * window that holds the most always starts at one of the times, so those are the ones tried.
 */
export function mostInWindow(times: number[], windowMs: number): { most: number; from: number } {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let from = Number.NaN;
  let end = 0;
  sorted.forEach((start, i) => {
    while (end < sorted.length && (sorted[end] ?? Infinity) < start + windowMs) end++;
    if (end - i > most) {
      most = end - i;
      from = start;
    }
  });
  return { most, from };
}

/** The gaps between consecutive times, sorted by time first (what a smooth limit spaces). */
export const gaps = (times: number[]): number[] => {
  const sorted = [...times].sort((a, b) => a - b);
  return sorted.slice(1).map((t, i) => t - (sorted[i] ?? t));
};
