/**
 * An HDR (high dynamic range) histogram of non-negative doubles in µs: log-linear buckets that
 * keep `digits` significant decimal digits over the whole range, in memory that grows with the
 * range's octaves, not with the number of samples. A run records one sample per join per step;
 * a histogram per (layer, hop, transport) keeps the aggregation's memory flat however long it ran.
 *
 * Layout (as in Gil Tene's HdrHistogram): a value is scaled to an integer count of units, units
 * are grouped into buckets that double in width, and each bucket has `half` sub-buckets, where
 * `half` is the power of two at or above 10^digits. So a bucket's width is at most 1/half of its
 * lowest value: the relative error of any value at or above `lowest` is below 10^-digits.
 * Below `lowest` (down to 0) the error is absolute: at most `lowest`·10^-digits.
 */

export interface HdrOptions {
  /** Significant decimal digits kept, 1 to 5 (default 3). */
  digits?: number;
  /** The smallest value, µs, kept to `digits` significant digits (default 0.01). */
  lowest?: number;
  /** The largest value, µs, the histogram accepts (default 1e7, ten seconds). */
  highest?: number;
}

/** The compact form: only the non-empty buckets, as [bucket index, count] pairs in value order. */
export interface HdrJson {
  digits: number;
  lowest: number;
  highest: number;
  /** Exact extremes and sum of what was recorded; null when nothing was. */
  min: number | null;
  max: number | null;
  sum: number;
  counts: Array<[number, number]>;
}

export class HdrHistogram {
  readonly digits: number;
  readonly lowest: number;
  readonly highest: number;
  /** Units per µs. */
  private readonly scale: number;
  /** Sub-buckets in the upper half of every bucket; a power of two, ≥ 10^digits. */
  private readonly half: number;
  private readonly halfMagnitude: number;
  private readonly bucketCount: number;
  /** Bucket 0 holds 2·half unit-wide slots; bucket b ≥ 1 holds `half` slots 2^b units wide. Allocated on first use. */
  private readonly buckets: Array<Float64Array | undefined>;
  private n = 0;
  private lo = Infinity;
  private hi = -Infinity;
  private total = 0;

  constructor(options: HdrOptions = {}) {
    const { digits = 3, lowest = 0.01, highest = 1e7 } = options;
    if (!Number.isInteger(digits) || digits < 1 || digits > 5) throw new RangeError(`HdrHistogram: digits must be an integer from 1 to 5, got ${digits}`);
    if (!Number.isFinite(lowest) || lowest <= 0) throw new RangeError(`HdrHistogram: lowest must be a finite value > 0 µs, got ${lowest}`);
    if (!Number.isFinite(highest) || highest <= lowest) throw new RangeError(`HdrHistogram: highest must be finite and above lowest (${lowest} µs), got ${highest}`);
    this.digits = digits;
    this.lowest = lowest;
    this.highest = highest;
    this.scale = 10 ** digits / lowest;
    // Units are integers held in doubles: past 2^53 they stop being exact.
    if (highest * this.scale > Number.MAX_SAFE_INTEGER) throw new RangeError(`HdrHistogram: [${lowest}, ${highest}] µs at ${digits} digits needs more than 2^53 units; narrow the range or the digits`);
    this.halfMagnitude = Math.ceil(Math.log2(10 ** digits));
    this.half = 2 ** this.halfMagnitude;
    this.bucketCount = this.bucketOf(Math.floor(highest * this.scale))[0] + 1;
    this.buckets = new Array<Float64Array | undefined>(this.bucketCount).fill(undefined);
  }

  get count(): number { return this.n; }
  /** The exact smallest value recorded; NaN when empty. */
  get min(): number { return this.n === 0 ? NaN : this.lo; }
  /** The exact largest value recorded; NaN when empty. */
  get max(): number { return this.n === 0 ? NaN : this.hi; }
  /** The exact mean (a running sum, not the buckets); NaN when empty. */
  get mean(): number { return this.n === 0 ? NaN : this.total / this.n; }

