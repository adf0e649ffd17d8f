/**
 * What each rank holds of the model's weights, and generating it on the device.
 *
 * Every tensor a rank needs is a dense slice of a docs/model.md tensor (a column range of each row, or
 * a run of whole rows), generated in place by a kernel (cu/model.h memra_gen_weights) that is
 * bit-identical to src/decode/weights.ts: no weight ever crosses PCIe, and a rank generates only
 * its shard. The plan:
 *
 * - `unsharded` (the oracle, one GPU): rank 0 holds every tensor whole.
 * - `sharded` (TP-2 attention, EP-2 MoE; rank 0 is root):
 *   both ranks: g1, Wdkv (the latent is replicated), their heads' columns of Wq and rows of Wuv,
 *   their column half of Wo (the `concat` variant), their experts' W1, W3, W2;
 *   root only: Emb, Wr and g2 (root routes), gf and Wvocab (root samples);
 *   on first use of `wo: "allreduce"`: each rank's rows of Wo (its heads' part of u);
 *   on first use of the replicated walk: rank 1's Emb, g2 and Wr (it embeds and routes too).
 */
import { type DevicePtr, NO_PTR } from '../runtime/binding.js';
import type { Rank } from '../runtime/rank.js';
import type { ModelConfig } from './model-config.js';
import { layerTensorId, tensorSpecs, type LayerTensorName, type TensorSpec } from './weights.js';

export type Layout = 'unsharded' | 'sharded';
export const LAYOUTS: readonly Layout[] = ['sharded', 'unsharded'];

/** A dense [rows, cols] slice: element (r, c) is the tensor's flat element base + r·srcCols + colStart + c. */
interface Slice {
  spec: TensorSpec;
  base: number;
  rows: number;
  srcCols: number;
  colStart: number;
  cols: number;
}

export interface LayerWeights {
  g1: DevicePtr;
  wdkv: DevicePtr;
  wq: DevicePtr;
  wuv: DevicePtr;
  woCols: DevicePtr;
  w1: DevicePtr;
  w3: DevicePtr;
  w2: DevicePtr;
  /** Root's, and rank 1's once the replicated walk has run (0 until then). */
  g2: DevicePtr;
  wr: DevicePtr;
  /** This rank's rows of Wo, for `wo: "allreduce"`; 0 until first needed. */
  woRows: DevicePtr;
}

/** A layer's tensors in the order they are generated (woRows comes later, on first use). */
const LAYER_KEYS = ['g1', 'wdkv', 'wq', 'wuv', 'woCols', 'w1', 'w3', 'w2', 'g2', 'wr'] as const satisfies ReadonlyArray<
  Exclude<keyof LayerWeights, 'woRows'>
>;

export interface RankWeights {
  /** The rank that holds them. */
  rank: number;
  /** Root's, and rank 1's once the replicated walk has run (0 until then). */
  emb: DevicePtr;
  /** Root only (0 elsewhere). */
  gf: DevicePtr;
  wvocab: DevicePtr;
  layers: LayerWeights[];
  /** Device bytes of bf16 weights this rank holds. */
  bytes: number;
}

/** The heads and experts rank r owns under a layout. */
export interface Ownership {
  h0: number;
  nh: number;
  e0: number;
  nE: number;
  woCol0: number;
  woCols: number;
}

export function ownership(cfg: ModelConfig, layout: Layout, r: number): Ownership {
  if (layout === 'unsharded') return { h0: 0, nh: cfg.heads, e0: 0, nE: cfg.experts, woCol0: 0, woCols: cfg.hidden };
  const nh = cfg.heads / 2,
    nE = cfg.experts / 2,
    half = cfg.hidden / 2;
  return { h0: r * nh, nh, e0: r * nE, nE, woCol0: r * half, woCols: half };
}

const whole = (spec: TensorSpec): Slice => ({
  spec,
  base: 0,
  rows: 1,
  srcCols: spec.size,
  colStart: 0,
  cols: spec.size,
});

export type Progress = (done: number, total: number, what: string) => void;

export class WeightLoader {
  private readonly specs: Map<number, TensorSpec>;
  constructor(readonly cfg: ModelConfig) {
    this.specs = new Map(tensorSpecs(cfg).map((s) => [s.id, s]));
  }

