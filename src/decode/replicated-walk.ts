/**
 * The replicated walk: both ranks hold the residual stream h and do the serial work of a layer
 * themselves, on the same inputs with the same kernels, so neither waits for the other's. Three
 * joins a layer:
 *
 *   (both)           norm, latent c into each cache, their heads' attention -> their part of u
 *   head all-gather  both hold the whole u
 *   (both)           their column half of u @ Wo
 *   wo all-gather    both hold the whole product, and both add it to h
 *   (both)           norm, router, fp8 quantization: the same ids, weights and codes on both
 *   (both)           the slots whose experts they own
 *   ep exchange      each rank's slots into the other's contrib buffer
 *   (both)           the merge by owner in slot order, and the residual add, with the next
 *                    layer's norm in the same launch (rank 0: the final norm after the last)
 *
 * Bit identity with the unsharded walk, rank by rank: the joins add nothing; the product is each
 * column computed as the unsharded gemv computes it, and h + y is the f32 add the unsharded
 * walk's accumulating gemv makes; the MoE head is the unsharded kernels on the same h; the merge
 * is the unsharded moe_combine's terms in its order, each slot read from its owner's part. So
 * both ranks end each layer with the unsharded h, and rank 1 never drifts from rank 0.
 *
 * `wo: "allreduce"`: each rank multiplies its own part of u by its rows of Wo and one all-reduce
 * (rank-order sum: the same bits on both ranks) replaces the head and wo all-gathers: two joins a
 * layer, within rounding of the unsharded walk rather than equal to it.
 */
import { RANKS, type Transport } from '../runtime/transports/transport.js';
import type { DecodeConfig } from './decode-config.js';
import type { EpStepTimer } from './ep-step-timer.js';
import type { LayerPieces } from './layer-pieces.js';
import type { LayerWalk } from './layer-walk.js';
import type { WalkJoins } from './walk-joins.js';

export class ReplicatedWalk implements LayerWalk {
  readonly holders = 2;
  readonly finalNormInMerge = true;
  /** When set, every layer's experts to rank 0's merge are timed on rank 0 (the `ep` benchmark). */
  epTimer: EpStepTimer | undefined;

  constructor(
    private readonly p: LayerPieces,
    private readonly j: WalkJoins,
  ) {}

  inputs(tokens: readonly number[], positions: readonly number[]): void {
    for (const r of RANKS) this.p.inputs(r, tokens, positions);
  }

  embed(t: number): void {
    for (const r of RANKS) this.p.embed(r, t);
  }

  layer(l: number, t: number, tr: Transport | undefined, dc: DecodeConfig): void {
    const p = this.p,
      j = this.j;
    for (const r of RANKS) p.attend(r, l, t, l > 0);
    if (dc.wo === 'allreduce') {
      for (const r of RANKS) p.woRows(r, l, t);
      j.woAllReduce(l, t, tr!);
      for (const r of RANKS) p.residual(r, 'yAr', t);
    } else {
      j.headAllGather(l, t, tr!);
      for (const r of RANKS) p.woColumns(r, l, t);
      j.woAllGather(l, t, tr!);
      for (const r of RANKS) p.residual(r, 'yFull', t);
    }
    for (const r of RANKS) p.route(r, l, t);
    this.epTimer?.begin(l);
    for (const r of RANKS) p.experts(r, l, t);
    j.epExchange(l, t, tr!);
    // The next layer's norm in the merge's launch; after the last, root's final norm (rank 1 has none).
    const last = l + 1 === p.cfg.layers;
    for (const r of RANKS) p.merge(r, t, !last ? l + 1 : r === 0 ? l + 1 : undefined);
    this.epTimer?.end(l);
  }
}
