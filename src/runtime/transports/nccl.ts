/**
 * `nccl`: NCCL from the system's libnccl, one communicator per device in this process, loaded
 * at run time so the addon loads where NCCL is absent. The engine users move to when they
 * outgrow one machine. A collective orders itself across ranks; each rank's part of it is one
 * ring record on its own stream.
 */
import { type DevicePtr, ptrAdd } from '../binding.js';
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

export class NcclTransport implements Transport {
  readonly name = 'nccl' as const;
  /** Collectives order themselves across ranks: each rank captures its own stream. */
  readonly graphMode = 'per-rank' as const;
  constructor(private readonly link: ArLink) {}

  broadcast(from: number, src: DevicePtr, dst: PerRank, n: number): void {
    checkRank('broadcast', from);
    checkCount('broadcast', n);
    if (n === 0) return;
    const to = 1 - from;
    this.link.ranks[from]!.ncclBroadcast(src, dst[from]!, n, from);
    this.link.ranks[to]!.ncclBroadcast(dst[to]!, dst[to]!, n, from);
  }

  allGather(parts: PerRank, full: PerRank, span: number, rows = 1): void {
    checkGather('allGather', span, rows);
    if (rows === 1) {
      for (const r of RANKS) {
        gatherInPlace(parts[r]!, full[r]!, r, span, rows);
        this.link.ranks[r]!.ncclAllGather(parts[r]!, full[r]!, span);
      }
      return;
    }
    // NCCL gathers rank-major; the walk wants token-major rows: gather into scratch, then
    // interleave locally.
    const scratch = this.link.scratchFor(2 * rows * span);
    for (const r of RANKS) {
      const rank = this.link.ranks[r]!;
      rank.ncclAllGather(parts[r]!, scratch[r]!, rows * span);
      for (const q of RANKS)
        rank.push2d(
          ptrAdd(scratch[r]!, q * rows * span * 4),
          ptrAdd(full[r]!, slotOffset(q, span)),
          rows,
          span,
          span,
          2 * span,
        );
    }
  }

  gather(root: number, parts: PerRank, full: DevicePtr, span: number, rows = 1): void {
    checkRank('gather', root);
    checkGather('gather', span, rows);
    const peer = 1 - root;
    const rr = this.link.ranks[root]!,
      pr = this.link.ranks[peer]!;
    if (!gatherInPlace(parts[root]!, full, root, span, rows)) {
      if (rows === 1) rr.push(parts[root]!, ptrAdd(full, slotOffset(root, span)), span);
      else rr.push2d(parts[root]!, ptrAdd(full, slotOffset(root, span)), rows, span, span, 2 * span);
    }
    const count = rows * span;
    const landing = rows === 1 ? ptrAdd(full, slotOffset(peer, span)) : this.link.scratchFor(count)[root]!;
    // A zero-count side of the grouped send/recv still names a valid pointer: its own buffer.
    pr.ncclSendRecv(parts[peer]!, count, parts[peer]!, 0, root);
    rr.ncclSendRecv(landing, 0, landing, count, peer);
    if (rows > 1) rr.push2d(landing, ptrAdd(full, slotOffset(peer, span)), rows, span, span, 2 * span);
  }

  allReduce(x: PerRank, n: number, out: PerRank = x): void {
    checkCount('allReduce', n);
    if (n === 0) return;
    for (const r of RANKS) this.link.ranks[r]!.ncclAllReduce(x[r]!, out[r]!, n);
  }
}
