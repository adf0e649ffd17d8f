/**
 * The main thread's handle to one rank: hot-path enqueues are ring records (no CUDA call, no
 * message), cold calls go through the worker's control plane.
 */
import { RingProducer } from '../workers/ring.js';
import { Op } from '../workers/ops.js';
import type { WorkerHandle } from '../workers/worker-handle.js';

/**
 * An event owned by one rank. `records` counts the records enqueued so far and `lastRecordSeq`
 * is the ring seq of the newest: a wait on another rank carries both, so it is enqueued only
 * after the record it means (the handshake), and the CPU reference can check it means that one.
 */
export interface DeviceEvent {
  readonly handle: number;
  readonly rank: number;
  readonly timing: boolean;
  records: number;
  lastRecordSeq: number;
}

export class Rank {
  constructor(
    readonly rank: number,
    readonly ordinal: number,
    readonly ring: RingProducer,
    readonly control: WorkerHandle,
  ) {}

  // ---- hot path: one ring record each; each returns the record's seq ----

  nop(): number { this.ring.begin(Op.Nop); return this.ring.publish(); }

  fill(ptr: number, n: number, value: number): number {
    const a = this.ring.begin(Op.Fill), v = this.ring.args;
    v[a] = ptr; v[a + 1] = n; v[a + 2] = value;
    return this.ring.publish();
  }

  /** `y += a * x`; `x` may be the peer's memory (a pull over NVLink). */
  axpy(y: number, x: number, n: number, alpha: number): number {
    const a = this.ring.begin(Op.Axpy), v = this.ring.args;
    v[a] = y; v[a + 1] = x; v[a + 2] = n; v[a + 3] = alpha;
    return this.ring.publish();
  }

  copy(dst: number, src: number, bytes: number): number {
    const a = this.ring.begin(Op.Copy), v = this.ring.args;
    v[a] = dst; v[a + 1] = src; v[a + 2] = bytes;
    return this.ring.publish();
  }

  copyPeer(dst: number, dstDevice: number, src: number, srcDevice: number, bytes: number): number {
    const a = this.ring.begin(Op.CopyPeer), v = this.ring.args;
    v[a] = dst; v[a + 1] = dstDevice; v[a + 2] = src; v[a + 3] = srcDevice; v[a + 4] = bytes;
    return this.ring.publish();
  }

  memset(ptr: number, byteValue: number, bytes: number): number {
    const a = this.ring.begin(Op.Memset), v = this.ring.args;
    v[a] = ptr; v[a + 1] = byteValue; v[a + 2] = bytes;
    return this.ring.publish();
  }

  record(ev: DeviceEvent): number {
    if (ev.rank !== this.rank) throw new Error(`record: event ${ev.handle} belongs to rank ${ev.rank}, not rank ${this.rank}`);
    const a = this.ring.begin(Op.EventRecord);
    this.ring.args[a] = ev.handle;
    const seq = this.ring.publish();
    ev.records++;
    ev.lastRecordSeq = seq;
    return seq;
  }

  /**
   * This rank's stream waits for `ev`'s newest record. A peer's event makes the record carry
   * `afterPeer`, so the worker enqueues the wait only once the peer has enqueued that record.
   */
  wait(ev: DeviceEvent): number {
    if (ev.records === 0) throw new Error(`wait: event ${ev.handle} of rank ${ev.rank} has never been recorded; record it first`);
    const a = this.ring.begin(Op.EventWait, ev.rank === this.rank ? undefined : ev.lastRecordSeq);
    this.ring.args[a] = ev.handle;
    this.ring.args[a + 1] = ev.records;
    return this.ring.publish();
  }

  /** The GPU stores `value` into completion slot `slot` once everything before it is done. */
  signal(slot: number, value: number): number {
    const a = this.ring.begin(Op.Signal), v = this.ring.args;
    v[a] = slot; v[a + 1] = value;
    return this.ring.publish();
  }

  probeWrite(dst: number, words: number, seed: number): number {
    const a = this.ring.begin(Op.ProbeWrite), v = this.ring.args;
    v[a] = dst; v[a + 1] = words; v[a + 2] = seed;
    return this.ring.publish();
  }

  spin(micros: number): number {
    const a = this.ring.begin(Op.Spin);
    this.ring.args[a] = micros;
    return this.ring.publish();
  }

  /** `dst[i] = src[i]`, n f32, by kernel stores; `dst` may be the peer's. */
  push(src: number, dst: number, n: number): number {
    const a = this.ring.begin(Op.Push), v = this.ring.args;
    v[a] = src; v[a + 1] = dst; v[a + 2] = n;
    return this.ring.publish();
  }

