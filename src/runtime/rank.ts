/**
 * The main thread's handle to one rank: hot-path enqueues are ring records (no CUDA call, no
 * message), cold calls go through the worker's control plane.
 */
import type { RingProducer } from '../workers/ring.js';
import { Op } from '../workers/ops.js';
import type { WorkerHandle } from '../workers/worker-handle.js';
import { boolean, bufferView, integer, number, record, type Check } from '../api/check.js';
import { type DevicePtr, type EventHandle, type HostPtr, NO_PTR } from './binding.js';

// The arguments of the operations a caller makes, checked on the main thread: a bad one reaching
// a worker would fault its ring and stop the runtime. Module constants, so a hot-path check
// costs a comparison and allocates nothing unless it throws.
const address = integer(0, Number.MAX_SAFE_INTEGER);
const count = integer(0, Number.MAX_SAFE_INTEGER);
const size = integer(1, Number.MAX_SAFE_INTEGER);
const u32 = integer(0, 0xffffffff);
const byte = integer(0, 255);
const optionalMs: Check<number | undefined> = (v, at) => (v === undefined ? undefined : integer(1, 3_600_000)(v, at));

const event = record<DeviceEvent>('a DeviceEvent (from createEvent)', ['handle', 'rank']);
const view = bufferView;

/**
 * An event owned by one rank. `records` counts the records enqueued so far and `lastRecordSeq`
 * is the ring seq of the newest: a wait on another rank carries both, so it is enqueued only
 * after the record it means (the handshake), and the CPU reference can check it means that one.
 */
export interface DeviceEvent {
  readonly handle: EventHandle;
  readonly rank: number;
  readonly timing: boolean;
  records: number;
  lastRecordSeq: number;
}

/**
 * Every address a rank's call takes is a DevicePtr (binding.ts): an allocation's, or one inside
 * it through ptrAdd; counts, sizes, strides and slots stay numbers.
 */
export class Rank {
  constructor(
    readonly rank: number,
    readonly ordinal: number,
    readonly ring: RingProducer,
    readonly control: WorkerHandle,
  ) {}

  // ---- hot path: one ring record each; each returns the record's seq ----

  /**
   * One record with up to six arguments. Fixed arity, not rest parameters: a join writes
   * several records and must not allocate an array for each.
   */
  private emit(op: Op, a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, afterPeer?: number): number {
    const a = this.ring.begin(op, afterPeer),
      v = this.ring.args;
    v[a] = a0;
    v[a + 1] = a1;
    v[a + 2] = a2;
    v[a + 3] = a3;
    v[a + 4] = a4;
    v[a + 5] = a5;
    return this.ring.publish();
  }

  nop(): number {
    return this.emit(Op.Nop);
  }
  fill(ptr: DevicePtr, n: number, value: number): number {
    address(ptr, 'fill: ptr');
    count(n, 'fill: n');
    number(value, 'fill: value');
    return this.emit(Op.Fill, ptr, n, value);
  }
  /** `y += a * x`; `x` may be the peer's memory (a pull over NVLink). */
  axpy(y: DevicePtr, x: DevicePtr, n: number, alpha: number): number {
    address(y, 'axpy: y');
    address(x, 'axpy: x');
    count(n, 'axpy: n');
    number(alpha, 'axpy: alpha');
    return this.emit(Op.Axpy, y, x, n, alpha);
  }
  copy(dst: DevicePtr, src: DevicePtr, bytes: number): number {
    address(dst, 'copy: dst');
    address(src, 'copy: src');
    count(bytes, 'copy: bytes');
    return this.emit(Op.Copy, dst, src, bytes);
  }
  copyPeer(dst: DevicePtr, dstDevice: number, src: DevicePtr, srcDevice: number, bytes: number): number {
    address(dst, 'copyPeer: dst');
    count(dstDevice, 'copyPeer: dstDevice');
    address(src, 'copyPeer: src');
    count(srcDevice, 'copyPeer: srcDevice');
    count(bytes, 'copyPeer: bytes');
    return this.emit(Op.CopyPeer, dst, dstDevice, src, srcDevice, bytes);
  }
  memset(ptr: DevicePtr, byteValue: number, bytes: number): number {
    address(ptr, 'memset: ptr');
    byte(byteValue, 'memset: byteValue');
    count(bytes, 'memset: bytes');
    return this.emit(Op.Memset, ptr, byteValue, bytes);
  }