  record(value: number): void {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new RangeError(`HdrHistogram: cannot record ${String(value)}: values must be finite numbers ≥ 0 µs`);
    }
    if (value > this.highest) throw new RangeError(`HdrHistogram: ${value} µs is above the highest trackable value, ${this.highest} µs`);
    this.add(this.indexOf(value), 1);
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
    if (typeof p !== 'number' || !(p >= 0 && p <= 100)) throw new RangeError(`HdrHistogram: percentile must be in [0, 100], got ${String(p)}`);
    if (this.n === 0) return NaN;
    if (p === 0) return this.lo;
    if (p === 100) return this.hi;
    const rank = nearestRank(p, this.n);
    let seen = 0;
    for (const [index, c] of this.entries()) {
      seen += c;
      if (seen >= rank) {
        const [lo, width] = this.unitsOf(index);
        return Math.min(this.hi, Math.max(this.lo, (lo + width / 2) / this.scale));
      }
    }
    // Unreachable while the counts sum to n; the max is the honest answer if they ever don't.
    return this.hi;
  }

  /** Add every sample of `other` (same digits and range) to this one. */
  merge(other: HdrHistogram): this {
    this.requireSameLayout(other, 'merge');
    for (const [index, c] of other.entries()) this.add(index, c);
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
      digits: this.digits, lowest: this.lowest, highest: this.highest,
      min: this.n === 0 ? null : this.lo, max: this.n === 0 ? null : this.hi, sum: this.total,
      counts: [...this.entries()],
    };
  }

  static fromJSON(json: unknown): HdrHistogram {
    const j = json as Partial<HdrJson> | null;
    if (typeof j !== 'object' || j === null) throw new TypeError(`HdrHistogram.fromJSON: expected an object, got ${json === null ? 'null' : typeof json}`);
    for (const key of ['digits', 'lowest', 'highest'] as const) {
      if (typeof j[key] !== 'number') throw new TypeError(`HdrHistogram.fromJSON: ${key} must be a number, got ${typeof j[key]}`);
    }
    const h = new HdrHistogram({ digits: j.digits, lowest: j.lowest, highest: j.highest });
    if (!Array.isArray(j.counts)) throw new TypeError('HdrHistogram.fromJSON: counts must be an array of [index, count] pairs');
    const slots = h.flatIndex(h.bucketCount - 1, 2 * h.half - 1) + 1;
    for (const pair of j.counts) {
      const [index, c] = Array.isArray(pair) ? pair : [];
      if (!Number.isInteger(index) || index! < 0 || index! >= slots) throw new RangeError(`HdrHistogram.fromJSON: bucket index ${String(index)} is outside [0, ${slots})`);
      if (!Number.isSafeInteger(c) || c! <= 0) throw new RangeError(`HdrHistogram.fromJSON: bucket ${index} has count ${String(c)}; counts must be positive integers`);
      h.add(index!, c!);
      h.n += c!;
    }
    if (h.n === 0) {
      if (j.min != null || j.max != null) throw new RangeError('HdrHistogram.fromJSON: min/max given but no counts');
      return h;
    }
    const { min, max, sum } = j;
    if (typeof min !== 'number' || typeof max !== 'number' || !(min >= 0 && min <= max && max <= h.highest)) {
      throw new RangeError(`HdrHistogram.fromJSON: min ${String(min)} and max ${String(max)} must satisfy 0 ≤ min ≤ max ≤ ${h.highest}`);
    }
    if (typeof sum !== 'number' || !Number.isFinite(sum) || sum < 0) throw new RangeError(`HdrHistogram.fromJSON: sum must be a finite number ≥ 0, got ${String(sum)}`);
    h.lo = min;
    h.hi = max;
    h.total = sum;
    return h;
  }

  /** Non-empty buckets as [flat index, count], in value order. */
  private *entries(): Generator<[number, number]> {
    for (let b = 0; b < this.bucketCount; b++) {
      const counts = this.buckets[b];
      if (!counts) continue;
      const first = b === 0 ? 0 : this.half;
      for (let k = 0; k < counts.length; k++) if (counts[k]! > 0) yield [this.flatIndex(b, first + k), counts[k]!];
    }
  }

  private add(index: number, c: number): void {
    const [b, sub] = this.bucketOfIndex(index);
    let counts = this.buckets[b];
    if (!counts) counts = this.buckets[b] = new Float64Array(b === 0 ? 2 * this.half : this.half);
    counts[b === 0 ? sub : sub - this.half]! += c;
  }

  private indexOf(value: number): number {
    const [b, sub] = this.bucketOf(Math.floor(value * this.scale));
    return this.flatIndex(b, sub);
  }

  /** Bucket and sub-bucket of `units`: bucket 0 for units < 2·half, else sub in [half, 2·half). */
  private bucketOf(units: number): [number, number] {
    if (units < 2 * this.half) return [0, units];
    let b = Math.floor(Math.log2(units)) - this.halfMagnitude;
    // log2 of a float can land one off at an exact power of two; the sub-bucket range settles it.
    if (Math.floor(units / 2 ** b) >= 2 * this.half) b++;
    else if (Math.floor(units / 2 ** b) < this.half) b--;
    return [b, Math.floor(units / 2 ** b)];
  }

  /** Flat indices run without gaps in value order: bucket b ≥ 1 follows bucket b-1's last slot. */
  private flatIndex(b: number, sub: number): number {
    return b === 0 ? sub : b * this.half + sub;
  }

  private bucketOfIndex(index: number): [number, number] {
    if (index < 2 * this.half) return [0, index];
    const b = Math.floor(index / this.half) - 1;
    return [b, index - b * this.half];
  }

  /** The units a flat index covers: [lowest unit, width). */
  private unitsOf(index: number): [number, number] {
    const [b, sub] = this.bucketOfIndex(index);
    return [sub * 2 ** b, 2 ** b];
  }

  private requireSameLayout(other: HdrHistogram, what: string): void {
    if (other.digits !== this.digits || other.lowest !== this.lowest || other.highest !== this.highest) {
      throw new RangeError(`HdrHistogram: cannot ${what} a histogram of ${other.digits} digits over [${other.lowest}, ${other.highest}] µs into one of ${this.digits} digits over [${this.lowest}, ${this.highest}] µs`);
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
