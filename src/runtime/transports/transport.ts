/**
 * One interface for every cross-GPU transport. Written for any rank count; the kernels and the
 * link serve two ranks for now. Each call only writes ring records: it returns once the join is
 * described to both workers, never after waiting on a device.
 *
 * Layouts (f32 elements):
 * - broadcast: rank `from`'s `src` lands in every rank's `dst[r]`; in place when `dst[from] === src`.
 * - allGather: rank r's part is `rows` rows of `span`; every rank's `full` is token-major,
 *   row t holding the ranks' parts side by side: part r of row t at `t * (R * span) + r * span`.
 *   At rows = 1 that is the plain concatenation; at rows > 1 the gather is strided.
 * - gather: the same, but only `root`'s `full` is written (the `wo` concat onto root).
 * - allReduce: every rank's `out[r]` (default `x[r]`) becomes `x[0] + x[1]`, in global rank order,
 *   so every rank holds the same bits.
 */
import type { DevicePtr } from '../binding.js';

export type PerRank = readonly [DevicePtr, DevicePtr];

export const TRANSPORTS = ['host', 'peer', 'push', 'oneshot', 'll', 'nccl'] as const;
export type TransportName = (typeof TRANSPORTS)[number];

/** Both ranks, in order: one array for every join to iterate, none allocated per join. */
export const RANKS = [0, 1] as const;

export interface Transport {
  readonly name: TransportName;
  /** How a graph holding this transport's joins must be captured (see graph.ts). */
  readonly graphMode: 'multi-device' | 'per-rank';
  broadcast(from: number, src: DevicePtr, dst: PerRank, n: number): void;
  allGather(parts: PerRank, full: PerRank, span: number, rows?: number): void;
  gather(root: number, parts: PerRank, full: DevicePtr, span: number, rows?: number): void;
  allReduce(x: PerRank, n: number, out?: PerRank): void;
  /**
   * Transports whose joins are single kernels can time themselves (the join profile): the NEXT
   * op's launch on `rank` stores its start and end (u64 ns, device clock) at `stamp`. Absent: the
   * profile brackets the join with timing events instead.
   */
  timeNext?(rank: number, stamp: DevicePtr): void;
}

function count(what: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) {
    throw new RangeError(
      `${what} must be a whole number of f32 elements (an integer >= ${min}), got ${v}; a byte size that is not a multiple of 4 cannot be moved as f32`,
    );
  }
}

export function checkRank(op: string, r: number): void {
  if (r !== 0 && r !== 1) throw new RangeError(`${op}: rank must be 0 or 1, got ${r}`);
}

export function checkCount(op: string, n: number): void {
  count(`${op}: n`, n, 0);
}

export function checkGather(op: string, span: number, rows: number): void {
  count(`${op}: span`, span, 1);
  count(`${op}: rows`, rows, 1);
}

/** Where rank r's part goes in a token-major full buffer (bytes from its start). */
export function slotOffset(r: number, span: number): number {
  return r * span * 4;
}

/** True when rank r's part already sits in its own slot of its full buffer. */
export function gatherInPlace(part: DevicePtr, full: DevicePtr, r: number, span: number, rows: number): boolean {
  if (part !== full + slotOffset(r, span)) return false;
  if (rows !== 1)
    throw new RangeError(
      'allGather: an in-place gather (part inside full) is only defined at rows = 1; pass separate part buffers',
    );
  return true;
}
