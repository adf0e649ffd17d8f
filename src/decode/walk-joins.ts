/**
 * Every hop of the two-rank walks: one join each, through the layer's transport, between the
 * same per-rank buffers every step (made once here: a join builds no array, so the per-join path
 * stays a ring write and a launch). When the step is profiled, each is bracketed for the join
 * profile under its hop's name (join-profile.ts); `floats` below is what a join delivers to its
 * receiving rank (the profile's bytes / 4).
 *
 * The seed walk's five: fan-out, head all-gather, wo (gather onto root), ep fan-out, ep return.
 * The replicated walk's three: head all-gather, wo all-gather, ep exchange. With `wo:
 * "allreduce"` either walk's two `wo` hops become one all-reduce (hop `wo`).
 */
import type { PerRank, Transport } from '../runtime/transports/transport.js';
import type { ModelConfig } from './model-config.js';
import type { Hop, JoinProfiler } from './join-profile.js';
import { contribAt, packWords, type Buffers } from './walk-buffers.js';

type Pair = 'hAndPositions' | 'pack' | 'uPart' | 'uFull' | 'yPart' | 'yFull' | 'yAr' | 'contrib';

export class WalkJoins {
  /** The profiler, while the config profiles (prepare makes and closes it). */
  profiler: JoinProfiler | undefined;
  /** Set for the step being enqueued: whether its joins are profiled, and row 0's position. */
  profiling = false;
  token = 0;
  private readonly pairs: Record<Pair, PerRank>;
  /** Per row count t (index t): each rank's own slots inside its contrib buffer. */
  private readonly ownSlots: PerRank[] = [];
  /** Per row count t: rank 1's slots, in both ranks' contrib buffers. */
  private readonly peerSlots: PerRank[] = [];

  constructor(
    private readonly cfg: ModelConfig,
    maxBatch: number,
    private readonly bufs: readonly [Buffers, Buffers],
  ) {
    const [b0, b1] = bufs;
    const pair = (k: Pair): PerRank => [b0[k], b1[k]];
    this.pairs = {
      hAndPositions: pair('hAndPositions'),
      pack: pair('pack'),
      uPart: pair('uPart'),
      uFull: pair('uFull'),
      yPart: pair('yPart'),
      yFull: pair('yFull'),
      yAr: pair('yAr'),
      contrib: pair('contrib'),
    };
    for (let t = 0; t <= maxBatch; t++) {
      this.ownSlots.push([contribAt(b0, cfg, 0, t), contribAt(b1, cfg, 1, t)]);
      this.peerSlots.push([contribAt(b0, cfg, 1, t), contribAt(b1, cfg, 1, t)]);
    }
  }

  /** Seed walk: root's h and the positions to rank 1 (packed: t·H floats, then t words). */
  fanOut(l: number, t: number, tr: Transport): void {
    const n = t * this.cfg.hidden + t;
    this.begin('fan-out', l, tr, n);
    tr.broadcast(0, this.bufs[0].hAndPositions, this.pairs.hAndPositions, n);
    this.end();
  }

  /** Both ranks end with the whole u: the head parts side by side, token-major (strided at t > 1). */
  headAllGather(l: number, t: number, tr: Transport): void {
    const span = (this.cfg.heads / 2) * this.cfg.headDim;
    this.begin('head all-gather', l, tr, t * span);
    tr.allGather(this.pairs.uPart, this.pairs.uFull, span, t);
    this.end();
  }

  /** Seed walk: the column halves of u @ Wo onto root. */
  woGather(l: number, t: number, tr: Transport): void {
    const half = this.cfg.hidden / 2;
    this.begin('wo', l, tr, t * half);
    tr.gather(0, this.pairs.yPart, this.bufs[0].yFull, half, t);
    this.end();
  }

  /** Replicated walk: the column halves of u @ Wo onto both ranks. */
  woAllGather(l: number, t: number, tr: Transport): void {
    const half = this.cfg.hidden / 2;
    this.begin('wo all-gather', l, tr, t * half);
    tr.allGather(this.pairs.yPart, this.pairs.yFull, half, t);
    this.end();
  }

  /** `wo: "allreduce"`: the two partial products summed in rank order, the same bits on both ranks. */
  woAllReduce(l: number, t: number, tr: Transport): void {
    const n = t * this.cfg.hidden;
    this.begin('wo', l, tr, n);
    tr.allReduce(this.pairs.yAr, n);
    this.end();
  }

  /** Seed walk: root's packed MoE input (xq, xs, ids, weights) to rank 1. */
  epFanOut(l: number, t: number, tr: Transport): void {
    const n = packWords(this.cfg, t);
    this.begin('ep fan-out', l, tr, n);
    tr.broadcast(0, this.bufs[0].pack, this.pairs.pack, n);
    this.end();
  }

  /** Seed walk: rank 1's slots onto root (in place on rank 1). */
  epReturn(l: number, t: number, tr: Transport): void {
    const n = t * this.cfg.topk * this.cfg.hidden,
      dst = this.peerSlots[t]!;
    this.begin('ep return', l, tr, n);
    tr.broadcast(1, dst[1], dst, n);
    this.end();
  }

  /** Replicated walk: each rank's slots into the other's contrib buffer (an in-place all-gather). */
  epExchange(l: number, t: number, tr: Transport): void {
    const n = t * this.cfg.topk * this.cfg.hidden;
    this.begin('ep exchange', l, tr, n);
    tr.allGather(this.ownSlots[t]!, this.pairs.contrib, n);
    this.end();
  }

  /** No closure per join: the caller issues the join between begin and end. */
  private begin(hop: Hop, l: number, tr: Transport, floats: number): void {
    if (this.profiling) this.profiler!.beginJoin(hop, l, tr.name, floats * 4, this.token, tr);
  }

  private end(): void {
    if (this.profiling) this.profiler!.endJoin();
  }
}
