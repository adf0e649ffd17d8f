/**
 * The model kernels of cu/model.h on the CPU reference devices, so the decode walk itself (its
 * ring records, hops, transports and read-back) runs, and is checked for ordering hazards, where
 * there is no GPU. Each kernel performs exactly the f32 operations of src/decode/f32-ops.ts in the
 * order src/decode/cpu-model.ts performs them, so a walk here equals the in-process reference bit
 * for bit, sharded or not: every output is summed in index order whatever slice it belongs to
 * (the slice rule of cu/model.h, in its simplest form).
 *
 * Memory comes through `KernelMemory`, which records every read and write with the CPU device's
 * access tracking (a kernel reading a peer's push that nothing ordered is an error here, as it
 * would be a race on a GPU).
 */
import { bf16ToF32 as widen, generateTensor, type TensorSpec } from '../decode/weights.js';
import {
  argmax,
  dot,
  matvec,
  quantizeE4m3Blocks,
  rmsnorm,
  silu,
  softmaxInPlace,
  topk,
  QUANT_BLOCK,
} from '../decode/f32-ops.js';
import { e4m3Decode } from '../decode/e4m3.js';

export const READ_ACCESS = 0;
export const WRITE_ACCESS = 1;

/** Views of device memory, each access recorded under `name` with its kind (read or write). */
export interface KernelMemory {
  f32(name: string, ptr: number, n: number, kind: number): Float32Array;
  i32(name: string, ptr: number, n: number, kind: number): Int32Array;
  u16(name: string, ptr: number, n: number, kind: number): Uint16Array;
  u8(name: string, ptr: number, n: number, kind: number): Uint8Array;
}

const fr = Math.fround;
const R_ = READ_ACCESS,
  W_ = WRITE_ACCESS;

function checkRows(call: string, t: number): void {
  if (!Number.isInteger(t) || t < 1 || t > 8) throw new RangeError(`${call}: t must be an integer in [1, 8], got ${t}`);
}

export function genWeights(
  m: KernelMemory,
  dst: number,
  seed: string,
  id: number,
  base: number,
  rows: number,
  srcCols: number,
  colStart: number,
  cols: number,
  kind: number,
  scale: number,
): void {
  if (kind !== 0 && kind !== 1)
    throw new RangeError(`launchGenWeights: kind must be 0 (matrix) or 1 (gain), got ${kind}`);
  const out = m.u16('dst', dst, rows * cols, W_);
  const spec: TensorSpec = {
    name: 'Wq',
    layer: null,
    id,
    shape: [Number.MAX_SAFE_INTEGER],
    size: Number.MAX_SAFE_INTEGER,
    kind: kind === 1 ? 'gain' : 'matrix',
    scale,
  };
  for (let r = 0; r < rows; r++)
    out.set(generateTensor(BigInt(seed), spec, base + r * srcCols + colStart, cols), r * cols);
}

export function setI32(m: KernelMemory, dst: number, values: readonly number[]): void {
  if (values.length < 1 || values.length > 12)
    throw new RangeError(`launchSetI32: 1 to 12 values, got ${values.length}`);
  m.i32('dst', dst, values.length, W_).set(values);
}

export function embed(
  m: KernelMemory,
  out: number,
  emb: number,
  tokens: number,
  t: number,
  H: number,
  V: number,
): void {
  checkRows('launchEmbed', t);
  const tok = m.i32('tokens', tokens, t, R_),
    o = m.f32('out', out, t * H, W_);
  for (let s = 0; s < t; s++) {
    const x = tok[s]!;
    if (x < 0 || x >= V) {
      o.fill(Number.NaN, s * H, (s + 1) * H);
      continue;
    }
    const row = m.u16('emb', emb + x * H * 2, H, R_);
    for (let i = 0; i < H; i++) o[s * H + i] = widen(row[i]!);
  }
}

