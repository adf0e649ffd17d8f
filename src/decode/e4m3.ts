/**
 * fp8 E4M3 (the "FN" variant of the OCP spec, the one H100/H200 tensor cores use): 1 sign bit,
 * 4 exponent bits with bias 7, 3 mantissa bits, subnormals, no infinities, NaN only at S.1111.111,
 * so the largest finite magnitude is 1.75·2^8 = 448. The MoE activations cross the EP link in this
 * format, so the reference must round exactly as the GPU's satfinite conversion does.
 */

export const E4M3_MAX = 448;
/** The NaN code of each sign. */
export const E4M3_NAN = 0x7f;

/** The value of code c (0..255): NaN for 0x7f and 0xff, -0 for 0x80. */
export function e4m3Decode(c: number): number {
  const sign = c & 0x80 ? -1 : 1;
  const e = (c >>> 3) & 0xf,
    m = c & 7;
  if (e === 15 && m === 7) return Number.NaN;
  const mag = e === 0 ? m * 2 ** -9 : (8 + m) * 2 ** (e - 10);
  return sign * mag;
}

/** Round half to even of a double that is exactly representable (q carries no rounding error). */
function roundHalfEven(q: number): number {
  const f = Math.floor(q),
    d = q - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * The code nearest x, ties to the even code (even mantissa). |x| >= 448 and ±inf saturate to
 * ±448; NaN gives 0x7f.
 *
 * docs/model.md is silent: what infinities and NaN become; "saturate at ±448" is extended to ±inf
 * (as CUDA's __NV_SATFINITE does), and NaN maps to NaN. Neither arises from a finite b / xs.
 */
export function e4m3Encode(x: number): number {
  if (Number.isNaN(x)) return E4M3_NAN;
  const s = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  const a = Math.abs(x);
  // Any |x| >= 448 would round to 448 or past it, and past it there is only NaN.
  if (a >= E4M3_MAX) return s | 0x7e;
  // Below the smallest normal 2^-6 the grid is k·2^-9 for k = 0..8. k = 8 is 2^-6 itself, whose
  // code (exponent 1, mantissa 0) is numerically 8, so the code is k directly.
  if (a < 2 ** -6) return s | roundHalfEven(a * 512);
  // a in [2^e, 2^(e+1)), e in [-6, 8]: the grid there is (8..16)·2^(e-3). Math.log2 can be off by
  // one ulp near powers of two, so fix e up against the exact powers.
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  let m = roundHalfEven(a / 2 ** (e - 3)); // exact scaling, m in [8, 16]
  if (m === 16) {
    m = 8;
    e++;
  }
  return s | ((e + 7) << 3) | (m - 8);
}
