/**
 * What every walk's layer is made of, apart from its joins (walk-joins.ts): one rank's part of
 * the attention and of the MoE block, as ring records on that rank. The walks (unsharded-walk.ts,
 * seed-walk.ts, replicated-walk.ts) differ only in which ranks run which piece and in the joins
 * between them.
 *
 * Every kernel computes each output element the same way whatever slice of heads, columns or
 * experts it is handed (cu/model.h), and the same kernel on the same input gives the same bits on
 * either rank: that is what lets any walk be bit-identical to the unsharded one.
 */
import { attendPositions } from './mla-workspace.js';
import type { ModelConfig } from './model-config.js';
import type { ModelOps } from './model-ops.js';
import type { Ownership, RankWeights } from './device-weights.js';
import { contribAt, packAt, positionsAt, type Buffers } from './walk-buffers.js';
import { routesAt } from './walk-mailbox.js';
import { NORM_GEMV_MAX_COLS, ROUTER_SPLIT } from './router-product.js';

export class LayerPieces {
  /** Set for the step being enqueued: rank 0 copies each layer's routes into its mailbox. */
  validation = false;
  /**
   * Set for the step being enqueued: the positions its attention covers, every row's below it
   * (the cache's length, or the one-kernel bound when the step's rows are all under it).
   */
  attendPositions: number;

  constructor(
    readonly cfg: ModelConfig,
    readonly maxBatch: number,
    /** One per rank the layout uses. */
    readonly ops: readonly ModelOps[],
    readonly bufs: readonly Buffers[],
    readonly weights: readonly RankWeights[],
    readonly own: readonly Ownership[],
  ) {
    this.attendPositions = cfg.maxPos;
  }

  /** Rank r's tokens and positions for the step (host values, before the step's body). */
  inputs(r: number, tokens: readonly number[], positions: readonly number[]): void {
    const o = this.ops[r]!,
      b = this.bufs[r]!;
    o.setI32(b.tokIn, tokens);
    o.setI32(positionsAt(b, this.cfg, tokens.length), positions);
    this.attendPositions = attendPositions(this.cfg.maxPos, this.cfg.latent, positions);
  }

  /** h = Emb[tokens] on rank r. */
  embed(r: number, t: number): void {
    const b = this.bufs[r]!;
    this.ops[r]!.embed(b.hAndPositions, this.weights[r]!.emb, b.tokIn, t, this.cfg.hidden, this.cfg.vocab);
  }

  /**
   * Rank r's heads: the norm (unless the merge before made it: `normed`), the latent c into its
   * cache and q in one launch, then attention into uPart.
   */
  attend(r: number, l: number, t: number, normed = false): void {
    const { hidden: H, latent: R, headDim: Dv, layers: L, maxPos: P } = this.cfg;
    const o = this.ops[r]!,
      b = this.bufs[r]!,
      lw = this.weights[r]!.layers[l]!,
      nh = this.own[r]!.nh;
    const cache = b.cache + l * P * R * 4,
      pos = positionsAt(b, this.cfg, t);
    if (!normed) o.rmsnorm(b.hNorm, b.hAndPositions, lw.g1, t, H);
    o.latentQuery(b.qLatent, b.hNorm, lw.wdkv, lw.wq, cache, L * P * R, pos, H, R, nh * R, t, P);
    const Pa = this.attendPositions;
    o.mlaAttention(b.uPart, nh * Dv, b.qLatent, nh * R, cache, L * P * R, pos, lw.wuv, b.attnWork, t, nh, Pa, R, Dv);
  }

  /** Unsharded: h = f32(h + u @ Wo) in one launch (the bits of the product and a separate add). */
  attentionOut(l: number, t: number): void {
    const { hidden: H, heads: N, headDim: Dv } = this.cfg;
    const b = this.bufs[0]!;
    this.ops[0]!.gemv(b.hAndPositions, H, b.uPart, N * Dv, this.weights[0]!.layers[l]!.woCols, H, N * Dv, H, t, true);
  }

  /** yPart = the whole u times rank r's columns of Wo. */
  woColumns(r: number, l: number, t: number): void {
    const { heads: N, headDim: Dv } = this.cfg;
    const b = this.bufs[r]!,
      cols = this.own[r]!.woCols;
    this.ops[r]!.gemv(b.yPart, cols, b.uFull, N * Dv, this.weights[r]!.layers[l]!.woCols, cols, N * Dv, cols, t);
  }