  private spec(id: number): TensorSpec {
    return this.specs.get(id)!;
  }
  private layer(l: number, name: LayerTensorName): TensorSpec {
    return this.spec(layerTensorId(l, name));
  }

  /** The slices rank r holds (allreduce rows excluded: see woRowsSlice). */
  plan(
    layout: Layout,
    r: number,
  ): {
    top: Record<'emb' | 'gf' | 'wvocab', Slice | null>;
    layers: Array<Record<Exclude<keyof LayerWeights, 'woRows'>, Slice | null>>;
  } {
    const { hidden: H, heads: N, latent: R, headDim: Dv, ffn: F, layers: L } = this.cfg;
    const own = ownership(this.cfg, layout, r);
    const root = r === 0;
    const top = {
      emb: root ? whole(this.spec(0)) : null,
      gf: root ? whole(this.spec(16 * L + 1)) : null,
      wvocab: root ? whole(this.spec(16 * L + 2)) : null,
    };
    const layers = [];
    for (let l = 0; l < L; l++) {
      const s = (name: LayerTensorName): TensorSpec => this.layer(l, name);
      layers.push({
        g1: whole(s('g1')),
        wdkv: whole(s('Wdkv')),
        wq: { spec: s('Wq'), base: 0, rows: H, srcCols: N * R, colStart: own.h0 * R, cols: own.nh * R },
        wuv: { spec: s('Wuv'), base: own.h0 * R * Dv, rows: own.nh * R, srcCols: Dv, colStart: 0, cols: Dv },
        woCols: { spec: s('Wo'), base: 0, rows: N * Dv, srcCols: H, colStart: own.woCol0, cols: own.woCols },
        w1: { spec: s('W1'), base: own.e0 * H * F, rows: own.nE * H, srcCols: F, colStart: 0, cols: F },
        w3: { spec: s('W3'), base: own.e0 * H * F, rows: own.nE * H, srcCols: F, colStart: 0, cols: F },
        w2: { spec: s('W2'), base: own.e0 * F * H, rows: own.nE * F, srcCols: H, colStart: 0, cols: H },
        g2: root ? whole(s('g2')) : null,
        wr: root ? whole(s('Wr')) : null,
      });
    }
    return { top, layers };
  }

  /** This rank's rows of Wo: its heads' part of u times them is its partial sum. */
  woRowsSlice(layout: Layout, r: number, l: number): Slice {
    const { hidden: H, headDim: Dv } = this.cfg;
    const own = ownership(this.cfg, layout, r);
    return { spec: this.layer(l, 'Wo'), base: own.h0 * Dv * H, rows: own.nh * Dv, srcCols: H, colStart: 0, cols: H };
  }

  /** Every slice rank r holds, in plan order. */
  private slices(layout: Layout, r: number): Slice[] {
    const p = this.plan(layout, r);
    return [...Object.values(p.top), ...p.layers.flatMap((x) => Object.values(x))].filter(
      (s): s is Slice => s !== null,
    );
  }

  /** How many tensors (slices) rank r generates. */
  tensorCount(layout: Layout, r: number): number {
    return this.slices(layout, r).length;
  }

  /** Bytes rank r's plan allocates. */
  planBytes(layout: Layout, r: number): number {
    return this.slices(layout, r).reduce((n, s) => n + s.rows * s.cols * 2, 0);
  }

  /** Allocate and generate one slice on `rank`'s stream; the caller drains before use. */
  async generate(rank: Rank, s: Slice): Promise<DevicePtr> {
    const bytes = s.rows * s.cols * 2;
    const ptr = await rank.alloc(bytes);
    try {
      await rank.control.call(
        'genWeights',
        ptr,
        this.cfg.seed.toString(),
        s.spec.id,
        s.base,
        s.rows,
        s.srcCols,
        s.colStart,
        s.cols,
        s.spec.kind === 'gain' ? 1 : 0,
        s.spec.kind === 'gain' ? 0 : s.spec.scale,
      );
    } catch (e) {
      await rank.free(ptr).catch(() => undefined);
      throw e;
    }
    return ptr;
  }

