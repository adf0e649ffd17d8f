/**
 * Ring record op codes and their argument layouts (f64 arguments, in order). A record's op is
 * executed by the worker that owns the ring, on its device's stream, in ring order.
 */
export enum Op {
  /** No arguments. Still advances "enqueued up to N": useful as a pure handshake point. */
  Nop = 0,
  /** ptr, n, value: f32 fill kernel. */
  Fill = 1,
  /** y, x, n, a: `y += a * x` kernel; `x` may live on the peer. */
  Axpy = 2,
  /** dst, src, bytes: device-to-device copy (either side may be the peer's). */
  Copy = 3,
  /** dst, dstDevice, src, srcDevice, bytes: copy-engine peer copy. */
  CopyPeer = 4,
  /** ptr, byteValue, bytes. */
  Memset = 5,
  /** event. */
  EventRecord = 6,
  /**
   * event, expectedRecords: the stream waits for the event's `expectedRecords`-th record. A wait
   * on a peer's event must carry `afterPeer` = the seq of the peer's record record, so it is never
   * enqueued before the record it means (CUDA would silently wait on the previous one).
   */
  EventWait = 7,
  /** slot, value: the GPU stores `value` into completion counter `slot` after all earlier work. */
  Signal = 8,
  /** dst, nWords, seed: the peer-probe pattern kernel. */
  ProbeWrite = 9,
  /** micros: occupy the stream for about that long. */
  Spin = 10,
  /** src, dst, n: f32 push by kernel stores (dst may be the peer's). */
  Push = 11,
  /** src, dst, rows, rowLen, srcStride, dstStride: strided f32 push. */
  Push2d = 12,
  /** dst, stage, n: `dst += stage`. */
  Fold = 13,
  /** x, in0, in1, out, selfSignal, peerSignal, rank, n, err, spinLimit, blocks: one-shot all-reduce. */
  OneShot = 14,
  /** Begin capturing this rank's stream into a graph. */
  BeginCapture = 15,
  /** slot: end the capture, instantiate it, keep it as graph `slot`. */
  EndCapture = 16,
  /** slot: launch graph `slot` on this rank's stream. */
  GraphLaunch = 17,
  /** send, recv, count: NCCL f32 sum all-reduce. */
  NcclAllReduce = 18,
  /** send, recv, count, root: NCCL broadcast. */
  NcclBroadcast = 19,
  /** send, recv, count: NCCL all-gather (rank-major). */
  NcclAllGather = 20,
  /** send, sendCount, recv, recvCount, peer: grouped NCCL send/recv. */
  NcclSendRecv = 21,
  /** reduce, rows, rowLen, sendSrc, localSrc, localDst, recvDst, dstStride: one LL join (the
   *  link's buffers come from `llConfigure`). */
  Ll = 22,
}

export const OP_COUNT = 23;

export function opName(op: number): string {
  return Op[op] ?? `unknown(${op})`;
}