  /** yAr = rank r's part of u times its rows of Wo (the allreduce variant's partial sum). */
  woRows(r: number, l: number, t: number): void {
    const H = this.cfg.hidden,
      k = this.own[r]!.nh * this.cfg.headDim;
    const b = this.bufs[r]!;
    this.ops[r]!.gemv(b.yAr, H, b.uPart, k, this.weights[r]!.layers[l]!.woRows, H, k, H, t);
  }

  /** h += y on rank r (y: the whole attention output, yFull or yAr). */
  residual(r: number, y: 'yFull' | 'yAr', t: number): void {
    const b = this.bufs[r]!;
    this.ops[r]!.axpy(b.hAndPositions, b[y], t * this.cfg.hidden, 1);
  }

  /** The MoE head on rank r: the norm, the router and the fp8 quantization (ids, weights, xq, xs, xd). */
  route(r: number, l: number, t: number): void {
    const { hidden: H, experts: E, topk: K } = this.cfg;
    const o = this.ops[r]!,
      b = this.bufs[r]!,
      lw = this.weights[r]!.layers[l]!,
      p = packAt(b, this.cfg, t);
    if (E <= NORM_GEMV_MAX_COLS) {
      o.normGemv(b.hNorm, b.logitsE, E, b.hAndPositions, lw.g2, lw.wr, E, H, E, t);
    } else {
      o.rmsnorm(b.hNorm, b.hAndPositions, lw.g2, t, H);
      o.gemv(b.logitsE, E, b.hNorm, H, lw.wr, E, H, E, t, false, ROUTER_SPLIT);
    }
    o.routeQuant(p.ids, p.wts, b.logitsE, p.xq, p.xs, b.xd, b.hNorm, t, E, K, H);
    // ids then wts, adjacent in the pack: one copy.
    if (this.validation && r === 0) o.toMailbox(p.ids, routesAt(this.cfg, this.maxBatch, l), 2 * t * K * 4);
  }

  /** xd from the xq and xs the seed walk's fan-out brought to rank r. */
  dequantize(r: number, t: number): void {
    const b = this.bufs[r]!,
      p = packAt(b, this.cfg, t);
    this.ops[r]!.dequantize(b.xd, p.xq, p.xs, t, this.cfg.hidden);
  }

  /** Rank r's slots (those whose expert it owns), into its part of its contrib buffer. */
  experts(r: number, l: number, t: number): void {
    const { hidden: H, topk: K, ffn: F } = this.cfg;
    const o = this.ops[r]!,
      b = this.bufs[r]!,
      lw = this.weights[r]!.layers[l]!,
      own = this.own[r]!,
      ids = packAt(b, this.cfg, t).ids;
    o.expertUp(b.act, b.xd, ids, lw.w1, lw.w3, own.e0, own.nE, t, K, H, F);
    o.expertDown(contribAt(b, this.cfg, r, t), b.act, ids, lw.w2, own.e0, own.nE, t, K, H, F);
  }

  /**
   * h += Σ_k wts[k]·contrib[k] on rank r, in slot order, each slot's contribution taken from the
   * part of the rank owning its expert: the terms and order of the unsharded merge. With `norm`,
   * in the same launch, the norm that the rank does next: layer `norm`'s attention norm into
   * hNorm (its attend is then told `normed`), or at norm = L the final norm into fin (root).
   */
  merge(r: number, t: number, norm?: number): void {
    const { hidden: H, experts: E, topk: K } = this.cfg;
    const b = this.bufs[r]!,
      p = packAt(b, this.cfg, t),
      split = this.own[0]!.nE;
    const lo = contribAt(b, this.cfg, 0, t),
      hi = split === E ? lo : contribAt(b, this.cfg, 1, t);
    if (norm === undefined) {
      this.ops[r]!.moeCombine(b.hAndPositions, p.wts, p.ids, lo, hi, split, t, K, H);
      return;
    }
    const w = this.weights[r]!,
      last = norm === this.cfg.layers;
    const out = last ? b.fin : b.hNorm,
      gain = last ? w.gf : w.layers[norm]!.g1;
    this.ops[r]!.moeCombineNorm(b.hAndPositions, p.wts, p.ids, lo, hi, split, t, K, H, out, gain);
  }
}
