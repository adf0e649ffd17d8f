/**
 * An HDR (high dynamic range) histogram of non-negative doubles in µs, on hdr-histogram-js (the
 * TypeScript port of Gil Tene's HdrHistogram): log-linear buckets that keep `digits` significant
 * decimal digits over the whole range, in memory that grows with the range's octaves, not with
 * the number of samples. A run records one sample per join per step; a histogram per (layer,
 * hop, transport) keeps the aggregation's memory flat however long it ran.
 *
 * HdrHistogram counts integers, so a value is scaled to units of `lowest`·10^-digits µs: the
 * relative error of any value at or above `lowest` is below 10^-digits, and below `lowest` (down
 * to 0) the error is absolute, at most `lowest`·10^-digits. The counts array starts small and
 * grows to the largest value recorded (the port's packed array reads wrong percentiles at 4
 * digits, so plain 32-bit counts). What HdrHistogram keeps only to bucket precision (min,
 * max, sum) is kept exactly beside it, and percentiles follow the nearest-rank rule.
 */
import {
  Int32Histogram,
  type JsHistogram,
  decodeFromCompressedBase64,
  encodeIntoCompressedBase64,
} from 'hdr-histogram-js';

export interface HdrOptions {
  /** Significant decimal digits kept, 1 to 5 (default 3). */
  digits?: number;
  /** The smallest value, µs, kept to `digits` significant digits (default 0.01). */
  lowest?: number;
  /** The largest value, µs, the histogram accepts (default 1e7, ten seconds). */
  highest?: number;
}

/** The JSON form: the counts in HdrHistogram's compressed interchange encoding (any HdrHistogram reads it), in units. */
export interface HdrJson {
  digits: number;
  lowest: number;
  highest: number;
  /** Exact extremes and sum of what was recorded; null when nothing was. */
  min: number | null;
  max: number | null;
  sum: number;
  count: number;
  /** `encodeIntoCompressedBase64` of the counts; a value v µs is the integer floor(v·10^digits/lowest). */
  hdr: string;
}

export class HdrHistogram {
  readonly digits: number;
  readonly lowest: number;
  readonly highest: number;
  /** Units per µs. */
  private readonly scale: number;
  private readonly counts: JsHistogram;
  private n = 0;
  private lo = Infinity;
  private hi = -Infinity;
  private total = 0;

  constructor(options: HdrOptions = {}) {
    const { digits = 3, lowest = 0.01, highest = 1e7 } = options;
    if (!Number.isInteger(digits) || digits < 1 || digits > 5)
      throw new RangeError(`HdrHistogram: digits must be an integer from 1 to 5, got ${digits}`);
    if (!Number.isFinite(lowest) || lowest <= 0)
      throw new RangeError(`HdrHistogram: lowest must be a finite value > 0 µs, got ${lowest}`);
    if (!Number.isFinite(highest) || highest <= lowest)
      throw new RangeError(`HdrHistogram: highest must be finite and above lowest (${lowest} µs), got ${highest}`);
    this.digits = digits;
    this.lowest = lowest;
    this.highest = highest;
    this.scale = 10 ** digits / lowest;
    // Units are integers held in doubles: past 2^53 they stop being exact.
    if (highest * this.scale > Number.MAX_SAFE_INTEGER)
      throw new RangeError(
        `HdrHistogram: [${lowest}, ${highest}] µs at ${digits} digits needs more than 2^53 units; narrow the range or the digits`,
      );
    this.counts = new Int32Histogram(1, 2, digits);
    this.counts.autoResize = true;
  }

  get count(): number {
    return this.n;
  }
  /** The exact smallest value recorded; NaN when empty. */
  get min(): number {
    return this.n === 0 ? NaN : this.lo;
  }
  /** The exact largest value recorded; NaN when empty. */
  get max(): number {
    return this.n === 0 ? NaN : this.hi;
  }
  /** The exact mean (a running sum, not the buckets); NaN when empty. */
  get mean(): number {
    return this.n === 0 ? NaN : this.total / this.n;
  }

