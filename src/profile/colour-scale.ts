/**
 * A sequential colour scale on a log axis, for heat maps of latencies: a ten-fold outlier must
 * not wash the rest out to one colour.
 */

/** Viridis, sampled: dark for small, bright for large, and readable in grey print. */
export const VIRIDIS = ['#440154', '#3b528b', '#21918c', '#5ec962', '#fde725'] as const;

export class ColourScale {
  private constructor(
    private readonly lo: number,
    private readonly hi: number,
  ) {}

  /** Over the positive values given; with none, every value maps to the middle. */
  static covering(vs: number[]): ColourScale {
    const pos = vs.filter((v) => v > 0 && Number.isFinite(v));
    return pos.length === 0 ? new ColourScale(1, 1) : new ColourScale(Math.min(...pos), Math.max(...pos));
  }

  /** 0 for the smallest value, 1 for the largest, log-spaced between. */
  position(v: number): number {
    if (this.hi === this.lo) return 0.5;
    if (v <= this.lo) return 0;
    return Math.min(1, Math.log(v / this.lo) / Math.log(this.hi / this.lo));
  }

  /** The ramp's colour at v's position, as #rrggbb. */
  colour(v: number): string {
    const t = this.position(v) * (VIRIDIS.length - 1),
      i = Math.min(VIRIDIS.length - 2, Math.floor(t));
    return mix(VIRIDIS[i]!, VIRIDIS[i + 1]!, t - i);
  }

  /** Text colour that stays readable on colour(v): the ramp's bright end needs dark ink. */
  ink(v: number): string {
    return this.position(v) > 0.6 ? '#1a202c' : '#ffffff';
  }

  /** (position, value) pairs to label a legend of the ramp with. */
  legend(): Array<[number, number]> {
    if (this.hi === this.lo) return [[0.5, this.lo]];
    return [
      [0, this.lo],
      [0.5, Math.sqrt(this.lo * this.hi)],
      [1, this.hi],
    ];
  }
}

function mix(a: string, b: string, t: number): string {
  const pa = [1, 3, 5].map((i) => parseInt(a.slice(i, i + 2), 16)),
    pb = [1, 3, 5].map((i) => parseInt(b.slice(i, i + 2), 16));
  return `#${pa
    .map((v, i) =>
      Math.round(v + (pb[i]! - v) * t)
        .toString(16)
        .padStart(2, '0'),
    )
    .join('')}`;
}