export function rmsnormRows(m: KernelMemory, out: number, input: number, gain: number, t: number, H: number): void {
  checkRows('launchRmsnorm', t);
  const g = Float32Array.from(m.u16('gain', gain, H, R_), widen);
  const x = m.f32('input', input, t * H, R_),
    o = m.f32('out', out, t * H, W_);
  for (let s = 0; s < t; s++) rmsnorm(x.subarray(s * H, (s + 1) * H), g, o.subarray(s * H, (s + 1) * H));
}

/** out[s, j] = Σ_k f32(x[s, k] · W[k, j]) in k order: cpu-model.ts's matvec on a column slice. */
export function gemv(
  m: KernelMemory,
  out: number,
  ldo: number,
  x: number,
  ldx: number,
  w: number,
  ldw: number,
  K: number,
  cols: number,
  t: number,
  accumulate: boolean,
): void {
  checkRows('launchGemv', t);
  if (cols > ldw || K > ldx || cols > ldo)
    throw new RangeError(
      `launchGemv: cols (${cols}) <= ldw (${ldw}), K (${K}) <= ldx (${ldx}), cols <= ldo (${ldo}) required`,
    );
  const W = m.u16('w', w, (K - 1) * ldw + cols, R_);
  const xs = m.f32('x', x, (t - 1) * ldx + K, R_),
    o = m.f32('out', out, (t - 1) * ldo + cols, W_);
  const acc = new Float32Array(cols);
  // Accumulating, out is read too: the residual it adds to must have been ordered before.
  const prior = accumulate ? m.f32('out', out, (t - 1) * ldo + cols, R_) : undefined;
  for (let s = 0; s < t; s++) {
    const y = matvecBf16(xs, s * ldx, W, ldw, K, cols, acc);
    if (prior) for (let j = 0; j < cols; j++) o[s * ldo + j] = prior[s * ldo + j]! + y[j]!;
    else o.set(y, s * ldo);
  }
}

/** c = a @ Wdkv into the cache at each row's position, and q = a @ Wq: gemv, cacheWrite, gemv in one. */
export function latentQuery(
  m: KernelMemory,
  q: number,
  a: number,
  wdkv: number,
  wq: number,
  cache: number,
  slotStride: number,
  pos: number,
  K: number,
  R: number,
  qcols: number,
  t: number,
  P: number,
): void {
  checkRows('launchLatentQuery', t);
  if (slotStride < P * R)
    throw new RangeError(`launchLatentQuery: slotStride (${slotStride}) must be >= P * R (${P} * ${R})`);
  const x = m.f32('a', a, t * K, R_);
  const Wd = m.u16('wdkv', wdkv, K * R, R_),
    Wq = m.u16('wq', wq, K * qcols, R_);
  const p = m.i32('pos', pos, t, R_);
  const c = new Float32Array(R),
    y = new Float32Array(qcols);
  const qo = m.f32('q', q, t * qcols, W_);
  for (let s = 0; s < t; s++) {
    matvecBf16(x, s * K, Wd, R, K, R, c);
    const ps = p[s]!;
    if (ps >= 0 && ps < P) m.f32('cache', cache + (s * slotStride + ps * R) * 4, R, W_).set(c);
    qo.set(matvecBf16(x, s * K, Wq, qcols, K, qcols, y), s * qcols);
  }
}

export function cacheWrite(
  m: KernelMemory,
  cache: number,
  c: number,
  pos: number,
  t: number,
  layer: number,
  L: number,
  P: number,
  R: number,
): void {
  checkRows('launchCacheWrite', t);
  const p = m.i32('pos', pos, t, R_),
    cs = m.f32('c', c, t * R, R_);
  for (let s = 0; s < t; s++) {
    if (p[s]! < 0 || p[s]! >= P) continue;
    m.f32('cache', cache + ((s * L + layer) * P + p[s]!) * R * 4, R, W_).set(cs.subarray(s * R, (s + 1) * R));
  }
}

