/**
 * The synthetic model's kernels as ring records on one rank: the decode walk's hot path. Each
 * call writes one record (no CUDA call, no message, no allocation) and returns its seq; the
 * rank's worker launches the kernel on its stream in ring order. cu/model.h states what each
 * kernel computes; the argument order is binding.ts's.
 */
import { Op } from '../workers/ops.js';
import type { Rank } from '../runtime/rank.js';
import type { DeviceSpans } from './device-spans.js';

/** The most i32 values one SetI32 record carries. */
export const SET_I32_MAX = 12;

export class ModelOps {
  /** When set, every record is bracketed by a timing-event pair (the decode bench's kernel table). */
  spans: DeviceSpans | undefined;

  constructor(readonly rank: Rank) {}

  /** One record, fixed arity (a step writes hundreds; none may allocate). */
  private put(
    op: Op,
    a0 = 0,
    a1 = 0,
    a2 = 0,
    a3 = 0,
    a4 = 0,
    a5 = 0,
    a6 = 0,
    a7 = 0,
    a8 = 0,
    a9 = 0,
    a10 = 0,
    a11 = 0,
    a12 = 0,
    a13 = 0,
  ): number {
    const spans = this.spans;
    spans?.begin();
    const ring = this.rank.ring;
    const a = ring.begin(op),
      v = ring.args;
    v[a] = a0;
    v[a + 1] = a1;
    v[a + 2] = a2;
    v[a + 3] = a3;
    v[a + 4] = a4;
    v[a + 5] = a5;
    v[a + 6] = a6;
    v[a + 7] = a7;
    v[a + 8] = a8;
    v[a + 9] = a9;
    v[a + 10] = a10;
    v[a + 11] = a11;
    v[a + 12] = a12;
    v[a + 13] = a13;
    const seq = ring.publish();
    spans?.end(Op[op]!, [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13]);
    return seq;
  }

  /** dst[i] = values[i]; at most SET_I32_MAX values. */
  setI32(dst: number, values: ArrayLike<number>): number {
    const n = values.length;
    if (n < 1 || n > SET_I32_MAX) throw new RangeError(`setI32: 1 to ${SET_I32_MAX} values, got ${n}`);
    this.spans?.begin();
    const ring = this.rank.ring;
    const a = ring.begin(Op.SetI32),
      v = ring.args;
    v[a] = dst;
    v[a + 1] = n;
    for (let i = 0; i < SET_I32_MAX; i++) v[a + 2 + i] = i < n ? values[i]! : 0;
    const seq = ring.publish();
    this.spans?.end('SetI32', [dst, n]);
    return seq;
  }

  embed(out: number, emb: number, tokens: number, t: number, H: number, V: number): number {
    return this.put(Op.Embed, out, emb, tokens, t, H, V);
  }
  rmsnorm(out: number, input: number, gain: number, t: number, H: number): number {
    return this.put(Op.Rmsnorm, out, input, gain, t, H);
  }
  /** normOut = rmsnorm(x, gain), then out = normOut @ w at the router's split, in one launch. */
  normGemv(
    normOut: number,
    out: number,
    ldo: number,
    x: number,
    gain: number,
    w: number,
    ldw: number,
    K: number,
    cols: number,
    t: number,
  ): number {
    return this.put(Op.NormGemv, normOut, out, ldo, x, gain, w, ldw, K, cols, t);
  }
  gemv(
    out: number,
    ldo: number,
    x: number,
    ldx: number,
    w: number,
    ldw: number,
    K: number,
    cols: number,
    t: number,
    accumulate = false,
    split = 0,
  ): number {
    return this.put(Op.Gemv, out, ldo, x, ldx, w, ldw, K, cols, t, accumulate ? 1 : 0, split);
  }
  /** c = a @ Wdkv into the cache at the rows' positions, q = a @ Wq beside it, in one launch. */
  latentQuery(
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
  ): number {
    return this.put(Op.LatentQuery, q, a, wdkv, wq, cache, slotStride, pos, K, R, qcols, t, P);
  }
  cacheWrite(cache: number, c: number, pos: number, t: number, layer: number, L: number, P: number, R: number): number {
    return this.put(Op.CacheWrite, cache, c, pos, t, layer, L, P, R);
  }
  /** `cache`: this layer's rows of slot 0 (slot s at cache + s·slotStride floats); `work`: mlaWorkspaceBytes. */
  mlaAttention(
    u: number,
    ldu: number,
    q: number,
    ldq: number,
    cache: number,
    slotStride: number,
    pos: number,
    wuv: number,
    work: number,
    t: number,
    nh: number,
    P: number,
    R: number,
    Dv: number,
  ): number {
    return this.put(Op.MlaAttention, u, ldu, q, ldq, cache, slotStride, pos, wuv, work, t, nh, P, R, Dv);
  }
  router(ids: number, wts: number, logits: number, t: number, E: number, K: number): number {
    return this.put(Op.Router, ids, wts, logits, t, E, K);
  }
  quantize(xq: number, xs: number, b: number, t: number, H: number): number {
    return this.put(Op.Quantize, xq, xs, b, t, H);
  }
  /** router, quantize and dequantize in one launch (root's MoE head). */
  routeQuant(
    ids: number,
    wts: number,
    logits: number,
    xq: number,
    xs: number,
    xd: number,
    b: number,
    t: number,
    E: number,
    K: number,
    H: number,
  ): number {
    return this.put(Op.RouteQuant, ids, wts, logits, xq, xs, xd, b, t, E, K, H);
  }
  dequantize(xd: number, xq: number, xs: number, t: number, H: number): number {
    return this.put(Op.Dequantize, xd, xq, xs, t, H);
  }
  expertUp(
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
  ): number {
    return this.put(Op.ExpertUp, act, xd, ids, w1, w3, e0, nE, t, K, H, F);
  }
  expertDown(
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
  ): number {
    return this.put(Op.ExpertDown, contrib, act, ids, w2, e0, nE, t, K, H, F);
  }
  moeCombine(
    h: number,
    wts: number,
    ids: number,
    lo: number,
    hi: number,
    splitE: number,
    t: number,
    K: number,
    H: number,
  ): number {
    return this.put(Op.MoeCombine, h, wts, ids, lo, hi, splitE, t, K, H);
  }
  /** moeCombine, then out = rmsnorm(h, gain): the norm that follows the merge, in its launch. */
  moeCombineNorm(
    h: number,
    wts: number,
    ids: number,
    lo: number,
    hi: number,
    splitE: number,
    t: number,
    K: number,
    H: number,
    out: number,
    gain: number,
  ): number {
    return this.put(Op.MoeCombineNorm, h, wts, ids, lo, hi, splitE, t, K, H, out, gain);
  }
  argmax(out: number, logits: number, t: number, V: number): number {
    return this.put(Op.Argmax, out, logits, t, V);
  }
  /** y += a * x over n f32 (the residual adds): a ring record like the rest, so it is timed with them. */
  axpy(y: number, x: number, n: number, a: number): number {
    return this.put(Op.Axpy, y, x, n, a);
  }
  /** Copy `bytes` of device memory at `src` into this rank's mailbox at `offset`. */
  toMailbox(src: number, offset: number, bytes: number): number {
    return this.put(Op.ToMailbox, src, offset, bytes);
  }
}
