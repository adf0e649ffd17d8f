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