  /**
   * Generate rank r's whole plan. `progress` is called after every tensor; on failure every
   * allocation made so far is freed before the error propagates. Every slice is asked for at
   * once: the worker answers the calls waiting on its port in one turn of its loop, where one at
   * a time each waited for the last reply before it was sent (a session of `small` makes 43).
   */
  async load(rank: Rank, layout: Layout, progress?: Progress): Promise<RankWeights> {
    const r = rank.rank;
    const p = this.plan(layout, r);
    const total = this.tensorCount(layout, r);
    const made: DevicePtr[] = [];
    const gen = async (s: Slice | null): Promise<DevicePtr> => {
      if (!s) return NO_PTR;
      const ptr = await this.generate(rank, s);
      made.push(ptr);
      progress?.(
        made.length,
        total,
        `rank ${r}: ${s.spec.name}${s.spec.layer === null ? '' : ` layer ${s.spec.layer}`}`,
      );
      return ptr;
    };
    const slices = [p.top.emb, p.top.gf, p.top.wvocab, ...p.layers.flatMap((x) => LAYER_KEYS.map((k) => x[k]))];
    // allSettled: every call is answered (and its allocation known) before anything is freed.
    const settled = await Promise.allSettled(slices.map(gen));
    const failed = settled.find((x): x is PromiseRejectedResult => x.status === 'rejected');
    try {
      if (failed) throw failed.reason;
      const ptrs = settled.map((x) => (x as PromiseFulfilledResult<DevicePtr>).value);
      const at = (i: number): DevicePtr => ptrs[i]!;
      const out: RankWeights = {
        rank: r,
        emb: at(0),
        gf: at(1),
        wvocab: at(2),
        layers: p.layers.map((_, l) => {
          const lw = Object.fromEntries(LAYER_KEYS.map((k, j) => [k, at(3 + l * LAYER_KEYS.length + j)]));
          return { ...lw, woRows: NO_PTR } as LayerWeights;
        }),
        bytes: this.planBytes(layout, r),
      };
      await rank.drain(600_000);
      return out;
    } catch (e) {
      await rank.drain(60_000).catch(() => undefined);
      await Promise.all(made.map((ptr) => rank.free(ptr).catch(() => undefined)));
      throw e;
    }
  }

  /** Generate the allreduce variant's Wo rows for every layer (first use of `wo: "allreduce"`). */
  async loadWoRows(rank: Rank, layout: Layout, w: RankWeights): Promise<void> {
    for (let l = 0; l < w.layers.length; l++) {
      if (w.layers[l]!.woRows === 0)
        w.layers[l]!.woRows = await this.generate(rank, this.woRowsSlice(layout, rank.rank, l));
    }
    await rank.drain(600_000);
  }

  /**
   * Generate what rank r lacks of the tensors a rank needs to hold h and route (the replicated
   * walk: Emb, every layer's g2 and Wr), on first use; rank 0 holds them from the start.
   */
  async loadRouting(rank: Rank, w: RankWeights): Promise<void> {
    const gen = async (have: DevicePtr, spec: TensorSpec): Promise<DevicePtr> => {
      if (have) return have;
      const ptr = await this.generate(rank, whole(spec));
      w.bytes += spec.size * 2;
      return ptr;
    };
    w.emb = await gen(w.emb, this.spec(0));
    for (let l = 0; l < w.layers.length; l++) {
      const lw = w.layers[l]!;
      lw.g2 = await gen(lw.g2, this.layer(l, 'g2'));
      lw.wr = await gen(lw.wr, this.layer(l, 'Wr'));
    }
    await rank.drain(600_000);
  }

  /** Free every weight of `w` (drain first: a queued kernel may still read them). */
  static async free(rank: Rank, w: RankWeights): Promise<void> {
    await rank.drain(60_000);
    if (w.rank !== rank.rank)
      throw new Error(`WeightLoader.free: these weights live on rank ${w.rank}, not rank ${rank.rank}`);
    const ptrs = [w.emb, w.gf, w.wvocab, ...w.layers.flatMap((x) => Object.values(x))];
    // All at once, as load() asks for them; each settles before the first failure is thrown.
    const freed = await Promise.allSettled(ptrs.filter((p) => p !== 0).map((p) => rank.free(p)));
    const failed = freed.find((x): x is PromiseRejectedResult => x.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
