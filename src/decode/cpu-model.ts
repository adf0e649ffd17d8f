/**
 * The unsharded decode step of the synthetic model on the CPU (docs/model.md, "One decode
 * step"): the oracle the sharded GPU walk is compared against. It is written for clarity and
 * exactness, not speed: every activation is f32 and every operation is the f32 operation named in
 * f32-ops.ts, so a GPU kernel that disagrees by more than rounding is wrong, not "differently
 * rounded".
 *
 * Memory: weights are kept as the generated bf16 bits (2 bytes each, what a GPU holds) and each
 * tensor is widened to f32 the first time a step reads it (4 more bytes each), so a tensor whose
 * expert is never routed to costs nothing extra. `tiny` is ~2 MB bf16, `small` ~132 MB bf16 plus
 * up to ~263 MB f32; `bench` (~10 GB bf16) is not meant for this class.
 */
import { validateConfig, type ModelConfig } from './model-config.js';
import {
  generateTensor,
  layerTensorId,
  tensorSpecs,
  widenBf16,
  type LayerTensorName,
  type TensorSpec,
} from './weights.js';
import {
  dot,
  matvec,
  quantizeE4m3Blocks,
  rmsnorm,
  silu,
  softmaxInPlace,
  topk,
  argmax,
  QUANT_BLOCK,
} from './f32-ops.js';

export interface CpuModelOptions {
  /**
   * Sequence slots, the largest batch a step may carry; row s of a step is slot s.
   * docs/model.md is silent on batch size; this is the reference's own limit (default 8).
   */
  readonly maxBatch?: number;
}

/** What one layer did to one step's rows, row-major over the t rows; filled only when asked. */
export interface LayerTrace {
  /** t × R: the latent written to the cache at each row's position. */
  readonly c: Float32Array;
  /** t × N·Dv: the attention output before Wo (the head all-gather's payload). */
  readonly u: Float32Array;
  /** t × H: h after the attention residual. */
  readonly hAttn: Float32Array;
  /** t × K: the routed experts, slot order. */
  readonly ids: Int32Array;
  /** t × K: their weights. */
  readonly wts: Float32Array;
  /** t × H/128: the per-block fp8 scales. */
  readonly xs: Float32Array;
  /** t × H: the e4m3 codes (what crosses the EP link). */
  readonly xq: Uint8Array;
  /** t × H: h after the MoE residual. */
  readonly hOut: Float32Array;
}

export interface StepResult {
  /** The greedy next token of each row. */
  readonly next: number[];
  /** t × H: the final hidden state, before the final norm. */
  readonly hidden: Float32Array;
  /** t × V, and the per-layer pieces; only with { trace: true }. */
  readonly trace?: { readonly layers: LayerTrace[]; readonly logits: Float32Array };
}

export class CpuModel {
  readonly cfg: ModelConfig;
  readonly maxBatch: number;
  readonly specs: readonly TensorSpec[];
  private readonly bits = new Map<number, Uint16Array>();
  private readonly wide = new Map<number, Float32Array>();
  /** cache[slot][layer]: maxPos × R latents. */
  private readonly cache: Float32Array[][];
  private readonly lengths: number[];

  constructor(cfg: ModelConfig, opts: CpuModelOptions = {}) {
    this.cfg = validateConfig(cfg);
    const maxBatch = opts.maxBatch ?? 8;
    if (!Number.isSafeInteger(maxBatch) || maxBatch < 1)
      throw new Error(`maxBatch must be a positive integer, got ${maxBatch}`);
    this.maxBatch = maxBatch;
    this.specs = tensorSpecs(cfg);
    for (const s of this.specs) this.bits.set(s.id, generateTensor(cfg.seed, s));
    this.cache = Array.from({ length: maxBatch }, () =>
      Array.from({ length: cfg.layers }, () => new Float32Array(cfg.maxPos * cfg.latent)),
    );
    this.lengths = new Array<number>(maxBatch).fill(0);
  }

  /** The bf16 bits of tensor `id` (the bit-exact reference for a GPU generator). */
  weightBits(id: number): Uint16Array {
    const b = this.bits.get(id);
    if (!b) throw new Error(`no tensor with id ${id} in this model`);
    return b;
  }

