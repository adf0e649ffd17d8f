/**
 * Numbers as the reports print them: three significant digits, since the measurements behind
 * them (HDR histograms, a few hundred samples) carry no more, in the unit that keeps them
 * between 1 and 1000.
 */

/** Three significant digits, without trailing zeros. */
export function sig3(v: number): string {
  return String(Number(v.toPrecision(3)));
}

/** A duration given in µs, in ns, µs, ms or s. */
export function fmtUs(us: number): string {
  if (us === 0) return '0 µs';
  const a = Math.abs(us);
  if (a >= 1e6) return `${sig3(us / 1e6)} s`;
  if (a >= 1e3) return `${sig3(us / 1e3)} ms`;
  if (a >= 1) return `${sig3(us)} µs`;
  return `${sig3(us * 1e3)} ns`;
}

/** A rate, to the whole unit with thousands separators. */
export function fmtRate(perS: number): string {
  return Math.round(perS).toLocaleString('en-US');
}

/** A size in B, KiB or MiB. */
export function fmtByteSize(b: number): string {
  return b >= 1 << 20 ? `${sig3(b / (1 << 20))} MiB` : b >= 1024 ? `${sig3(b / 1024)} KiB` : `${b} B`;
}

/** A size range, or one size where both ends agree. */
export function fmtBytes(min: number, max: number): string {
  return min === max ? fmtByteSize(min) : `${fmtByteSize(min)} to ${fmtByteSize(max)}`;
}

/** A measured figure for a table: whole numbers from 100 on, three significant digits below. */
export function fmtFigure(v: number): string {
  if (typeof v !== 'number' || !Number.isFinite(v)) return 'n/a';
  return Math.abs(v) >= 100 ? v.toFixed(0) : sig3(v);
}

/** µs per unit, for the duration units results files use. */
const DURATION_UNITS = new Map<string, number>([
  ['ns', 1e-3],
  ['us', 1],
  ['µs', 1],
  ['ms', 1e3],
  ['s', 1e6],
]);

/**
 * A value in a unit as results files name it: durations ('us', 'ms', 's') in whichever of ns to
 * s reads best, any other unit printed after the number. Not a finite number: 'n/a'.
 */
export function fmtInUnit(v: number, unit: string): string {
  if (typeof v !== 'number' || !Number.isFinite(v)) return 'n/a';
  const perUs = DURATION_UNITS.get(unit);
  return perUs === undefined ? `${sig3(v)} ${unit}` : fmtUs(v * perUs);
}