  record(ev: DeviceEvent): number {
    event(ev, 'record: ev');
    if (ev.rank !== this.rank)
      throw new Error(`record: event ${ev.handle} belongs to rank ${ev.rank}, not rank ${this.rank}`);
    const seq = this.emit(Op.EventRecord, ev.handle);
    ev.records++;
    ev.lastRecordSeq = seq;
    return seq;
  }

  /**
   * This rank's stream waits for `ev`'s newest record. A peer's event makes the record carry
   * `afterPeer`, so the worker enqueues the wait only once the peer has enqueued that record.
   */
  wait(ev: DeviceEvent): number {
    event(ev, 'wait: ev');
    if (ev.records === 0)
      throw new Error(`wait: event ${ev.handle} of rank ${ev.rank} has never been recorded; record it first`);
    return this.emit(
      Op.EventWait,
      ev.handle,
      ev.records,
      0,
      0,
      0,
      0,
      ev.rank === this.rank ? undefined : ev.lastRecordSeq,
    );
  }

  /** The GPU stores `value` into completion slot `slot` once everything before it is done. */
  signal(slot: number, value: number): number {
    count(slot, 'signal: slot');
    u32(value, 'signal: value');
    return this.emit(Op.Signal, slot, value);
  }
  spin(micros: number): number {
    count(micros, 'spin: micros');
    return this.emit(Op.Spin, micros);
  }

  // The transports' building blocks: called by the link and the transports with what they
  // computed, one join's records at a time; unchecked here, checked by their callers.
  probeWrite(dst: DevicePtr, words: number, seed: number): number {
    return this.emit(Op.ProbeWrite, dst, words, seed);
  }

  /** `dst[i] = src[i]`, n f32, by kernel stores; `dst` may be the peer's. */
  push(src: DevicePtr, dst: DevicePtr, n: number): number {
    return this.emit(Op.Push, src, dst, n);
  }
  /** `rows` rows of `rowLen` f32 from `src` (row stride `srcStride`) to `dst` (`dstStride`). */
  push2d(src: DevicePtr, dst: DevicePtr, rows: number, rowLen: number, srcStride: number, dstStride: number): number {
    return this.emit(Op.Push2d, src, dst, rows, rowLen, srcStride, dstStride);
  }
  /** `dst += stage`, n f32. */
  fold(dst: DevicePtr, stage: DevicePtr, n: number): number {
    return this.emit(Op.Fold, dst, stage, n);
  }

  /**
   * This rank's half of the one-shot all-reduce (the peer must launch its half too); `x` is this
   * rank's input, staged by the kernel (NO_PTR if the caller staged it). Eleven arguments:
   * written out rather than through `emit`.
   */
  oneShot(
    x: DevicePtr,
    in0: DevicePtr,
    in1: DevicePtr,
    out: DevicePtr,
    selfSignal: DevicePtr,
    peerSignal: DevicePtr,
    n: number,
    err: DevicePtr,
    spinLimit: number,
    blocks: number,
  ): number {
    const a = this.ring.begin(Op.OneShot),
      v = this.ring.args;
    v[a] = x;
    v[a + 1] = in0;
    v[a + 2] = in1;
    v[a + 3] = out;
    v[a + 4] = selfSignal;
    v[a + 5] = peerSignal;
    v[a + 6] = this.rank;
    v[a + 7] = n;
    v[a + 8] = err;
    v[a + 9] = spinLimit;
    v[a + 10] = blocks;
    return this.ring.publish();
  }

  /**
   * One low-latency join on this rank (the link configured the buffers). Every LL join needs a
   * record on BOTH ranks. Nine arguments: written out. An address left out is NO_PTR; `stamp`
   * (NO_PTR: none) is where the join stores its own start and end times (the join profile).
   */
  ll(
    reduce: number,
    rows: number,
    rowLen: number,
    sendSrc: DevicePtr,
    localSrc: DevicePtr,
    localDst: DevicePtr,
    recvDst: DevicePtr,
    dstStride: number,
    stamp = NO_PTR,
  ): number {
    const a = this.ring.begin(Op.Ll),
      v = this.ring.args;
    v[a] = reduce;
    v[a + 1] = rows;
    v[a + 2] = rowLen;
    v[a + 3] = sendSrc;
    v[a + 4] = localSrc;
    v[a + 5] = localDst;
    v[a + 6] = recvDst;
    v[a + 7] = dstStride;
    v[a + 8] = stamp;
    return this.ring.publish();
  }

