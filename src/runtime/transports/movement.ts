/**
 * The transports that move bytes with one primitive and order them with the link's two edges
 * (seed 000's ArLink): `push` (kernel stores into peer memory) and `peer` (the copy engine).
 * Every movement is issued on the PRODUCER's stream, so once a join is enqueued the producer may
 * overwrite its input: nothing reads it later from another stream.
 */
import { type DevicePtr, ptrAdd } from '../binding.js';
import type { ArLink } from '../link.js';
import type { Rank } from '../rank.js';
import {
  RANKS,
  checkCount,
  checkGather,
  checkRank,
  gatherInPlace,
  slotOffset,
  type PerRank,
  type Transport,
  type TransportName,
} from './transport.js';

/** How a transport moves `rows` x `rowLen` f32 on `from`'s stream into `to`'s memory. */
export interface Mover {
  move(
    from: Rank,
    to: Rank,
    src: DevicePtr,
    dst: DevicePtr,
    rows: number,
    rowLen: number,
    srcStride: number,
    dstStride: number,
  ): void;
}

export const kernelMover: Mover = {
  move(from, _to, src, dst, rows, rowLen, srcStride, dstStride) {
    if (rows === 1) from.push(src, dst, rowLen);
    else from.push2d(src, dst, rows, rowLen, srcStride, dstStride);
  },
};

/**
 * The copy engine, one copy per row. Not `cudaMemcpyPeerAsync`: stream capture refuses it
 * (cudaErrorStreamCaptureUnsupported, seen on the two-H200 machine 2026-11-30, and seed 003 built
 * its peer copies as explicit graph nodes for the same reason). With unified addressing,
 * `cudaMemcpyAsync(cudaMemcpyDefault)` between two devices drives the same peer copy and can be
 * captured.
 */
export const copyEngineMover: Mover = {
  move(from, _to, src, dst, rows, rowLen, srcStride, dstStride) {
    for (let r = 0; r < rows; r++)
      from.copy(ptrAdd(dst, r * dstStride * 4), ptrAdd(src, r * srcStride * 4), rowLen * 4);
  },
};

export class MovementTransport implements Transport {
  readonly graphMode = 'multi-device' as const;
  constructor(
    readonly name: TransportName,
    protected readonly link: ArLink,
    private readonly mover: Mover,
  ) {}

  broadcast(from: number, src: DevicePtr, dst: PerRank, n: number): void {
    checkRank('broadcast', from);
    checkCount('broadcast', n);
    if (n === 0) return;
    const to = 1 - from;
    const r = this.link.ranks[from]!,
      peer = this.link.ranks[to]!;
    if (dst[from] !== src) this.mover.move(r, r, src, dst[from]!, 1, n, n, n);
    this.link.waitForConsumer(from, to);
    this.mover.move(r, peer, src, dst[to]!, 1, n, n, n);
    this.link.publish(from, to);
  }

  allGather(parts: PerRank, full: PerRank, span: number, rows = 1): void {
    checkGather('allGather', span, rows);
    const width = 2 * span;
    // Each rank writes its OWN slot locally and pushes it into the peer's same slot (at t > 1 the
    // slots interleave row by row), so the two directions never touch the same bytes and need
    // not wait for each other: both consumers publish "ready" before either producer waits, and
    // the two pushes run at once (measured serialised, the seed's order, at 17 us for 8 KB: a
    // chain of four kernels and three edges).
    for (const r of RANKS) this.link.ranks[r]!.record(this.link.ready[r]!);
    for (const r of RANKS) this.link.ranks[r]!.wait(this.link.ready[1 - r]!);
    for (const from of RANKS) {
      const to = 1 - from;
      const r = this.link.ranks[from]!,
        peer = this.link.ranks[to]!;
      if (!gatherInPlace(parts[from]!, full[from]!, from, span, rows)) {
        this.mover.move(r, r, parts[from]!, ptrAdd(full[from]!, slotOffset(from, span)), rows, span, span, width);
      }
      this.mover.move(r, peer, parts[from]!, ptrAdd(full[to]!, slotOffset(from, span)), rows, span, span, width);
      r.record(this.link.pushed[from]!);
    }
    for (const r of RANKS) this.link.ranks[r]!.wait(this.link.pushed[1 - r]!);
  }

  gather(root: number, parts: PerRank, full: DevicePtr, span: number, rows = 1): void {
    checkRank('gather', root);
    checkGather('gather', span, rows);
    const peer = 1 - root;
    const width = 2 * span;
    const rr = this.link.ranks[root]!,
      pr = this.link.ranks[peer]!;
    if (!gatherInPlace(parts[root]!, full, root, span, rows)) {
      this.mover.move(rr, rr, parts[root]!, ptrAdd(full, slotOffset(root, span)), rows, span, span, width);
    }
    this.link.waitForConsumer(peer, root);
    this.mover.move(pr, rr, parts[peer]!, ptrAdd(full, slotOffset(peer, span)), rows, span, span, width);
    this.link.publish(peer, root);
  }

  /**
   * Push-then-fold: each rank pushes its partial into the peer's staging, each folds what its
   * peer pushed. Both pushes are enqueued and recorded before either fold waits, so no stream
   * waits on a record that was not yet submitted. `a + b` is commutative in IEEE arithmetic, so
   * rank 0's `x0 + x1` and rank 1's `x1 + x0` are the same bits.
   */
  allReduce(x: PerRank, n: number, out: PerRank = x): void {
    checkCount('allReduce', n);
    if (n === 0) return;
    const stage = this.link.stageFor(n);
    for (const from of RANKS) {
      const to = 1 - from;
      // The peer's staging was READ by its fold last round: the same write-after-write edge.
      this.link.waitForConsumer(from, to);
      this.mover.move(this.link.ranks[from]!, this.link.ranks[to]!, x[from]!, stage[to]!, 1, n, n, n);
      this.link.ranks[from]!.record(this.link.pushed[from]!);
    }
    for (const r of RANKS) {
      const rank = this.link.ranks[r]!;
      rank.wait(this.link.pushed[1 - r]!);
      if (out[r] !== x[r]) rank.push(x[r]!, out[r]!, n);
      rank.fold(out[r]!, stage[r]!, n);
    }
  }
}
