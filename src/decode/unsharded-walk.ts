/**
 * The unsharded walk (the oracle, and the layout of one GPU): rank 0 runs every head and every
 * expert, and there are no joins.
 */
import type { LayerWalk } from './layer-walk.js';
import type { LayerPieces } from './layer-pieces.js';

export class UnshardedWalk implements LayerWalk {
  readonly holders = 1;
  readonly finalNormInMerge = true;
  constructor(private readonly p: LayerPieces) {}

  inputs(tokens: readonly number[], positions: readonly number[]): void {
    this.p.inputs(0, tokens, positions);
  }

  embed(t: number): void {
    this.p.embed(0, t);
  }

  layer(l: number, t: number): void {
    const p = this.p;
    p.attend(0, l, t, l > 0);
    p.attentionOut(l, t);
    p.route(0, l, t);
    p.experts(0, l, t);
    // The next layer's norm (the final one after the last) in the merge's launch.
    p.merge(0, t, l + 1);
  }
}
