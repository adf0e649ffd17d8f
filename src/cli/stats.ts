/** Order statistics over raw samples: the numbers every benchmark row reports. */
import { nearestRank } from '../profile/hdr-histogram.js';

export interface Summary {
  n: number;
  median: number;
  p90: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

/** Nearest rank, the same rule the profile's histograms use. */
function quantile(sorted: Float64Array, q: number): number {
  return sorted.length === 0 ? NaN : sorted[nearestRank(q * 100, sorted.length) - 1]!;
}

export function summarize(samples: ArrayLike<number>): Summary {
  const s = Float64Array.from(samples).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    median: quantile(s, 0.5),
    p90: quantile(s, 0.9),
    p99: quantile(s, 0.99),
    min: s[0] ?? NaN,
    max: s[s.length - 1] ?? NaN,
    mean: s.length ? sum / s.length : NaN,
  };
}
