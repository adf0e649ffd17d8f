/**
 * The seed walk (seed 000's TP layer, seed 003's EP step; docs/model.md "How two GPUs share it"):
 * root-centred. Rank 0 alone holds h, adds the residual, routes and quantizes, and fans out to
 * rank 1, which waits for that serial work at every layer. Five joins a layer:
 *
 *   fan-out          root's h and positions to rank 1
 *   (both)           norm, latent c into each cache, their heads' attention -> their part of u
 *   head all-gather  both hold the whole u
 *   (both)           their column half of u @ Wo
 *   wo               the halves onto root; root adds them to h
 *   (root)           norm, router, fp8 quantization
 *   ep fan-out       the packed xq, xs, ids, weights to rank 1, which dequantizes
 *   (both)           the slots whose experts they own
 *   ep return        rank 1's slots onto root, which merges by owner in slot order and adds
 *
 * `wo: "allreduce"`: each rank multiplies its own part of u by its rows of Wo, and one all-reduce
 * replaces the head all-gather and `wo` (not bit-identical: a sum of two partials rounds
 * differently). With the config's `epGraph` on, ep fan-out to the merge goes through the layer's
 * EP graph slot (ep-graph-slot.ts): a replayed parent graph when one could be captured, else the
 * same eager records. Its three halves are the same methods on both paths (epEager, epParts), so
 * the graph and its eager twin cannot drift.
 */
import type { Runtime } from '../runtime/runtime.js';
import { RANKS, type Transport } from '../runtime/transports/transport.js';
import { ParentGraph, type ParentGraphParts } from '../runtime/parent-graph.js';
import type { DecodeConfig } from './decode-config.js';
import type { EpStepTimer } from './ep-step-timer.js';
import { EpGraphSlots } from './ep-graph-slot.js';
import type { LayerPieces } from './layer-pieces.js';
import type { LayerWalk } from './layer-walk.js';
import type { WalkJoins } from './walk-joins.js';
import { contribAt, packAt } from './walk-buffers.js';

export class SeedWalk implements LayerWalk {
  readonly holders = 1;
  /** Root's merge ends the layer, but the fan-out of h comes before either rank's next norm. */
  readonly finalNormInMerge = false;
  /** When set, every layer's EP step is timed on rank 0 (the `ep` benchmark). */
  epTimer: EpStepTimer | undefined;
  private readonly slots: EpGraphSlots;
  /** The expert split the EP workspaces were built for (the capture guard's). */
  private readonly builtFor: ReadonlyArray<{ e0: number; nE: number }>;

  constructor(
    private readonly rt: Runtime,
    private readonly p: LayerPieces,
    private readonly j: WalkJoins,
  ) {
    this.slots = new EpGraphSlots(p.cfg.layers);
    this.builtFor = p.own.map((o) => ({ e0: o.e0, nE: o.nE }));
  }

  inputs(tokens: readonly number[], positions: readonly number[]): void {
    this.p.inputs(0, tokens, positions);
  }

  embed(t: number): void {
    this.p.embed(0, t);
  }

  layer(l: number, t: number, tr: Transport | undefined, dc: DecodeConfig): void | Promise<void> {
    const p = this.p,
      j = this.j;
    j.fanOut(l, t, tr!);
    for (const r of RANKS) p.attend(r, l, t);
    if (dc.wo === 'allreduce') {
      for (const r of RANKS) p.woRows(r, l, t);
      j.woAllReduce(l, t, tr!);
      p.residual(0, 'yAr', t);
    } else {
      j.headAllGather(l, t, tr!);
      for (const r of RANKS) p.woColumns(r, l, t);
      j.woGather(l, t, tr!);
      p.residual(0, 'yFull', t);
    }
    p.route(0, l, t);
    // The common case allocates nothing: the slot and the timer need closures, the eager step not.
    if (!dc.epGraph && !this.epTimer) return this.epEager(l, t, tr!);
    return this.epStep(l, t, tr!, dc);
  }

  /** The EP step through the layer's graph slot when the config gates it on, timed when asked. */
  private async epStep(l: number, t: number, tr: Transport, dc: DecodeConfig): Promise<void> {
    const eager = (): void => this.epEager(l, t, tr);
    const step = async (): Promise<void> => {
      if (!dc.epGraph) {
        eager();
        return;
      }
      await this.slots.run(
        l,
        () => ({ t, ownership: this.p.own, builtFor: this.builtFor, validation: this.p.validation, missing: [] }),
        async () => {
          const g = await ParentGraph.build(this.rt, this.epParts(l, t));
          return { launch: () => g.launch(), destroy: () => g.destroy() };
        },
        eager,
      );
    };
    if (this.epTimer) await this.epTimer.around(l, step);
    else await step();
  }

  /** Rank 1's half: dequantize what the fan-out brought, then its experts' slots. */
  private epPeer(l: number, t: number): void {
    this.p.dequantize(1, t);
    this.p.experts(1, l, t);
  }

  /** The eager twin: the fan-out and the return through the layer's transport. */
  private epEager(l: number, t: number, tr: Transport): void {
    this.j.epFanOut(l, t, tr);
    this.epPeer(l, t);
    this.p.experts(0, l, t);
    this.j.epReturn(l, t, tr);
    this.p.merge(0, t);
  }

  /** The EP step as the parent graph's parts: the seed's four copies (xq, xs, ids, weights) and the return. */
  private epParts(l: number, t: number): ParentGraphParts {
    const { cfg, bufs } = this.p;
    const p0 = packAt(bufs[0]!, cfg, t),
      p1 = packAt(bufs[1]!, cfg, t);
    const keys = ['xq', 'xs', 'ids', 'wts'] as const;
    return {
      owner: () => this.p.experts(0, l, t),
      peer: () => this.epPeer(l, t),
      post: () => this.p.merge(0, t),
      tx: keys.map((k, i) => {
        const end = i + 1 < keys.length ? p0[keys[i + 1]!] : p0.wts + t * cfg.topk * 4;
        return { src: p0[k], dst: p1[k], bytes: end - p0[k] };
      }),
      rx: {
        src: contribAt(bufs[1]!, cfg, 1, t),
        dst: contribAt(bufs[0]!, cfg, 1, t),
        bytes: t * cfg.topk * cfg.hidden * 4,
      },
    };
  }

  /** The EP graph slots' counters and each refused layer's reason. */
  epGraphStats(): { dispatches: number; captures: number; refused: Array<{ layer: number; reason: string }> } {
    const refused: Array<{ layer: number; reason: string }> = [];
    for (let l = 0; l < this.p.cfg.layers; l++) {
      const s = this.slots.slot(l);
      if (s.state === 'refused') refused.push({ layer: l, reason: s.reason });
    }
    return { dispatches: this.slots.dispatches, captures: this.slots.captures, refused };
  }

  /** Every slot back to Empty (a new config), its graphs destroyed. */
  resetEpGraphs(): Promise<void> {
    return this.slots.reset();
  }
}
