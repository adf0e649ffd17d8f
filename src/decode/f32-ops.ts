/**
 * The f32 building blocks of one decode step, each written as the sequence of IEEE f32
 * operations it stands for, so a GPU kernel knows what "the same computation" means.
 *
 * How f32 is obtained in JS: the operands are always f32 values, the operation runs in double, and
 * Math.fround (or a store into a Float32Array) rounds the result once. For +, −, ×, ÷ and sqrt
 * that equals the correctly rounded f32 operation (double has 53 ≥ 2·24 + 2 bits), so these are
 * real f32 operations, not "doubles rounded at the end". exp is the exception: Math.exp is not
 * required to be correctly rounded, and neither is a GPU's expf; both land within an ulp or so,
 * which is why activations are compared within rounding and only weights bit for bit.
 *
 * docs/model.md is silent: whether a product-accumulate is fused. We round the product and then the
 * sum (no FMA): acc = f32(acc + f32(a·w)), starting from acc = 0, in index order. A kernel that
 * uses FMA or another summation order differs by rounding, not by more.
 */
import { e4m3Decode, e4m3Encode, E4M3_MAX } from './e4m3.js';

const fr = Math.fround;

/**
 * out[o] = Σ_{i=0..n−1} a[i] · W[wOff + i·m + o] for o < m, accumulated in f32 in i order.
 * W is row-major [n, m] starting at wOff; a column slice of W computes each of its outputs the
 * same way, which is what keeps the TP split bit-identical.
 */
export function matvec(
  a: Float32Array,
  w: Float32Array,
  wOff: number,
  n: number,
  m: number,
  out: Float32Array,
): Float32Array {
  if (a.length < n || out.length < m || wOff + n * m > w.length) {
    throw new RangeError(
      `matvec: [${n}] @ [${n}, ${m}] at offset ${wOff} does not fit a=${a.length}, W=${w.length}, out=${out.length}`,
    );
  }
  out.fill(0, 0, m);
  // Four rows a pass over out: each output still takes its f32 additions one by one in i order
  // (every partial sum rounded), with a quarter of the loads and stores of out. About twice as
  // fast, and the oracle (cpu-model.ts) spends most of its time here.
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const a0 = a[i]!,
      a1 = a[i + 1]!,
      a2 = a[i + 2]!,
      a3 = a[i + 3]!;
    const r0 = wOff + i * m,
      r1 = r0 + m,
      r2 = r1 + m,
      r3 = r2 + m;
    for (let o = 0; o < m; o++) {
      let x = fr(out[o]! + fr(a0 * w[r0 + o]!));
      x = fr(x + fr(a1 * w[r1 + o]!));
      x = fr(x + fr(a2 * w[r2 + o]!));
      out[o] = x + fr(a3 * w[r3 + o]!);
    }
  }
  for (; i < n; i++) {
    const ai = a[i]!,
      row = wOff + i * m;
    // out is a Float32Array: the store is the f32 rounding of the sum.
    for (let o = 0; o < m; o++) out[o] = out[o]! + fr(ai * w[row + o]!);
  }
  return out;
}

/** Σ a[aOff + r] · b[bOff + r] for r < n, in f32, in r order. */
export function dot(a: Float32Array, aOff: number, b: Float32Array, bOff: number, n: number): number {
  let acc = 0;
  for (let r = 0; r < n; r++) acc = fr(acc + fr(a[aOff + r]! * b[bOff + r]!));
  return acc;
}

// docs/model.md is silent: the precision of eps; it is the f32 nearest 1e-6, added in f32.
export const RMS_EPS = fr(1e-6);

/**
 * out = h / sqrt(mean(h²) + eps) · g, in this order:
 *   ss = Σ f32(h_i·h_i) in f32, i order;  mean = f32(ss / H);  r = f32(sqrt(f32(mean + eps)))
 *   out_i = f32(f32(h_i / r) · g_i)
 * docs/model.md is silent: the order of the last two operations; we follow its formula left to right
 * (divide, then gain), and the sum of squares is f32 like every other activation.
 */