  /** Store the device clock (u64 ns) at `dst` once the stream's earlier work is done. */
  stampNow(dst: DevicePtr): number {
    return this.emit(Op.StampNow, dst);
  }

  beginCapture(): number {
    return this.emit(Op.BeginCapture);
  }
  endCapture(slot: number): number {
    return this.emit(Op.EndCapture, slot);
  }
  endCaptureChild(slot: number): number {
    return this.emit(Op.EndCaptureChild, slot);
  }
  graphLaunch(slot: number): number {
    return this.emit(Op.GraphLaunch, slot);
  }

  ncclAllReduce(send: DevicePtr, recv: DevicePtr, count: number): number {
    return this.emit(Op.NcclAllReduce, send, recv, count);
  }
  ncclBroadcast(send: DevicePtr, recv: DevicePtr, count: number, root: number): number {
    return this.emit(Op.NcclBroadcast, send, recv, count, root);
  }
  ncclAllGather(send: DevicePtr, recv: DevicePtr, count: number): number {
    return this.emit(Op.NcclAllGather, send, recv, count);
  }
  ncclSendRecv(send: DevicePtr, sendCount: number, recv: DevicePtr, recvCount: number, peer: number): number {
    return this.emit(Op.NcclSendRecv, send, sendCount, recv, recvCount, peer);
  }

  /** True once the worker has enqueued record `seq` on its stream. */
  enqueued(seq: number): boolean {
    return this.ring.view.reached(seq);
  }

  // ---- cold path: control-plane calls ----

  // Each checks its arguments before the call: a refusal is a rejected promise, like the call's own.

  async alloc(bytes: number): Promise<DevicePtr> {
    size(bytes, 'alloc: bytes');
    return this.control.call('alloc', bytes);
  }
  async free(ptr: DevicePtr): Promise<void> {
    address(ptr, 'free: ptr');
    return this.control.call('free', ptr);
  }
  async upload(ptr: DevicePtr, data: ArrayBufferView): Promise<void> {
    address(ptr, 'upload: ptr');
    view(data, 'upload: data');
    return this.control.call('upload', ptr, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  }
  async download(ptr: DevicePtr, bytes: number): Promise<Uint8Array> {
    address(ptr, 'download: ptr');
    count(bytes, 'download: bytes');
    return this.control.call('download', ptr, bytes);
  }
  /** n i32 words as the device holds them now, not waiting for the stream: diagnosis only. */
  async peekI32(ptr: DevicePtr, n: number): Promise<Int32Array> {
    address(ptr, 'peekI32: ptr');
    count(n, 'peekI32: n');
    return this.control.call('peekI32', ptr, n);
  }
  async downloadF32(ptr: DevicePtr, n: number): Promise<Float32Array> {
    address(ptr, 'downloadF32: ptr');
    count(n, 'downloadF32: n');
    const b = await this.download(ptr, n * 4);
    return new Float32Array(b.buffer, b.byteOffset, n);
  }
  async createEvent(timing = false): Promise<DeviceEvent> {
    boolean(timing, 'createEvent: timing');
    const handle = await this.control.call('createEvent', timing);
    return { handle, rank: this.rank, timing, records: 0, lastRecordSeq: 0 };
  }
  async destroyEvent(ev: DeviceEvent): Promise<void> {
    event(ev, 'destroyEvent: ev');
    return this.control.call('destroyEvent', ev.handle);
  }
  async hostAlloc(bytes: number): Promise<HostPtr> {
    size(bytes, 'hostAlloc: bytes');
    return this.control.call('hostAlloc', bytes);
  }
  async hostFree(ptr: HostPtr): Promise<void> {
    address(ptr, 'hostFree: ptr');
    return this.control.call('hostFree', ptr);
  }
  async elapsedMs(start: DeviceEvent, end: DeviceEvent): Promise<number> {
    event(start, 'elapsedMs: start');
    event(end, 'elapsedMs: end');
    return this.control.call('elapsedMs', start.handle, end.handle);
  }
  /** Until every record pushed so far has run to completion on the device. Cold: it waits. */
  async drain(timeoutMs?: number): Promise<void> {
    optionalMs(timeoutMs, 'drain: timeoutMs');
    return this.control.call('drain', timeoutMs);
  }
}