  /** Tensor `id` widened to f32, widened once and kept. */
  weightF32(id: number): Float32Array {
    let w = this.wide.get(id);
    if (!w) {
      w = widenBf16(this.weightBits(id));
      this.wide.set(id, w);
    }
    return w;
  }

  private lw(l: number, name: LayerTensorName): Float32Array {
    return this.weightF32(layerTensorId(l, name));
  }

  /** How many positions slot `s` holds: the position its next token must carry. */
  length(slot: number): number {
    this.checkSlot(slot);
    return this.lengths[slot]!;
  }

  /** Forget slot `s`'s sequence (all slots without an argument); its next position is 0. */
  reset(slot?: number): void {
    if (slot === undefined) {
      this.lengths.fill(0);
      return;
    }
    this.checkSlot(slot);
    this.lengths[slot] = 0;
  }

  private checkSlot(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxBatch)
      throw new RangeError(`slot must be in [0, ${this.maxBatch}), got ${slot}`);
  }

  /**
   * One decode step: row s carries token tokens[s] of slot s at position positions[s]. Every
   * argument is checked before anything changes, so a refused step leaves the caches as they were.
   */
  step(tokens: readonly number[], positions: readonly number[], opts: { trace?: boolean } = {}): StepResult {
    const {
      vocab: V,
      maxPos: P,
      hidden: H,
      latent: R,
      heads: N,
      headDim: Dv,
      topk: K,
      layers: L,
      experts: E,
    } = this.cfg;
    const t = tokens.length;
    if (positions.length !== t) throw new Error(`step: ${t} tokens but ${positions.length} positions`);
    if (t === 0) throw new Error('step: empty batch');
    if (t > this.maxBatch) throw new Error(`step: batch of ${t} rows is larger than maxBatch ${this.maxBatch}`);
    for (let s = 0; s < t; s++) {
      const x = tokens[s]!,
        p = positions[s]!;
      if (!Number.isInteger(x) || x < 0 || x >= V)
        throw new RangeError(`step: row ${s}: token ${x} is out of range [0, ${V})`);
      if (!Number.isInteger(p) || p < 0)
        throw new RangeError(`step: row ${s}: position ${p} is not a non-negative integer`);
      if (p >= P) throw new RangeError(`step: row ${s}: position ${p} is past the KV cache (maxPos ${P})`);
      if (p !== this.lengths[s])
        throw new Error(
          `step: row ${s}: position ${p} does not follow the sequence, whose next position is ${this.lengths[s]}`,
        );
    }

    const trace = opts.trace
      ? {
          layers: Array.from(
            { length: L },
            (): LayerTrace => ({
              c: new Float32Array(t * R),
              u: new Float32Array(t * N * Dv),
              hAttn: new Float32Array(t * H),
              ids: new Int32Array(t * K),
              wts: new Float32Array(t * K),
              xs: new Float32Array((t * H) / QUANT_BLOCK),
              xq: new Uint8Array(t * H),
              hOut: new Float32Array(t * H),
            }),
          ),
          logits: new Float32Array(t * V),
        }
      : undefined;

    // Scratch, reused across rows and layers.
    const a = new Float32Array(H),
      c = new Float32Array(R),
      q = new Float32Array(N * R);
    const sc = new Float32Array(P),
      o = new Float32Array(R),
      u = new Float32Array(N * Dv),
      uh = new Float32Array(Dv);
    const y = new Float32Array(H),
      logitsE = new Float32Array(E),
      wts = new Float32Array(K);
    const xq = new Uint8Array(H),
      xs = new Float32Array(H / QUANT_BLOCK),
      xd = new Float32Array(H);
    const g = new Float32Array(this.cfg.ffn),
      up = new Float32Array(this.cfg.ffn),
      contrib = new Float32Array(H),
      moe = new Float32Array(H);
    const logits = new Float32Array(V);
    // docs/model.md is silent: how sqrt(R) is formed; it is the f32 sqrt of R, and scores divide by it
    // as written (not multiply by a reciprocal).
    const sqrtR = Math.fround(Math.sqrt(R));
    const F = this.cfg.ffn;

    const hidden = new Float32Array(t * H);
    const next: number[] = [];
    const emb = this.weightF32(0);
    for (let s = 0; s < t; s++) {
      const x = tokens[s]!,
        p = positions[s]!;
      const h = hidden.subarray(s * H, (s + 1) * H);
      h.set(emb.subarray(x * H, (x + 1) * H));
      for (let l = 0; l < L; l++) {
        const cacheL = this.cache[s]![l]!;
        // --- attention (absorbed MLA over the latent cache)
        rmsnorm(h, this.lw(l, 'g1'), a);
        matvec(a, this.lw(l, 'Wdkv'), 0, H, R, c);
        cacheL.set(c, p * R);
        // Wq is [H, N, R]: all heads' q in one [H, N·R] product; each output is the same sum.
        matvec(a, this.lw(l, 'Wq'), 0, H, N * R, q);
        const wuv = this.lw(l, 'Wuv');
        for (let n = 0; n < N; n++) {
          for (let j = 0; j <= p; j++) sc[j] = dot(q, n * R, cacheL, j * R, R) / sqrtR;
          softmaxInPlace(sc, p + 1);
          // o = Σ_j softmax(s)_j · cache[j], in f32, in j order.
          o.fill(0);
          for (let j = 0; j <= p; j++) {
            const pj = sc[j]!,
              off = j * R;
            for (let r = 0; r < R; r++) o[r] = o[r]! + Math.fround(pj * cacheL[off + r]!);
          }
          matvec(o, wuv, n * R * Dv, R, Dv, uh);
          u.set(uh, n * Dv);
        }
        matvec(u, this.lw(l, 'Wo'), 0, N * Dv, H, y);
        for (let i = 0; i < H; i++) h[i] = h[i]! + y[i]!;
        // --- MoE
        rmsnorm(h, this.lw(l, 'g2'), a); // a is b here
        matvec(a, this.lw(l, 'Wr'), 0, H, E, logitsE);
        const ids = topk(logitsE, K);
        for (let k = 0; k < K; k++) wts[k] = logitsE[ids[k]!]!;
        softmaxInPlace(wts, K);
        quantizeE4m3Blocks(a, xq, xs, xd);
        const w1 = this.lw(l, 'W1'),
          w3 = this.lw(l, 'W3'),
          w2 = this.lw(l, 'W2');
        // Σ_k wts[k]·contrib[k] in f32 in slot order, then added to h: the EP merge sums the
        // same terms in the same order whichever rank produced them.
        moe.fill(0);
        for (let k = 0; k < K; k++) {
          const e = ids[k]!;
          matvec(xd, w1, e * H * F, H, F, g);
          matvec(xd, w3, e * H * F, H, F, up);
          for (let f = 0; f < F; f++) g[f] = silu(g[f]!) * up[f]!;
          matvec(g, w2, e * F * H, F, H, contrib);
          const wk = wts[k]!;
          for (let i = 0; i < H; i++) moe[i] = moe[i]! + Math.fround(wk * contrib[i]!);
        }
        if (trace) {
          const tl = trace.layers[l]!;
          tl.c.set(c, s * R);
          tl.u.set(u, s * N * Dv);
          tl.hAttn.set(h, s * H);
          tl.ids.set(ids, s * K);
          tl.wts.set(wts, s * K);
          tl.xs.set(xs, s * xs.length);
          tl.xq.set(xq, s * H);
        }
        for (let i = 0; i < H; i++) h[i] = h[i]! + moe[i]!;
        if (trace) trace.layers[l]!.hOut.set(h, s * H);
      }
      rmsnorm(h, this.weightF32(16 * L + 1), a);
      matvec(a, this.weightF32(16 * L + 2), 0, H, V, logits);
      if (trace) trace.logits.set(logits, s * V);
      next.push(argmax(logits));
    }
    // Only now, with every row done, do the sequences advance.
    for (let s = 0; s < t; s++) this.lengths[s] = positions[s]! + 1;
    return trace ? { next, hidden, trace } : { next, hidden };
  }
}
