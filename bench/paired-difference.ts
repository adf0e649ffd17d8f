/**
 * A cost measured by difference (a variant's step minus its baseline's, paired sample by
 * sample) is only a cost where the difference stands out of the run's noise. Each such row
 * carries a distribution-free ~95% interval of its median (order statistics: no assumption about
 * the samples' shape), and is printed as a cost only when the interval lies above zero; a
 * difference whose interval holds zero is reported as within the noise, and one wholly below zero
 * as the variant running faster than its baseline, never as a negative cost.
 */
import { row, type Row } from './results-file.js';
import type { Summary } from '../src/cli/stats.js';

/**
 * Fewer samples than this cannot place a median at 95%: even their whole range holds it with
 * only 1 - 2^(1-n) confidence (94% at 5).
 */
export const MIN_SAMPLES = 6;

/**
 * The ranks k and n-1-k (0-based) of the sorted samples between which the median lies with ~95%
 * confidence: the binomial(n, 1/2) bound by its normal approximation. Under MIN_SAMPLES, the
 * samples' whole range, which says less.
 */
export function medianInterval(samples: readonly number[]): [number, number] {
  const s = Float64Array.from(samples).sort();
  const n = s.length;
  if (n === 0) return [NaN, NaN];
  const k = Math.max(0, Math.floor((n - 1.96 * Math.sqrt(n)) / 2));
  return [s[k]!, s[n - 1 - k]!];
}

/** A row of paired differences, with its median's interval. */
export function differenceRow(fields: Omit<Row, keyof Summary | 'samples' | 'interval'>, differences: number[]): Row {
  return { ...row(fields, differences), interval: medianInterval(differences) };
}

/** How the console table shows a row's median: a difference only where it is one. */
export function costCell(r: Row): number | string {
  const median = +r.median.toFixed(3);
  if (!r.interval) return median;
  if (r.n < MIN_SAMPLES) return `too few samples to tell from noise (${median}; n ${r.n})`;
  const [lo, hi] = r.interval.map((x) => +x.toFixed(3)) as [number, number];
  if (lo <= 0 && hi >= 0) return `within noise (${median}; 95% ${lo} to ${hi})`;
  if (hi < 0) return `none: faster than its baseline by ${-median}`;
  return median;
}
