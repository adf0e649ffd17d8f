/**
 * `oneshot`: the all-reduce is seed 000's one-shot kernel, one launch per rank and no events:
 * the two kernels meet at a per-block device barrier, each reads BOTH ranks' staged inputs in
 * global rank order and writes the full sum, so both ranks hold the same bits. Movement ops are
 * the push transport's.
 */
import type { ArLink } from '../link.js';
import { MovementTransport, kernelMover } from './movement.js';
import { RANKS, checkCount, type PerRank } from './transport.js';

export class OneShotTransport extends MovementTransport {
  constructor(link: ArLink) {
    super('oneshot', link, kernelMover);
  }

  override allReduce(x: PerRank, n: number, out: PerRank = x): void {
    checkCount('allReduce', n);
    if (n === 0) return;
    const link = this.link;
    const stage = link.stageFor(n);
    const blocks = link.blocksFor(n);
    // THE INPUTS ARE STAGED, NEVER READ IN PLACE: both ranks read both operands and each writes
    // its own output, which may be its input; reading x directly races the peer's write of the
    // sum (the seed saw a wrong number at n = 1). The kernel stages x itself, block by block,
    // before its entry barrier (one launch per rank instead of two); the exit barrier keeps the
    // next round's staging from landing while the peer still reads this one.
    for (const r of RANKS) {
      link.ranks[r]!.oneShot(
        x[r]!,
        stage[0]!,
        stage[1]!,
        out[r]!,
        link.signal[r]!,
        link.signal[1 - r]!,
        n,
        link.err[r]!,
        link.spinLimit,
        blocks,
      );
    }
  }
}