export function rmsnorm(h: Float32Array, g: Float32Array, out: Float32Array): Float32Array {
  const n = h.length;
  let ss = 0;
  for (let i = 0; i < n; i++) ss = fr(ss + fr(h[i]! * h[i]!));
  const r = fr(Math.sqrt(fr(fr(ss / n) + RMS_EPS)));
  for (let i = 0; i < n; i++) out[i] = fr(h[i]! / r) * g[i]!;
  return out;
}

/**
 * In place over x[0 .. n−1]: e_j = f32(exp(f32(x_j − max))), sum = Σ e_j in f32, j order,
 * x_j = f32(e_j / sum). docs/model.md is silent: whether the max is subtracted; it is (it changes
 * nothing mathematically and keeps exp finite, as every real kernel does).
 */
export function softmaxInPlace(x: Float32Array, n = x.length): Float32Array {
  let mx = -Infinity;
  for (let j = 0; j < n; j++) if (x[j]! > mx) mx = x[j]!;
  let sum = 0;
  for (let j = 0; j < n; j++) {
    x[j] = Math.exp(fr(x[j]! - mx));
    sum = fr(sum + x[j]!);
  }
  for (let j = 0; j < n; j++) x[j] = x[j]! / sum;
  return x;
}

/** docs/model.md is silent: silu's formula; we use silu(g) = f32(g / f32(1 + f32(exp(−g)))). */
export function silu(g: number): number {
  return fr(g / fr(1 + fr(Math.exp(-g))));
}

/**
 * The K largest of x, largest first, equal values in index order (the lower index wins a tie).
 * Picking the best untaken K times (strict >, scanning upward) gives exactly that order.
 */
export function topk(x: ArrayLike<number>, k: number): number[] {
  if (!Number.isInteger(k) || k < 1 || k > x.length)
    throw new RangeError(`topk: k must be in [1, ${x.length}], got ${k}`);
  const taken = new Uint8Array(x.length);
  const ids: number[] = [];
  for (let s = 0; s < k; s++) {
    let best = -1;
    for (let i = 0; i < x.length; i++) {
      // best === -1 admits the first untaken even if it is NaN, so K distinct ids always come out.
      if (!taken[i] && (best === -1 || x[i]! > x[best]!)) best = i;
    }
    taken[best] = 1;
    ids.push(best);
  }
  return ids;
}

/** The index of the largest value, the lowest such index on ties. */
export function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

export const QUANT_BLOCK = 128;

/**
 * The MoE input's fp8 round trip, per 128-wide block k of b:
 *   xs[k] = f32(max|b| / 448), or 1 where that max is 0
 *   xq_i  = e4m3(f32(b_i / xs[k]))      nearest even, saturating at ±448
 *   xd_i  = f32(decode(xq_i) · xs[k])
 * Writes the codes to xq, the scales to xs, the dequantized values to xd.
 */
export function quantizeE4m3Blocks(b: Float32Array, xq: Uint8Array, xs: Float32Array, xd: Float32Array): void {
  const n = b.length;
  if (n % QUANT_BLOCK !== 0) throw new RangeError(`quantize: length ${n} is not a multiple of ${QUANT_BLOCK}`);
  for (let k = 0; k * QUANT_BLOCK < n; k++) {
    const lo = k * QUANT_BLOCK,
      hi = lo + QUANT_BLOCK;
    let mx = 0;
    for (let i = lo; i < hi; i++) mx = Math.max(mx, Math.abs(b[i]!));
    const s = mx === 0 ? 1 : fr(mx / E4M3_MAX);
    xs[k] = s;
    for (let i = lo; i < hi; i++) {
      const c = e4m3Encode(fr(b[i]! / s));
      xq[i] = c;
      xd[i] = e4m3Decode(c) * s;
    }
  }
}
