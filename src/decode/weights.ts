/**
 * The synthetic model's weights (docs/model.md, "Weights"): every element is a pure function of
 * (seed, tensor id, flat index), so a GPU rank can generate exactly its own shard and still agree
 * bit for bit with this reference. This file is the bit-exact half of the oracle: a kernel that
 * generates weights must reproduce these bf16 bits, not approximate them.
 *
 * The u64 hash runs on 32-bit halves (Math.imul and 16-bit limbs) because BigInt per element
 * would make `small` (~63M weights) take minutes; the test checks it against a BigInt transcription
 * of docs/model.md.
 */
import { validateConfig, type ModelConfig } from './model-config.js';

export type TensorName =
  | 'Emb'
  | 'Wq'
  | 'Wuv'
  | 'Wdkv'
  | 'Wo'
  | 'Wr'
  | 'W1'
  | 'W3'
  | 'W2'
  | 'g1'
  | 'g2'
  | 'gf'
  | 'Wvocab';

export interface TensorSpec {
  readonly name: TensorName;
  /** The layer for per-layer tensors, null for Emb, gf, Wvocab. */
  readonly layer: number | null;
  readonly id: number;
  readonly shape: readonly number[];
  /** Element count, the product of shape. */
  readonly size: number;
  /** 'matrix': w = (2u-1)·scale; 'gain': 1 + 0.1·(2u-1). */
  readonly kind: 'matrix' | 'gain';
  /** The f32 scale of a matrix (1 for Emb); NaN for gains, which have none. */
  readonly scale: number;
}

/** Per-layer ids are 16l + this offset (docs/model.md's table). */
export const LAYER_OFFSET = { Wq: 1, Wuv: 2, Wdkv: 3, Wo: 4, Wr: 5, W1: 6, W3: 7, W2: 8, g1: 9, g2: 10 } as const;
export type LayerTensorName = keyof typeof LAYER_OFFSET;

export function layerTensorId(layer: number, name: LayerTensorName): number {
  return 16 * layer + LAYER_OFFSET[name];
}

/** `1 / Math.sqrt(fan_in)` rounded to f32, literally as docs/model.md writes it (double sqrt and divide, one rounding). */
export function matrixScale(fanIn: number): number {
  return Math.fround(1 / Math.sqrt(fanIn));
}