/** The oracle's attention; `cache` is this layer's rows of slot 0, slot s at cache + s·slotStride floats. */
export function mlaAttention(
  m: KernelMemory,
  u: number,
  ldu: number,
  q: number,
  ldq: number,
  cache: number,
  slotStride: number,
  pos: number,
  wuv: number,
  t: number,
  nh: number,
  P: number,
  R: number,
  Dv: number,
): void {
  checkRows('launchMlaAttention', t);
  // The GPU's contract (cu/model_attention.cu): its lanes sum a score in float4s, four lanes a
  // position, so R must fill them.
  if (!Number.isInteger(R) || R < 16 || R % 16 !== 0)
    throw new RangeError(
      `launchMlaAttention: R (${R}) must be a multiple of 16: a position's score is four lanes' sums of R / 16 float4s`,
    );
  if (slotStride < P * R)
    throw new RangeError(`launchMlaAttention: slotStride (${slotStride}) must be >= P * R (${P} * ${R})`);
  const p = m.i32('pos', pos, t, R_),
    qs = m.f32('q', q, (t - 1) * ldq + nh * R, R_);
  const Wuv = Float32Array.from(m.u16('wuv', wuv, nh * R * Dv, R_), widen);
  const out = m.f32('u', u, (t - 1) * ldu + nh * Dv, W_);
  const sqrtR = fr(Math.sqrt(R));
  const o = new Float32Array(R),
    uh = new Float32Array(Dv);
  for (let s = 0; s < t; s++) {
    const ps = p[s]!;
    if (ps < 0 || ps >= P) {
      out.fill(Number.NaN, s * ldu, s * ldu + nh * Dv);
      continue;
    }
    const cl = m.f32('cache', cache + s * slotStride * 4, (ps + 1) * R, R_);
    const sc = new Float32Array(ps + 1);
    for (let n = 0; n < nh; n++) {
      for (let j = 0; j <= ps; j++) sc[j] = dot(qs, s * ldq + n * R, cl, j * R, R) / sqrtR;
      softmaxInPlace(sc, ps + 1);
      o.fill(0);
      for (let j = 0; j <= ps; j++) {
        const pj = sc[j]!,
          off = j * R;
        for (let r = 0; r < R; r++) o[r] = o[r]! + fr(pj * cl[off + r]!);
      }
      out.set(matvec(o, Wuv, n * R * Dv, R, Dv, uh), s * ldu + n * Dv);
    }
  }
}

export function router(
  m: KernelMemory,
  ids: number,
  wts: number,
  logits: number,
  t: number,
  E: number,
  K: number,
): void {
  checkRows('launchRouter', t);
  const lg = m.f32('logits', logits, t * E, R_),
    oi = m.i32('ids', ids, t * K, W_),
    ow = m.f32('wts', wts, t * K, W_);
  const w = new Float32Array(K);
  for (let s = 0; s < t; s++) {
    const row = lg.subarray(s * E, (s + 1) * E);
    const pick = topk(row, K);
    for (let k = 0; k < K; k++) w[k] = row[pick[k]!]!;
    softmaxInPlace(w, K);
    oi.set(pick, s * K);
    ow.set(w, s * K);
  }
}

export function quantize(m: KernelMemory, xq: number, xs: number, b: number, t: number, H: number): void {
  checkRows('launchQuantize', t);
  if (H % QUANT_BLOCK !== 0) throw new RangeError(`launchQuantize: H must be a multiple of ${QUANT_BLOCK}, got ${H}`);
  // f32-ops' block quantizer also dequantizes; that copy is the dequantize kernel's job.
  quantizeE4m3Blocks(
    m.f32('b', b, t * H, R_),
    m.u8('xq', xq, t * H, W_),
    m.f32('xs', xs, (t * H) / QUANT_BLOCK, W_),
    new Float32Array(t * H),
  );
}

export function dequantize(m: KernelMemory, xd: number, xq: number, xs: number, t: number, H: number): void {
  checkRows('launchDequantize', t);
  const q = m.u8('xq', xq, t * H, R_),
    sc = m.f32('xs', xs, (t * H) / QUANT_BLOCK, R_),
    o = m.f32('xd', xd, t * H, W_);
  for (let i = 0; i < t * H; i++) o[i] = e4m3Decode(q[i]!) * sc[Math.floor(i / QUANT_BLOCK)]!;
}

