/**
 * `host`: every cross-device byte bounces through pinned host memory (device -> host on the
 * producer's stream, host -> device on the consumer's), the baseline seed 000 replaces. It keeps
 * the same ordering contract as the others (one bounce buffer per direction, written only after
 * the consumer finished reading it), and it does not drain a stream either.
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

export class HostTransport implements Transport {
  readonly name = 'host' as const;
  readonly graphMode = 'multi-device' as const;
  constructor(private readonly link: ArLink) {}

  /** rows x rowLen f32 from `from`'s `src` to the peer's `dst`, through the host. */
  private bounce(
    from: number,
    src: DevicePtr,
    dst: DevicePtr,
    rows: number,
    rowLen: number,
    srcStride: number,
    dstStride: number,
  ): void {
    const to = 1 - from;
    const p = this.link.ranks[from]!,
      c = this.link.ranks[to]!;
    const host = this.link.hostFor(from, rows * rowLen);
    // The consumer's last host->device copy read this bounce buffer: let it finish first.
    this.link.waitForConsumer(from, to);
    for (let r = 0; r < rows; r++) p.copy(ptrAdd(host, r * rowLen * 4), ptrAdd(src, r * srcStride * 4), rowLen * 4);
    this.link.publish(from, to);
    for (let r = 0; r < rows; r++) c.copy(ptrAdd(dst, r * dstStride * 4), ptrAdd(host, r * rowLen * 4), rowLen * 4);
  }

  broadcast(from: number, src: DevicePtr, dst: PerRank, n: number): void {
    checkRank('broadcast', from);
    checkCount('broadcast', n);
    if (n === 0) return;
    if (dst[from] !== src) this.link.ranks[from]!.push(src, dst[from]!, n);
    this.bounce(from, src, dst[1 - from]!, 1, n, n, n);
  }

  allGather(parts: PerRank, full: PerRank, span: number, rows = 1): void {
    checkGather('allGather', span, rows);
    for (const r of RANKS) this.local(r, parts[r]!, full[r]!, span, rows);
    for (const from of RANKS)
      this.bounce(from, parts[from]!, ptrAdd(full[1 - from]!, slotOffset(from, span)), rows, span, span, 2 * span);
  }

  gather(root: number, parts: PerRank, full: DevicePtr, span: number, rows = 1): void {
    checkRank('gather', root);
    checkGather('gather', span, rows);
    this.local(root, parts[root]!, full, span, rows);
    const peer = 1 - root;
    this.bounce(peer, parts[peer]!, ptrAdd(full, slotOffset(peer, span)), rows, span, span, 2 * span);
  }

  allReduce(x: PerRank, n: number, out: PerRank = x): void {
    checkCount('allReduce', n);
    if (n === 0) return;
    const stage = this.link.stageFor(n);
    for (const from of RANKS) this.bounce(from, x[from]!, stage[1 - from]!, 1, n, n, n);
    for (const r of RANKS) {
      const rank = this.link.ranks[r]!;
      if (out[r] !== x[r]) rank.push(x[r]!, out[r]!, n);
      rank.fold(out[r]!, stage[r]!, n); // after the bounce landed: same stream
    }
  }

  private local(r: number, part: DevicePtr, full: DevicePtr, span: number, rows: number): void {
    if (gatherInPlace(part, full, r, span, rows)) return;
    const rank = this.link.ranks[r]!;
    if (rows === 1) rank.push(part, ptrAdd(full, slotOffset(r, span)), span);
    else rank.push2d(part, ptrAdd(full, slotOffset(r, span)), rows, span, span, 2 * span);
  }
}