  /** `rows` rows of `rowLen` f32 from `src` (row stride `srcStride`) to `dst` (`dstStride`). */
  push2d(src: number, dst: number, rows: number, rowLen: number, srcStride: number, dstStride: number): number {
    const a = this.ring.begin(Op.Push2d), v = this.ring.args;
    v[a] = src; v[a + 1] = dst; v[a + 2] = rows; v[a + 3] = rowLen; v[a + 4] = srcStride; v[a + 5] = dstStride;
    return this.ring.publish();
  }

  /** `dst += stage`, n f32. */
  fold(dst: number, stage: number, n: number): number {
    const a = this.ring.begin(Op.Fold), v = this.ring.args;
    v[a] = dst; v[a + 1] = stage; v[a + 2] = n;
    return this.ring.publish();
  }

  /**
   * This rank's half of the one-shot all-reduce (the peer must launch its half too); `x` is this
   * rank's input, staged by the kernel (0 if the caller staged it).
   */
  oneShot(x: number, in0: number, in1: number, out: number, selfSignal: number, peerSignal: number, n: number, err: number, spinLimit: number, blocks: number): number {
    const a = this.ring.begin(Op.OneShot), v = this.ring.args;
    v[a] = x; v[a + 1] = in0; v[a + 2] = in1; v[a + 3] = out; v[a + 4] = selfSignal; v[a + 5] = peerSignal;
    v[a + 6] = this.rank; v[a + 7] = n; v[a + 8] = err; v[a + 9] = spinLimit; v[a + 10] = blocks;
    return this.ring.publish();
  }

  beginCapture(): number { this.ring.begin(Op.BeginCapture); return this.ring.publish(); }
  endCapture(slot: number): number {
    const a = this.ring.begin(Op.EndCapture);
    this.ring.args[a] = slot;
    return this.ring.publish();
  }
  graphLaunch(slot: number): number {
    const a = this.ring.begin(Op.GraphLaunch);
    this.ring.args[a] = slot;
    return this.ring.publish();
  }

  ncclAllReduce(send: number, recv: number, count: number): number {
    const a = this.ring.begin(Op.NcclAllReduce), v = this.ring.args;
    v[a] = send; v[a + 1] = recv; v[a + 2] = count;
    return this.ring.publish();
  }
  ncclBroadcast(send: number, recv: number, count: number, root: number): number {
    const a = this.ring.begin(Op.NcclBroadcast), v = this.ring.args;
    v[a] = send; v[a + 1] = recv; v[a + 2] = count; v[a + 3] = root;
    return this.ring.publish();
  }
  ncclAllGather(send: number, recv: number, count: number): number {
    const a = this.ring.begin(Op.NcclAllGather), v = this.ring.args;
    v[a] = send; v[a + 1] = recv; v[a + 2] = count;
    return this.ring.publish();
  }
  ncclSendRecv(send: number, sendCount: number, recv: number, recvCount: number, peer: number): number {
    const a = this.ring.begin(Op.NcclSendRecv), v = this.ring.args;
    v[a] = send; v[a + 1] = sendCount; v[a + 2] = recv; v[a + 3] = recvCount; v[a + 4] = peer;
    return this.ring.publish();
  }

  /** True once the worker has enqueued record `seq` on its stream. */
  enqueued(seq: number): boolean { return this.ring.view.reached(seq); }

  // ---- cold path: control-plane calls ----

  alloc(bytes: number): Promise<number> { return this.control.call('alloc', bytes); }
  free(ptr: number): Promise<void> { return this.control.call('free', ptr); }
  upload(ptr: number, data: ArrayBufferView): Promise<void> {
    return this.control.call('upload', ptr, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  }
  download(ptr: number, bytes: number): Promise<Uint8Array> { return this.control.call('download', ptr, bytes); }
  async downloadF32(ptr: number, n: number): Promise<Float32Array> {
    const b = await this.download(ptr, n * 4);
    return new Float32Array(b.buffer, b.byteOffset, n);
  }
  async createEvent(timing = false): Promise<DeviceEvent> {
    const handle = await this.control.call('createEvent', timing);
    return { handle, rank: this.rank, timing, records: 0, lastRecordSeq: 0 };
  }
  destroyEvent(ev: DeviceEvent): Promise<void> { return this.control.call('destroyEvent', ev.handle); }
  hostAlloc(bytes: number): Promise<number> { return this.control.call('hostAlloc', bytes); }
  hostFree(ptr: number): Promise<void> { return this.control.call('hostFree', ptr); }
  elapsedMs(start: DeviceEvent, end: DeviceEvent): Promise<number> { return this.control.call('elapsedMs', start.handle, end.handle); }
  /** Until every record pushed so far has run to completion on the device. Cold: it waits. */
  drain(timeoutMs?: number): Promise<void> { return this.control.call('drain', timeoutMs); }
}
