/**
 * `ll`: low latency. Every join is ONE kernel per rank and no events: values cross NVLink as
 * {value, epoch} words written straight into the peer's receive slots and each reader polls its
 * own memory (cu/tp_ll.cu), so a join costs one crossing, and on the host one launch per worker,
 * the two in parallel. Both ranks launch for every join, even the one with nothing to receive,
 * which keeps the two ranks' epochs in step.
 *
 * The ordering contract is the seeds', kept on the device: the consumer's buffers are written
 * only by the consumer itself (from its own slots), so no producer store can race the consumer's
 * pending writes (write-after-write); a reader sees a value only with its epoch (read-after-
 * write); and a sender reuses an epoch's slot set only after the peer acknowledged the epoch that
 * last used them.
 */
import { type DevicePtr, NO_PTR, ptrAdd } from '../binding.js';
import type { ArLink } from '../link.js';
import {
  RANKS,
  checkCount,
  checkGather,
  checkRank,
  gatherInPlace,
  slotOffset,
  type PerRank,
  type Transport,
} from './transport.js';

export class LlTransport implements Transport {
  readonly name = 'll' as const;
  /** No events between the ranks: each captures its own stream. */
  readonly graphMode = 'per-rank' as const;
  /** Per rank, where the next op's launch stores its times (timeNext; NO_PTR: not timed). */
  private readonly requested: DevicePtr[] = [NO_PTR, NO_PTR];
  /**
   * The op being issued's stamps, per rank. Reused, not allocated: this is the per-join path,
   * which stays a ring write and a launch.
   */
  private readonly taken: DevicePtr[] = [NO_PTR, NO_PTR];

  constructor(private readonly link: ArLink) {}

  timeNext(rank: number, stamp: DevicePtr): void {
    checkRank('timeNext', rank);
    this.requested[rank] = stamp;
  }

  /** Each rank's stamp for the op being issued: the request is spent by this op, whatever it does. */
  private takeStamps(): readonly DevicePtr[] {
    this.taken[0] = this.requested[0]!;
    this.taken[1] = this.requested[1]!;
    this.requested[0] = this.requested[1] = NO_PTR;
    return this.taken;
  }

  broadcast(from: number, src: DevicePtr, dst: PerRank, n: number): void {
    const stamp = this.takeStamps();
    checkRank('broadcast', from);
    checkCount('broadcast', n);
    if (n === 0) return;
    this.link.llFor(n);
    const to = 1 - from;
    const local = dst[from] !== src ? src : NO_PTR;
    this.link.ranks[from]!.ll(0, 1, n, src, local, local ? dst[from]! : NO_PTR, NO_PTR, n, stamp[from]);
    this.link.ranks[to]!.ll(0, 1, n, NO_PTR, NO_PTR, NO_PTR, dst[to]!, n, stamp[to]);
  }

  allGather(parts: PerRank, full: PerRank, span: number, rows = 1): void {
    const stamp = this.takeStamps();
    checkGather('allGather', span, rows);
    this.link.llFor(rows * span);
    for (const r of RANKS) {
      const local = gatherInPlace(parts[r]!, full[r]!, r, span, rows) ? NO_PTR : parts[r]!;
      this.link.ranks[r]!.ll(
        0,
        rows,
        span,
        parts[r]!,
        local,
        local ? ptrAdd(full[r]!, slotOffset(r, span)) : NO_PTR,
        ptrAdd(full[r]!, slotOffset(1 - r, span)),
        2 * span,
        stamp[r],
      );
    }
  }

  gather(root: number, parts: PerRank, full: DevicePtr, span: number, rows = 1): void {
    const stamp = this.takeStamps();
    checkRank('gather', root);
    checkGather('gather', span, rows);
    this.link.llFor(rows * span);
    const peer = 1 - root;
    const local = gatherInPlace(parts[root]!, full, root, span, rows) ? NO_PTR : parts[root]!;
    this.link.ranks[peer]!.ll(0, rows, span, parts[peer]!, NO_PTR, NO_PTR, NO_PTR, 2 * span, stamp[peer]);
    this.link.ranks[root]!.ll(
      0,
      rows,
      span,
      NO_PTR,
      local,
      local ? ptrAdd(full, slotOffset(root, span)) : NO_PTR,
      ptrAdd(full, slotOffset(peer, span)),
      2 * span,
      stamp[root],
    );
  }

  allReduce(x: PerRank, n: number, out: PerRank = x): void {
    const stamp = this.takeStamps();
    checkCount('allReduce', n);
    if (n === 0) return;
    this.link.llFor(n);
    for (const r of RANKS) this.link.ranks[r]!.ll(1, 1, n, x[r]!, NO_PTR, NO_PTR, out[r]!, n, stamp[r]);
  }
}
