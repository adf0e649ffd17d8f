/**
 * Each rank's activation buffers and caches, sized once for maxBatch rows, and where a step of t
 * rows finds its parts in them. Every walk uses the same buffers, so a changed walk needs nothing
 * allocated: rank 1 holds all of them (the replicated walk keeps `h` there too), bar the final
 * norm, the logits and the picked tokens, which are root's.
 */
import { type DevicePtr, NO_PTR, ptrAdd } from '../runtime/binding.js';
import type { Rank } from '../runtime/rank.js';
import type { ModelConfig } from './model-config.js';
import { ownership, type Layout } from './device-weights.js';
import { mlaWorkspaceBytes } from './mla-workspace.js';

export interface Buffers {
  /** h (t·H), then the step's positions (t words): packed, so the seed walk's fan-out moves both. */
  hAndPositions: DevicePtr;
  /** The normed residual (t·H): rmsnorm's output, what attention and the router read. */
  hNorm: DevicePtr;
  /** The absorbed latent query, this rank's heads (t·nh·R). */
  qLatent: DevicePtr;
  uPart: DevicePtr;
  uFull: DevicePtr;
  yPart: DevicePtr;
  /** The whole `u @ Wo` (t·H). */
  yFull: DevicePtr;
  /** The `wo: "allreduce"` variant's partial product, then the sum. */
  yAr: DevicePtr;
  logitsE: DevicePtr;
  /** The MoE input packed: xq, xs, ids, weights (packAt). */
  pack: DevicePtr;
  xd: DevicePtr;
  act: DevicePtr;
  /** Per-slot expert contributions: t·K·H for each rank's slots, rank r's at r·t·K·H (contribAt). */
  contrib: DevicePtr;
  fin: DevicePtr;
  logitsV: DevicePtr;
  tokIn: DevicePtr;
  tokOut: DevicePtr;
  cache: DevicePtr;
  /** The attention's tile partials (mla-workspace.ts). */
  attnWork: DevicePtr;
}

/** The seed walk's EP fan-out payload in f32 words: xq (t·H bytes), xs (t·H/128), ids (t·K), weights (t·K). */
export function packWords(cfg: ModelConfig, t: number): number {
  return (t * cfg.hidden) / 4 + (t * cfg.hidden) / 128 + 2 * t * cfg.topk;
}

/** Where the packed MoE input sits in a rank's pack buffer, for t rows (ids then weights, adjacent). */
export function packAt(
  b: Buffers,
  cfg: ModelConfig,
  t: number,
): { xq: DevicePtr; xs: DevicePtr; ids: DevicePtr; wts: DevicePtr } {
  const H = cfg.hidden;
  const xs = ptrAdd(b.pack, t * H);
  const ids = ptrAdd(xs, ((t * H) / 128) * 4);
  return { xq: b.pack, xs, ids, wts: ptrAdd(ids, t * cfg.topk * 4) };
}

/** Where rank r's slots' contributions sit in buffer b (of either rank), for t rows. */
export function contribAt(b: Buffers, cfg: ModelConfig, r: number, t: number): DevicePtr {
  return ptrAdd(b.contrib, r * t * cfg.topk * cfg.hidden * 4);
}

/** Where the step's positions follow h in b.hAndPositions. */
export function positionsAt(b: Buffers, cfg: ModelConfig, t: number): DevicePtr {
  return ptrAdd(b.hAndPositions, t * cfg.hidden * 4);
}

/** The largest join a step of t rows moves, in f32 words (what the link must hold). */
export function largestJoin(cfg: ModelConfig, t: number): number {
  const { hidden: H, heads: N, headDim: Dv, topk: K } = cfg;
  return Math.max(t * H + t, t * N * Dv, t * H, packWords(cfg, t), t * K * H);
}

/** Bytes of each buffer rank r allocates for maxBatch B. */
function bufferSizes(cfg: ModelConfig, layout: Layout, r: number, B: number): Record<keyof Buffers, number> {
  const {
    hidden: H,
    heads: N,
    latent: R,
    headDim: Dv,
    experts: E,
    topk: K,
    ffn: F,
    vocab: V,
    layers: L,
    maxPos: P,
  } = cfg;
  const own = ownership(cfg, layout, r);
  const root = r === 0;
  return {
    hAndPositions: (B * H + B) * 4,
    hNorm: B * H * 4,
    qLatent: B * own.nh * R * 4,
    uPart: B * own.nh * Dv * 4,
    uFull: B * N * Dv * 4,
    yPart: B * own.woCols * 4,
    yFull: B * H * 4,
    yAr: B * H * 4,
    logitsE: B * E * 4,
    pack: packWords(cfg, B) * 4,
    xd: B * H * 4,
    act: B * K * F * 4,
    contrib: (layout === 'sharded' ? 2 : 1) * B * K * H * 4,
    fin: root ? B * H * 4 : 0,
    logitsV: root ? B * V * 4 : 0,
    tokIn: B * 4,
    tokOut: root ? B * 4 : 0,
    cache: B * L * P * R * 4,
    attnWork: mlaWorkspaceBytes(B, own.nh, P, R),
  };
}

/** Activation and cache bytes of rank 0 (the larger), for sizing the CPU reference's devices. */
export function activationBytes(cfg: ModelConfig, layout: Layout, maxBatch: number): number {
  return Object.values(bufferSizes(cfg, layout, 0, maxBatch)).reduce((a, b) => a + b, 0);
}

/**
 * Allocate rank r's buffers, poisoned; on failure frees what it took. The allocations are asked
 * for at once, so the worker answers them in one turn of its loop rather than one a turn.
 */
export async function allocBuffers(rank: Rank, cfg: ModelConfig, layout: Layout, B: number): Promise<Buffers> {
  const sizes = Object.entries(bufferSizes(cfg, layout, rank.rank, B)) as Array<[keyof Buffers, number]>;
  const out = {} as Buffers;
  const settled = await Promise.allSettled(
    sizes.map(async ([k, bytes]) => {
      out[k] = bytes > 0 ? await rank.alloc(bytes) : NO_PTR;
    }),
  );
  const failed = settled.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (failed) {
    await freeBuffers(rank, out);
    throw failed.reason;
  }
  try {
    // Poison: a kernel that reads what no kernel wrote shows NaN, not a plausible zero.
    for (const [k, bytes] of sizes) if (bytes > 0) rank.memset(out[k], 0xff, bytes);
  } catch (e) {
    await freeBuffers(rank, out);
    throw e;
  }
  return out;
}

/** Drain the rank (a queued kernel may still use them), then free its buffers, all at once; never throws. */
export async function freeBuffers(rank: Rank, b: Partial<Buffers>): Promise<void> {
  await rank.drain(60_000).catch(() => undefined);
  await Promise.all(Object.values(b).map((p) => (p ? rank.free(p).catch(() => undefined) : undefined)));
}