/** Every tensor of the model, in id order. */
export function tensorSpecs(cfg: ModelConfig): TensorSpec[] {
  validateConfig(cfg);
  const { hidden: H, heads: N, latent: R, headDim: Dv, experts: E, ffn: F, vocab: V, layers: L } = cfg;
  const out: TensorSpec[] = [];
  const add = (name: TensorName, layer: number | null, id: number, shape: number[], fanIn: number | null): void => {
    const kind = fanIn === null ? 'gain' : 'matrix';
    // Emb's scale is 1 (fan-in 1 gives exactly that through the same formula).
    const scale = fanIn === null ? Number.NaN : matrixScale(fanIn);
    out.push({ name, layer, id, shape, size: shape.reduce((a, b) => a * b, 1), kind, scale });
  };
  add('Emb', null, 0, [V, H], 1);
  for (let l = 0; l < L; l++) {
    add('Wq', l, layerTensorId(l, 'Wq'), [H, N, R], H);
    add('Wuv', l, layerTensorId(l, 'Wuv'), [N, R, Dv], R);
    add('Wdkv', l, layerTensorId(l, 'Wdkv'), [H, R], H);
    add('Wo', l, layerTensorId(l, 'Wo'), [N * Dv, H], N * Dv);
    add('Wr', l, layerTensorId(l, 'Wr'), [H, E], H);
    add('W1', l, layerTensorId(l, 'W1'), [E, H, F], H);
    add('W3', l, layerTensorId(l, 'W3'), [E, H, F], H);
    add('W2', l, layerTensorId(l, 'W2'), [E, F, H], F);
    add('g1', l, layerTensorId(l, 'g1'), [H], null);
    add('g2', l, layerTensorId(l, 'g2'), [H], null);
  }
  add('gf', null, 16 * L + 1, [H], null);
  add('Wvocab', null, 16 * L + 2, [H, V], H);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The u64 hash on 32-bit halves.

const M64 = (1n << 64n) - 1n;
const GOLDEN = 0x9e3779b97f4a7c15n; // multiplies the seed
const ID_MUL = 0xd1b54a32d192ed03n; // multiplies the tensor id
// The two mix multipliers, as 32-bit halves and the low half as 16-bit limbs.
const C1_HI = 0xbf58476d,
  C1_LO = 0x1ce4e5b9,
  C1_L0 = C1_LO & 0xffff,
  C1_L1 = C1_LO >>> 16;
const C2_HI = 0x94d049bb,
  C2_LO = 0x133111eb,
  C2_L0 = C2_LO & 0xffff,
  C2_L1 = C2_LO >>> 16;
const TWO32 = 4294967296;

/**
 * The high 32 bits of the u64 product of u32 `a` and the u32 whose 16-bit limbs are b1:b0.
 * Every partial product is below 2^32, so it is exact in a double and `>>>` can split it.
 */
function mulHi32(a: number, b0: number, b1: number): number {
  const a0 = a & 0xffff,
    a1 = a >>> 16;
  const t = a0 * b0;
  const m1 = a1 * b0 + (t >>> 16);
  const m2 = a0 * b1 + (m1 & 0xffff);
  return a1 * b1 + (m1 >>> 16) + (m2 >>> 16);
}

/**
 * The three mix steps on z = hi:lo, returning z_final >> 40 (24 bits). The last step only needs
 * the high word (z ^ (z >> 31) has high word hi ^ (hi >>> 31)), so the second multiply computes
 * only its high half.
 */
function mixToU24(hi: number, lo: number): number {
  // z = (z ^ (z >> 30)) · C1
  let l = (lo ^ ((lo >>> 30) | (hi << 2))) >>> 0;
  let h = (hi ^ (hi >>> 30)) >>> 0;
  const ph = (mulHi32(l, C1_L0, C1_L1) + Math.imul(h, C1_LO) + Math.imul(l, C1_HI)) >>> 0;
  const pl = Math.imul(l, C1_LO) >>> 0;
  // z = (z ^ (z >> 27)) · C2, high word only
  l = (pl ^ ((pl >>> 27) | (ph << 5))) >>> 0;
  h = (ph ^ (ph >>> 27)) >>> 0;
  const qh = (mulHi32(l, C2_L0, C2_L1) + Math.imul(h, C2_LO) + Math.imul(l, C2_HI)) >>> 0;
  // z = z ^ (z >> 31); u24 = z >> 40
  return (qh ^ (qh >>> 31)) >>> 8;
}

/** S·GOLDEN + id·ID_MUL + start (mod 2^64) as [hi, lo]: once per call, so BigInt is fine here. */
function startState(seed: bigint, id: number, start: number): [number, number] {
  if (seed < 0n || seed > M64) throw new RangeError(`seed must be a u64, got ${seed}`);
  if (!Number.isSafeInteger(id) || id < 0)
    throw new RangeError(`tensor id must be a non-negative safe integer, got ${id}`);
  if (!Number.isSafeInteger(start) || start < 0)
    throw new RangeError(`start index must be a non-negative safe integer, got ${start}`);
  const z = (seed * GOLDEN + BigInt(id) * ID_MUL + BigInt(start)) & M64;
  return [Number(z >> 32n), Number(z & 0xffffffffn)];
}

/**
 * out[k] = the 24-bit u·2^24 of element start+k of tensor `id`, for k < out.length.
 * The fast path every generator goes through; exported so the test can hold it to BigInt.
 */
export function fillU24(seed: bigint, id: number, start: number, out: Uint32Array): Uint32Array {
  let [hi, lo] = startState(seed, id, start);
  for (let k = 0; k < out.length; k++) {
    out[k] = mixToU24(hi, lo);
    // z + 1 with the carry into the high word (i may cross 2^32, and so may S·G + id·M + i).
    lo = lo + 1;
    if (lo === TWO32) {
      lo = 0;
      hi = (hi + 1) >>> 0;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// bf16

const F32 = new Float32Array(1);
const F32_BITS = new Uint32Array(F32.buffer);

/**
 * bf16 bits of the f32 with bits `b`, round to nearest, ties to even.
 * docs/model.md is silent: NaN (never generated); it stays a NaN, quieted, instead of rounding to inf.
 */
export function f32BitsToBf16(b: number): number {
  b >>>= 0;
  if ((b & 0x7fffffff) >>> 0 > 0x7f800000) return ((b >>> 16) | 0x0040) & 0xffff;
  // Adding 0x7fff plus the kept lsb carries into bit 16 exactly when the dropped half is above
  // the midpoint, or at it with an odd kept part. Finite values past the largest bf16's upper
  // midpoint carry into the exponent and become inf, as IEEE rounding says. The sum stays
  // below 2^32 for every non-NaN b, so `>>>` sees it unwrapped.
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bf16 bits of x after rounding x to f32 (x is expected to be an f32 already). */
export function f32ToBf16(x: number): number {
  F32[0] = x;
  return f32BitsToBf16(F32_BITS[0]!);
}

export function bf16ToF32(bits: number): number {
  F32_BITS[0] = (bits & 0xffff) << 16;
  return F32[0]!;
}

/** The f32 copy of a bf16 tensor (4 bytes a weight on top of the bf16's 2). */
export function widenBf16(src: Uint16Array): Float32Array {
  const bits = new Uint32Array(src.length);
  for (let i = 0; i < src.length; i++) bits[i] = src[i]! << 16;
  return new Float32Array(bits.buffer);
}

// ---------------------------------------------------------------------------------------------
// Tensors

const TWO_POW_24 = 16777216;
// docs/model.md is silent: whether "0.1" in the gain formula is the f32 0.1 or the double 0.1. We take
// the f32 constant (what a kernel writing 0.1f uses), so every operand of the gain is an f32.
const F32_TENTH = Math.fround(0.1);
const CHUNK = 1 << 16;

/**
 * bf16 bits of elements [start, start+count) of a tensor (the whole tensor by default; a range
 * serves a rank that generates only its shard).
 *
 * f32 operations, in order (all exact in a double first, then one f32 rounding, which is the
 * correctly rounded f32 operation since 53 >= 2·24 + 2):
 *   v = 2u − 1                      exact in f32 (u has 24 bits and v = (2·u24 − 2^24) / 2^24)
 *   matrix: w = f32(v · scale)      one f32 multiply
 *   gain:   m = f32(0.1f · v); g = f32(1 + m)
 * then bf16 round to nearest, ties to even.
 */
export function generateTensor(seed: bigint, spec: TensorSpec, start = 0, count = spec.size - start): Uint16Array {
  if (!Number.isSafeInteger(count) || count < 0 || start + count > spec.size) {
    throw new RangeError(`${spec.name}: range [${start}, ${start + count}) is outside its ${spec.size} elements`);
  }
  const out = new Uint16Array(count);
  const u24 = new Uint32Array(Math.min(CHUNK, count));
  const f = new Float32Array(u24.length);
  const fb = new Uint32Array(f.buffer);
  for (let done = 0; done < count; done += u24.length) {
    const n = Math.min(u24.length, count - done);
    const u = n === u24.length ? u24 : u24.subarray(0, n);
    fillU24(seed, spec.id, start + done, u);
    // Storing into a Float32Array is the f32 rounding.
    if (spec.kind === 'matrix') {
      const s = spec.scale;
      for (let k = 0; k < n; k++) f[k] = ((2 * u[k]! - TWO_POW_24) / TWO_POW_24) * s;
    } else {
      for (let k = 0; k < n; k++) f[k] = 1 + Math.fround(F32_TENTH * ((2 * u[k]! - TWO_POW_24) / TWO_POW_24));
    }
    for (let k = 0; k < n; k++) out[done + k] = f32BitsToBf16(fb[k]!);
  }
  return out;
}

/** All tensors of a model, keyed by id. */
export function generateAll(cfg: ModelConfig): Map<number, { spec: TensorSpec; bits: Uint16Array }> {
  const m = new Map<number, { spec: TensorSpec; bits: Uint16Array }>();
  for (const spec of tensorSpecs(cfg)) m.set(spec.id, { spec, bits: generateTensor(cfg.seed, spec) });
  return m;
}
