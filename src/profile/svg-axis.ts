/**
 * Axes for the reports' SVG plots: a value to a pixel along one direction, and where the ticks
 * go. `from` and `to` are the pixels of the axis's low and high end, so one class serves an x
 * axis (left to right) and a y axis (bottom to top, `from` > `to`).
 */

export interface Tick {
  /** The tick's pixel along the axis. */
  at: number;
  value: number;
  /** Null for a minor tick, drawn without a label. */
  label: string | null;
}

/**
 * A log axis over whole powers of its base, so the labels are round numbers: decades for
 * latencies, powers of two for sizes that are powers of two themselves.
 */
export class LogAxis {
  private constructor(
    readonly lo: number,
    readonly hi: number,
    private readonly from: number,
    private readonly to: number,
    readonly base: 10 | 2,
  ) {}

  /** Zeros and negatives (a CPU reference's instant join) sit at the low end: a log axis has no 0. */
  static covering(vs: number[], from: number, to: number, base: 10 | 2 = 10): LogAxis {
    const pos = vs.filter((v) => v > 0 && Number.isFinite(v));
    if (pos.length === 0) return new LogAxis(base ** -1, 1, from, to, base);
    // log10 and log2, not ln(v)/ln(base): they are exact at the powers, which must not round up a power.
    const log = base === 10 ? Math.log10 : Math.log2;
    const lo = base ** Math.floor(log(Math.min(...pos)));
    let hi = base ** Math.ceil(log(Math.max(...pos)));
    if (hi <= lo) hi = lo * base;
    return new LogAxis(lo, hi, from, to, base);
  }

  at(v: number): number {
    const t = Math.log(Math.max(v, this.lo) / this.lo) / Math.log(this.hi / this.lo);
    return this.from + t * (this.to - this.from);
  }

  /**
   * Base 10: every decade labelled; over two decades or fewer, 2× and 5× labelled too, the other
   * multiples as minor ticks. Base 2: every power, labelled, thinned to at most ten labels.
   */
  ticks(label: (v: number) => string): Tick[] {
    const powers = Math.round(Math.log(this.hi / this.lo) / Math.log(this.base)),
      out: Tick[] = [];
    const tick = (value: number, labelled: boolean): Tick => ({
      at: this.at(value),
      value,
      label: labelled ? label(value) : null,
    });
    if (this.base === 2) {
      const every = Math.ceil((powers + 1) / 10);
      for (let p = 0; p <= powers; p++) out.push(tick(this.lo * 2 ** p, p % every === 0));
      return out;
    }
    for (let d = 0; d <= powers; d++) {
      const base = this.lo * 10 ** d;
      out.push(tick(base, true));
      if (d === powers) break;
      for (const k of [2, 3, 4, 5, 6, 7, 8, 9]) out.push(tick(base * k, powers <= 2 && (k === 2 || k === 5)));
    }
    return out;
  }
}

/** A linear axis from round tick to round tick (niceTicks) covering the values given. */
export class LinearAxis {
  private constructor(
    private readonly values: number[],
    private readonly from: number,
    private readonly to: number,
  ) {}

  static covering(lo: number, hi: number, from: number, to: number): LinearAxis {
    return new LinearAxis(niceTicks(lo, hi), from, to);
  }

  get lo(): number {
    return this.values[0]!;
  }
  get hi(): number {
    return this.values[this.values.length - 1]!;
  }

  at(v: number): number {
    return this.from + ((v - this.lo) / (this.hi - this.lo)) * (this.to - this.from);
  }

  ticks(label: (v: number) => string): Tick[] {
    return this.values.map((value) => ({ at: this.at(value), value, label: label(value) }));
  }
}

/** Round tick values from lo to at least hi: steps of 1, 2 or 5 × a power of ten, about five of them. */
export function niceTicks(lo: number, hi: number): number[] {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / 5,
    mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let v = Math.floor(lo / step) * step; v < hi + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}