/** The owned slots of rows < t: slot (s, k) with ids[s·K + k] in [e0, e0 + nE). */
function ownedSlots(
  m: KernelMemory,
  ids: number,
  t: number,
  K: number,
  e0: number,
  nE: number,
): Array<[number, number]> {
  const id = m.i32('ids', ids, t * K, R_);
  const out: Array<[number, number]> = [];
  for (let q = 0; q < t * K; q++) if (id[q]! >= e0 && id[q]! < e0 + nE) out.push([q, id[q]! - e0]);
  return out;
}

/** out[j] = Σ_k f32(x[xOff + k] · W[k·ldw + j]) for j < cols, in k order: matvec on bf16 rows. */
function matvecBf16(
  x: Float32Array,
  xOff: number,
  w: Uint16Array,
  ldw: number,
  n: number,
  cols: number,
  out: Float32Array,
): Float32Array {
  out.fill(0);
  for (let k = 0; k < n; k++) {
    const a = x[xOff + k]!,
      row = k * ldw;
    for (let j = 0; j < cols; j++) out[j] = out[j]! + fr(a * widen(w[row + j]!));
  }
  return out;
}

export function expertUp(
  m: KernelMemory,
  act: number,
  xd: number,
  ids: number,
  w1: number,
  w3: number,
  e0: number,
  nE: number,
  t: number,
  K: number,
  H: number,
  F: number,
): void {
  checkRows('launchExpertUp', t);
  const x = m.f32('xd', xd, t * H, R_);
  const g = new Float32Array(F),
    up = new Float32Array(F);
  for (const [q, e] of ownedSlots(m, ids, t, K, e0, nE)) {
    const s = Math.floor(q / K);
    matvecBf16(x, s * H, m.u16('w1', w1 + e * H * F * 2, H * F, R_), F, H, F, g);
    matvecBf16(x, s * H, m.u16('w3', w3 + e * H * F * 2, H * F, R_), F, H, F, up);
    for (let f = 0; f < F; f++) g[f] = silu(g[f]!) * up[f]!;
    m.f32('act', act + q * F * 4, F, W_).set(g);
  }
}

export function expertDown(
  m: KernelMemory,
  contrib: number,
  act: number,
  ids: number,
  w2: number,
  e0: number,
  nE: number,
  t: number,
  K: number,
  H: number,
  F: number,
): void {
  checkRows('launchExpertDown', t);
  const y = new Float32Array(H);
  for (const [q, e] of ownedSlots(m, ids, t, K, e0, nE)) {
    matvecBf16(m.f32('act', act + q * F * 4, F, R_), 0, m.u16('w2', w2 + e * F * H * 2, F * H, R_), H, F, H, y);
    m.f32('contrib', contrib + q * H * 4, H, W_).set(y);
  }
}

export function moeCombine(
  m: KernelMemory,
  h: number,
  wts: number,
  ids: number,
  lo: number,
  hi: number,
  splitE: number,
  t: number,
  K: number,
  H: number,
): void {
  checkRows('launchMoeCombine', t);
  const w = m.f32('wts', wts, t * K, R_),
    id = m.i32('ids', ids, t * K, R_),
    hs = m.f32('h', h, t * H, W_);
  const moe = new Float32Array(H);
  for (let s = 0; s < t; s++) {
    moe.fill(0);
    for (let k = 0; k < K; k++) {
      const q = s * K + k,
        c = m.f32(id[q]! < splitE ? 'lo' : 'hi', (id[q]! < splitE ? lo : hi) + q * H * 4, H, R_),
        wk = w[q]!;
      for (let i = 0; i < H; i++) moe[i] = moe[i]! + fr(wk * c[i]!);
    }
    for (let i = 0; i < H; i++) hs[s * H + i] = hs[s * H + i]! + moe[i]!;
  }
}

export function argmaxRows(m: KernelMemory, out: number, logits: number, t: number, V: number): void {
  checkRows('launchArgmax', t);
  const lg = m.f32('logits', logits, t * V, R_),
    o = m.i32('out', out, t, W_);
  for (let s = 0; s < t; s++) o[s] = argmax(lg.subarray(s * V, (s + 1) * V));
}