  record(value: number): void {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new RangeError(`HdrHistogram: cannot record ${String(value)}: values must be finite numbers ≥ 0 µs`);
    }
    if (value > this.highest)
      throw new RangeError(`HdrHistogram: ${value} µs is above the highest trackable value, ${this.highest} µs`);
    this.counts.recordValue(Math.floor(value * this.scale));
    this.n++;
    this.total += value;
    if (value < this.lo) this.lo = value;
    if (value > this.hi) this.hi = value;
  }

  /**
   * The nearest-rank percentile: the value of rank ⌈p/100 · count⌉ in sorted order, read from its
   * bucket (the bucket's midpoint, kept within the exact min and max). p = 0 and p = 100 are the
   * exact min and max. NaN when empty.
   */
  percentile(p: number): number {
    if (typeof p !== 'number' || !(p >= 0 && p <= 100))
      throw new RangeError(`HdrHistogram: percentile must be in [0, 100], got ${String(p)}`);
    if (this.n === 0) return NaN;
    if (p === 0) return this.lo;
    if (p === 100) return this.hi;
    // HdrHistogram reads rank round(p/100 · n); asking for exactly rank/n makes that the nearest rank.
    const rank = nearestRank(p, this.n);
    const units = this.counts.medianEquivalentValue(this.counts.getValueAtPercentile((100 * rank) / this.n));
    return Math.min(this.hi, Math.max(this.lo, units / this.scale));
  }

  /** Add every sample of `other` (same digits and range) to this one. */
  merge(other: HdrHistogram): this {
    this.requireSameLayout(other, 'merge');
    this.counts.add(other.counts);
    this.n += other.n;
    this.total += other.total;
    if (other.n > 0) {
      this.lo = Math.min(this.lo, other.lo);
      this.hi = Math.max(this.hi, other.hi);
    }
    return this;
  }

  toJSON(): HdrJson {
    return {
      digits: this.digits,
      lowest: this.lowest,
      highest: this.highest,
      min: this.n === 0 ? null : this.lo,
      max: this.n === 0 ? null : this.hi,
      sum: this.total,
      count: this.n,
      hdr: encodeIntoCompressedBase64(this.counts),
    };
  }

  static fromJSON(json: unknown): HdrHistogram {
    const j = json as Partial<HdrJson> | null;
    if (typeof j !== 'object' || j === null)
      throw new TypeError(`HdrHistogram.fromJSON: expected an object, got ${json === null ? 'null' : typeof json}`);
    for (const key of ['digits', 'lowest', 'highest', 'count'] as const) {
      if (typeof j[key] !== 'number')
        throw new TypeError(`HdrHistogram.fromJSON: ${key} must be a number, got ${typeof j[key]}`);
    }
    const h = new HdrHistogram({ digits: j.digits, lowest: j.lowest, highest: j.highest });
    if (typeof j.hdr !== 'string')
      throw new TypeError(
        `HdrHistogram.fromJSON: hdr must be a string (HdrHistogram's compressed base64 encoding), got ${typeof j.hdr}`,
      );
    let decoded;
    try {
      decoded = decodeFromCompressedBase64(j.hdr, 32);
    } catch (e) {
      throw new RangeError(
        `HdrHistogram.fromJSON: hdr is not a compressed base64 HdrHistogram: ${(e as Error).message}`,
      );
    }
    if (decoded.numberOfSignificantValueDigits !== h.digits)
      throw new RangeError(
        `HdrHistogram.fromJSON: hdr keeps ${decoded.numberOfSignificantValueDigits} digits, but digits is ${h.digits}`,
      );
    if (decoded.totalCount !== j.count)
      throw new RangeError(
        `HdrHistogram.fromJSON: hdr holds ${decoded.totalCount} values, but count is ${String(j.count)}`,
      );
    if (decoded.maxValue > h.highest * h.scale)
      throw new RangeError(`HdrHistogram.fromJSON: hdr holds values above highest (${h.highest} µs)`);
    h.counts.add(decoded as JsHistogram);
    h.n = decoded.totalCount;
    if (h.n === 0) {
      if (j.min != null || j.max != null) throw new RangeError('HdrHistogram.fromJSON: min/max given but no counts');
      return h;
    }
    const { min, max, sum } = j;
    if (typeof min !== 'number' || typeof max !== 'number' || !(min >= 0 && min <= max && max <= h.highest)) {
      throw new RangeError(
        `HdrHistogram.fromJSON: min ${String(min)} and max ${String(max)} must satisfy 0 ≤ min ≤ max ≤ ${h.highest}`,
      );
    }
    if (typeof sum !== 'number' || !Number.isFinite(sum) || sum < 0)
      throw new RangeError(`HdrHistogram.fromJSON: sum must be a finite number ≥ 0, got ${String(sum)}`);
    h.lo = min;
    h.hi = max;
    h.total = sum;
    return h;
  }

  private requireSameLayout(other: HdrHistogram, what: string): void {
    if (other.digits !== this.digits || other.lowest !== this.lowest || other.highest !== this.highest) {
      throw new RangeError(
        `HdrHistogram: cannot ${what} a histogram of ${other.digits} digits over [${other.lowest}, ${other.highest}] µs into one of ${this.digits} digits over [${this.lowest}, ${this.highest}] µs`,
      );
    }
  }
}

/**
 * The 1-based rank of the p-th percentile among n sorted values: ⌈p/100 · n⌉, at least 1. The
 * product is rounded first so 90% of 100 is rank 90, not the 91 a float's 90.00000000000001 gives.
 */
export function nearestRank(p: number, n: number): number {
  const exact = (p / 100) * n;
  const near = Math.round(exact);
  const rank = Math.abs(exact - near) < 1e-9 * Math.max(1, n) ? near : Math.ceil(exact);
  return Math.min(n, Math.max(1, rank));
}
