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
  /** reduce, rows, rowLen, sendSrc, localSrc, localDst, recvDst, dstStride, stamp: one LL join
   *  (the link's buffers come from `llConfigure`; stamp 0 or where the join times itself). */
  Ll = 22,
  // ---- the synthetic model's kernels (cu/model.h); arguments as in binding.ts's launchers ----
  /** dst, n, v0 .. v11: i32 values (a step's tokens or positions) into device memory. */
  SetI32 = 23,
  /** out, emb, tokens, t, H, V. */
  Embed = 24,
  /** out, input, gain, t, H. */
  Rmsnorm = 25,
  /** out, ldo, x, ldx, w, ldw, K, cols, t, accumulate (0 or 1), split (0 to 8). */
  Gemv = 26,
  /** cache, c, pos, t, layer, L, P, R. */
  CacheWrite = 27,
  /** u, ldu, q, ldq, cache (the layer's rows of slot 0), slotStride, pos, wuv, work, t, nh, P, R, Dv. */
  MlaAttention = 28,
  /** ids, wts, logits, t, E, K. */
  Router = 29,
  /** xq, xs, b, t, H. */
  Quantize = 30,
  /** xd, xq, xs, t, H. */
  Dequantize = 31,
  /** act, xd, ids, w1, w3, e0, nE, t, K, H, F. */
  ExpertUp = 32,
  /** contrib, act, ids, w2, e0, nE, t, K, H, F. */
  ExpertDown = 33,
  /** h, wts, ids, lo, hi, splitE, t, K, H. */
  MoeCombine = 34,
  /** out, logits, t, V. */
  Argmax = 35,
  /** src, offset, bytes: copy device memory into this rank's mailbox (mapped host memory the
   *  main thread reads once a completion counter says the copy is done). */
  ToMailbox = 36,
  /** slot: end the capture WITHOUT instantiating it: a child graph that a parent graph
   *  (seed 003's EP step) will hold. */
  EndCaptureChild = 37,
  /** dst: store the device clock (u64 ns) once the stream's earlier work is done: where the join
   *  profile's self-timed joins start their rank's step. */
  StampNow = 38,
  /** ids, wts, logits, xq, xs, xd, b, t, E, K, H: Router, Quantize and Dequantize in one launch. */
  RouteQuant = 39,
  /** q, a, wdkv, wq, cache (the layer's rows of slot 0), slotStride, pos, K, R, qcols, t, P. */
  LatentQuery = 40,
  /** h, wts, ids, lo, hi, splitE, t, K, H, out, gain: MoeCombine, then out = rmsnorm(h, gain). */
  MoeCombineNorm = 41,
  /** normOut, out, ldo, x, gain, w, ldw, K, cols, t: Rmsnorm, then the router's Gemv of it. */
  NormGemv = 42,
}

export const OP_COUNT = 43;

export function opName(op: number): string {
  return Op[op] ?? `unknown(${op})`;
}
