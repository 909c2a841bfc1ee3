/** Nearest-rank percentile of unsorted samples (NaN when empty). */
export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  // the rank is clamped into the samples, so only an empty list has none
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

export function median(samples: number[]): number {
  return percentile(samples, 50);
}

/** (max - min) / median, as a percentage: how much repetitions disagreed. */
export function spreadPercent(samples: number[]): number {
  return samples.length < 2 ? 0 : ((Math.max(...samples) - Math.min(...samples)) / median(samples)) * 100;
}
