/**
 * The CPU reference backend: one emulated device per worker thread, over the shared state of
 * cpu-world.ts. Streams run each op at enqueue time, in enqueue order, so results are exact and
 * deterministic; what the GPU would do concurrently is modelled by the vector clocks, and an
 * access the GPU could race is an `OrderingError` instead of a silently right answer.
 *
 * It is the oracle GPU results are compared with and what CI runs, not a speed path.
 */
import { mlaShortPositions, mlaWorkspaceBytes } from '../decode/mla-workspace.js';
import { NORM_GEMV_MAX_COLS } from '../decode/router-product.js';
import * as mk from './cpu-model-kernels.js';
import type { DeviceApi } from './device-api.js';
import {
  asDevicePtr,
  asEventHandle,
  asHostPtr,
  asStreamHandle,
  type DevicePtr,
  type EventHandle,
  type HostPtr,
  type HostRegistration,
  type StreamHandle,
} from './binding.js';
import {
  ACCESS_ENTRIES,
  ACCESS_FIELDS,
  ADDRESS_UNIT,
  CpuWorldLayout,
  MAX_ALLOCS,
  MAX_EVENTS,
  type CpuWorldInit,
} from './cpu-world.js';
import { MemraError, type OrderingErrorCode } from '../api/errors.js';
import {
  AR_MAX_BLOCKS,
  LL_DEPTH,
  LL_MAX_VALUES,
  LL_STATE_BYTES,
  REFUSED_ENTRY,
  REFUSED_EXIT,
} from './link-constants.js';
import { CpuLink, SIG_BYTES } from './cpu-link.js';

/** An access the GPU could race, or a wait before its record: caught by the CPU reference. */
export class OrderingError extends MemraError<OrderingErrorCode> {}

const WRITE = 0;
const READ = 1;
const ALIGN = 256;
/** Host registrations live above every device's range. */
const HOST_BASE = 2 ** 50;
const HOST_UNIT = 2 ** 32;

const hex = (p: number): string => `0x${p.toString(16)}`;

const NO_GRAPHS =
  'CUDA graphs exist only on the CUDA backend; on the CPU reference a captured sequence is replayed by issuing it again';
const NO_NCCL =
  'the nccl transport needs the CUDA backend and libnccl.so.2; the CPU reference has no NCCL (choose host, peer, push or oneshot)';

/**
 * Whether two accesses share a byte. Each is [lo, hi) when `stride` is 0, else rows of `width`
 * bytes every `stride` bytes from lo up to hi (a strided gather's rows): two ranks' interleaved
 * rows of one token-major buffer do not touch, and tracking them by bounding range would call
 * every concurrent strided gather a race.
 */
export function overlaps(
  aLo: number,
  aHi: number,
  aStride: number,
  aWidth: number,
  bLo: number,
  bHi: number,
  bStride: number,
  bWidth: number,
): boolean {
  if (!(aLo < bHi && bLo < aHi)) return false;
  if (aStride === 0 && bStride === 0) return true;
  // Walk the rows of a strided side (the one with fewer rows) against the other side's pattern.
  const rowsOf = (lo: number, hi: number, stride: number): number =>
    stride === 0 ? 1 : Math.floor((hi - lo - 1) / stride) + 1;
  let [xLo, xHi, xs, xw, yLo, yHi, ys, yw] = [aLo, aHi, aStride, aWidth, bLo, bHi, bStride, bWidth];
  if (xs === 0 || (ys !== 0 && rowsOf(yLo, yHi, ys) < rowsOf(xLo, xHi, xs)))
    [xLo, xHi, xs, xw, yLo, yHi, ys, yw] = [yLo, yHi, ys, yw, xLo, xHi, xs, xw];
  for (let r = xLo; r < xHi; r += xs) {
    const rEnd = Math.min(r + xw, xHi);
    if (ys === 0) {
      if (r < yHi && yLo < rEnd) return true;
      continue;
    }
    // Rows k of y with yLo + k·ys < rEnd and yLo + k·ys + yw > r.
    const kMin = Math.max(0, Math.floor((r - yLo - yw) / ys) + 1);
    const kMax = Math.min(rowsOf(yLo, yHi, ys) - 1, Math.ceil((rEnd - yLo) / ys) - 1);
    if (kMin <= kMax) return true;
  }
  return false;
}

/**
 * Its parameters take plain numbers where DeviceApi takes a handle's kind: callers reach it
 * through DeviceApi, which keeps the kinds apart, and each number is checked here against what
 * this thread made (an unknown stream, event or address is refused by name).
 */
export class CpuDevice implements DeviceApi {
  private readonly layout: CpuWorldLayout;
  private readonly i32: Int32Array;
  private readonly f64: Float64Array;
  private readonly bytes: Uint8Array[];
  private readonly f32: Float32Array[];
  private readonly u32: Uint32Array[];
  private dev = -1;
  /** Bound in loopback: another lane (rank) may share this device. */
  private loopback = false;
  private readonly streams = new Set<number>();
  private nextStream = 1;
  private readonly events = new Set<number>();
  private readonly timing = new Set<number>();
  /** First-fit free lists this thread owns, per arena: [offset, bytes] sorted by offset. */
  private readonly heaps = new Map<number, Array<[number, number]>>();
  /** The TP link's kernels: the one-shot's barrier and the LL exchange, over this device's memory. */
  private readonly link: CpuLink;
  /** Live allocations this thread made: arena * MAX_ALLOCS + slot -> offset. */
  private readonly allocBySlot = new Map<number, number>();
  private readonly hostRegs = new Map<number, Uint32Array>();
  private nextReg = 1;
  private lastSlot = -1;
  private readonly sleeper = new Int32Array(new SharedArrayBuffer(4));

  /** `lane`: whose stream clock this thread keeps (cpu-world.ts); the runtime gives rank r lane r. */
  constructor(
    private readonly world: CpuWorldInit,
    private readonly lane: number,
  ) {
    if (!Number.isInteger(lane) || lane < 0 || lane >= world.lanes)
      throw new RangeError(`cpu backend: lane must be an integer in [0, ${world.lanes}), got ${lane}`);
    this.layout = new CpuWorldLayout(world.devices, world.lanes);
    this.i32 = new Int32Array(world.meta, 0, this.layout.i32Words);
    this.f64 = new Float64Array(world.meta, this.layout.f64Offset);
    this.bytes = world.arenas.map((a) => new Uint8Array(a));
    this.f32 = world.arenas.map((a) => new Float32Array(a));
    this.u32 = world.arenas.map((a) => new Uint32Array(a));
    this.link = new CpuLink({
      world,
      layout: this.layout,
      i32: this.i32,
      f64: this.f64,
      f32: this.f32,
      lane,
      device: () => this.dev,
      loopback: () => this.loopback,
      peerEnabled: (d) => this.peerEnabled(d),
      stream: (call, st) => this.stream(call, st),
      tick: () => this.tick(),
      resolve: (call, ptr, bytes) => this.resolve(call, ptr, bytes),
      access: (call, ptr, bytes, kind, epoch, kernel) => this.access(call, ptr, bytes, kind, epoch, kernel),
      storeNs: (call, ptr, ep) => this.storeNs(call, ptr, ep),
    });
  }

  // ---- devices ----
  deviceCount(): number {
    return this.world.devices;
  }
  canAccessPeer(device: number, peer: number): boolean {
    return device !== peer && this.inRange(device) && this.inRange(peer);
  }

  /**
   * `loopback`: share the device with other loopback binds (two ranks on one emulated device,
   * each with its own stream clock), as the addon's claim does; each takes its own part of the
   * device's memory.
   */
  bindDevice(ordinal: number, loopback = false): void {
    if (this.dev >= 0) throw new Error(`bindDevice: this thread already bound device ${this.dev}`);
    if (!this.inRange(ordinal)) {
      throw new RangeError(
        `device ordinal ${ordinal} is out of range: ${this.world.devices} devices visible (ordinals 0..${this.world.devices - 1})`,
      );
    }
    const claim = this.layout.claims + ordinal;
    if (!loopback && Atomics.compareExchange(this.i32, claim, 0, -1) !== 0) {
      throw new Error(
        `device ${ordinal} is already bound by another thread (worker): two ranks on one device are refused — ` +
          "a kernel's store into a peer pointer across two contexts on one card is undefined; give each rank its own device (or bind both in loopback: RuntimeOptions.loopback)",
      );
    }
    for (let held = Atomics.load(this.i32, claim); loopback; held = Atomics.load(this.i32, claim)) {
      if (held < 0)
        throw new Error(
          `bindDevice(${ordinal}, loopback): device ${ordinal} is bound by another thread (worker) without loopback; a loopback bind shares a device only with other loopback binds`,
        );
      if (Atomics.compareExchange(this.i32, claim, held, held + 1) === held) break;
    }
    this.dev = ordinal;
    this.loopback = loopback;
    Atomics.store(this.i32, this.layout.laneDevice + this.lane, ordinal + 1);
    const part = Math.floor(this.world.arenaBytes / this.world.lanes / ALIGN) * ALIGN;
    this.heaps.set(ordinal, loopback ? [[this.lane * part, part]] : [[0, this.world.arenaBytes]]);
    this.heaps.set(this.world.devices, [[this.lane * part, part]]);
  }
  boundDevice(): number {
    return this.dev;
  }

  releaseDevice(): void {
    if (this.dev < 0) return;
    for (const key of this.allocBySlot.keys()) Atomics.store(this.i32, this.layout.allocLive + key, 0);
    this.allocBySlot.clear();
    this.heaps.clear();
    this.streams.clear();
    this.events.clear();
    this.hostRegs.clear();
    if (this.loopback) Atomics.sub(this.i32, this.layout.claims + this.dev, 1);
    else {
      for (let p = 0; p < this.world.devices; p++)
        Atomics.store(this.i32, this.layout.peer + this.dev * this.world.devices + p, 0);
      Atomics.store(this.i32, this.layout.claims + this.dev, 0);
    }
    Atomics.store(this.i32, this.layout.laneDevice + this.lane, 0);
    this.dev = -1;
    this.loopback = false;
  }

  memGetInfo(): { free: number; total: number } {
    this.need('memGetInfo');
    return { free: this.heaps.get(this.dev)!.reduce((s, [, b]) => s + b, 0), total: this.world.arenaBytes };
  }

  enablePeerAccess(peer: number): void {
    this.need('enablePeerAccess');
    if (!this.canAccessPeer(this.dev, peer))
      throw new Error(`enablePeerAccess(peer=${peer}) on device ${this.dev}: not a peer device`);
    Atomics.store(this.i32, this.layout.peer + this.dev * this.world.devices + peer, 1);
  }
  disablePeerAccess(peer: number): void {
    this.need('disablePeerAccess');
    Atomics.store(this.i32, this.layout.peer + this.dev * this.world.devices + peer, 0);
  }

  // ---- streams ----
  streamCreate(): StreamHandle {
    this.need('streamCreate');
    const s = this.nextStream++;
    this.streams.add(s);
    return asStreamHandle(s);
  }
  streamDestroy(stream: number): void {
    this.stream('streamDestroy', stream);
    this.streams.delete(stream);
  }
  streamQuery(stream: number): boolean {
    this.stream('streamQuery', stream);
    return true;
  }
  streamSynchronize(stream: number): void {
    this.stream('streamSynchronize', stream);
  }

  // ---- events ----
  eventCreate(timing: boolean): EventHandle {
    this.need('eventCreate');
    for (let i = 0; i < MAX_EVENTS; i++) {
      const h = 1 + this.lane * MAX_EVENTS + i;
      if (this.events.has(h)) continue;
      this.events.add(h);
      if (timing) this.timing.add(h);
      else this.timing.delete(h);
      Atomics.store(this.i32, this.layout.eventGen + h - 1, 0);
      return asEventHandle(h);
    }
    throw new Error(`eventCreate on device ${this.dev}: out of event slots (${MAX_EVENTS})`);
  }
  eventDestroy(event: number): void {
    if (!this.events.delete(event))
      throw new Error(`eventDestroy(event=${event}) on device ${this.dev}: not an event this thread created`);
  }

  eventRecord(event: number, stream: number): void {
    this.stream('eventRecord', stream);
    if (!this.events.has(event))
      throw new Error(`eventRecord(event=${event}) on device ${this.dev}: not an event this thread created`);
    const ep = this.tick();
    const base = this.eventBase(event);
    this.f64[base] = performance.now();
    this.f64[base + 1] = this.lane;
    const L = this.world.lanes;
    for (let c = 0; c < L; c++)
      this.f64[base + 2 + c] = c === this.lane ? ep : this.f64[this.layout.knows + this.lane * L + c]!;
    Atomics.add(this.i32, this.layout.eventGen + event - 1, 1);
  }

  /** No graphs here (a captured sequence is issued again), so a mark is a record. */
  eventRecordMark(event: number, stream: number): void {
    this.eventRecord(event, stream);
  }

  streamWaitEvent(stream: number, event: number, expectedRecords?: number): void {
    this.stream('streamWaitEvent', stream);
    const gen = this.eventGenOf(event, 'streamWaitEvent');
    if (expectedRecords !== undefined && gen < expectedRecords) {
      throw new OrderingError(
        `streamWaitEvent on device ${this.dev}: event ${event} has been recorded ${gen} times but this wait means record ${expectedRecords}: ` +
          'the wait was enqueued before its record (CUDA would silently wait on the previous record). ' +
          "Issue the wait with afterPeer = the seq of the peer's record record.",
        'ERR_WAIT_BEFORE_RECORD',
      );
    }
    if (gen === 0) return; // like CUDA: waiting on a never-recorded event is a no-op
    const base = this.eventBase(event);
    const L = this.world.lanes;
    const row = this.layout.knows + this.lane * L;
    for (let c = 0; c < L; c++) {
      if (c === this.lane) continue;
      const e = this.f64[base + 2 + c]!;
      if (e > this.f64[row + c]!) this.f64[row + c] = e;
    }
    this.tick();
  }
  eventQuery(event: number): boolean {
    this.eventGenOf(event, 'eventQuery');
    return true;
  }
  eventElapsedMs(start: number, end: number): number {
    for (const e of [start, end]) {
      if (!this.timing.has(e)) throw new Error(`eventElapsedMs: event ${e} is not a timing event this thread created`);
      if (Atomics.load(this.i32, this.layout.eventGen + e - 1) === 0)
        throw new Error(`eventElapsedMs: event ${e} was never recorded`);
    }
    return this.f64[this.eventBase(end)]! - this.f64[this.eventBase(start)]!;
  }

  // ---- memory ----
  malloc(bytes: number): DevicePtr {
    this.need('malloc');
    return asDevicePtr(this.allocIn(this.dev, bytes, 'cudaMalloc'));
  }

  free(ptr: number): void {
    this.need('free');
    this.freeIn(this.dev, ptr, 'free');
  }

  hostAlloc(bytes: number): HostPtr {
    this.need('hostAlloc');
    return asHostPtr(this.allocIn(this.world.devices, bytes, 'cudaHostAlloc'));
  }

  hostFree(ptr: number): void {
    this.need('hostFree');
    this.freeIn(this.world.devices, ptr, 'hostFree');
  }

  private allocIn(arena: number, bytes: number, call: string): number {
    if (!Number.isSafeInteger(bytes) || bytes <= 0)
      throw new TypeError(`${call}: argument 'bytes' must be a positive safe integer, got ${bytes}`);
    const heap = this.heaps.get(arena)!;
    const size = Math.ceil(bytes / ALIGN) * ALIGN;
    const i = heap.findIndex(([, b]) => b >= size);
    if (i < 0) {
      const err = new Error(
        `${call}(bytes=${bytes}) on device ${this.dev}: out of memory (cpu reference arena of ${this.world.arenaBytes} bytes)`,
      );
      (err as Error & { code: string }).code = 'cudaErrorMemoryAllocation';
      throw err;
    }
    const [off, avail] = heap[i]!;
    if (avail === size) heap.splice(i, 1);
    else heap[i] = [off + size, avail - size];
    let slot = -1;
    // Claimed by compare-exchange (2: being filled in, not yet live): two threads allocate from
    // one arena's table, the pinned-host arena's always and a device's in loopback.
    for (let s = 0; s < MAX_ALLOCS; s++) {
      if (Atomics.compareExchange(this.i32, this.layout.allocLive + arena * MAX_ALLOCS + s, 0, 2) === 0) {
        slot = s;
        break;
      }
    }
    if (slot < 0) throw new Error(`${call} on device ${this.dev}: more than ${MAX_ALLOCS} live allocations`);
    const base = this.allocBase(arena, slot);
    this.f64.fill(0, base, base + this.layout.allocStride);
    this.f64[base] = off;
    this.f64[base + 1] = size;
    this.allocBySlot.set(arena * MAX_ALLOCS + slot, off);
    // Fresh memory is not zero on a GPU either: poison it.
    this.bytes[arena]!.fill(0xa5, off, off + size);
    Atomics.store(this.i32, this.layout.allocLive + arena * MAX_ALLOCS + slot, 1);
    return (arena + 1) * ADDRESS_UNIT + off;
  }

  private freeIn(arena: number, ptr: number, call: string): void {
    const off = ptr - (arena + 1) * ADDRESS_UNIT;
    let key = -1;
    for (const [k, o] of this.allocBySlot) if (o === off && Math.floor(k / MAX_ALLOCS) === arena) key = k;
    if (key < 0) throw new Error(`${call}(ptr=${hex(ptr)}) on device ${this.dev}: not an allocation this thread made`);
    const size = this.f64[this.allocBase(arena, key % MAX_ALLOCS) + 1]!;
    Atomics.store(this.i32, this.layout.allocLive + key, 0);
    this.allocBySlot.delete(key);
    if (this.lastSlot === key) this.lastSlot = -1;
    const heap = this.heaps.get(arena)!;
    heap.push([off, size]);
    heap.sort((a, b) => a[0] - b[0]);
    const merged: Array<[number, number]> = [];
    for (const r of heap) {
      const last = merged[merged.length - 1];
      if (last && last[0] + last[1] === r[0]) last[1] += r[1];
      else merged.push([r[0], r[1]]);
    }
    this.heaps.set(arena, merged);
  }

  memsetAsync(ptr: number, byteValue: number, bytes: number, stream: number): void {
    this.stream('memsetAsync', stream);
    const ep = this.tick();
    const [d, off] = this.access('memsetAsync', ptr, bytes, WRITE, ep, false);
    this.bytes[d]!.fill(byteValue & 0xff, off, off + bytes);
  }

  memcpyAsync(dst: number, src: number, bytes: number, stream: number): void {
    this.stream('memcpyAsync', stream);
    const ep = this.tick();
    const [sd, so] = this.access('memcpyAsync(src)', src, bytes, READ, ep, false);
    if (dst >= HOST_BASE) {
      // Into registered (mapped) host memory: the mailbox a step's tokens come back through.
      this.hostBytes('memcpyAsync(dst)', dst, bytes).set(this.bytes[sd]!.subarray(so, so + bytes));
      return;
    }
    const [dd, dOff] = this.access('memcpyAsync(dst)', dst, bytes, WRITE, ep, false);
    this.bytes[dd]!.set(this.bytes[sd]!.subarray(so, so + bytes), dOff);
  }

  memcpyPeerAsync(dst: number, dstDevice: number, src: number, srcDevice: number, bytes: number, stream: number): void {
    if (this.deviceOf(dst) !== dstDevice || this.deviceOf(src) !== srcDevice) {
      throw new Error(
        `memcpyPeerAsync: dst ${hex(dst)} is not on device ${dstDevice} or src ${hex(src)} is not on device ${srcDevice}`,
      );
    }
    this.memcpyAsync(dst, src, bytes, stream);
  }

  upload(dst: number, src: ArrayBufferView): void {
    this.need('upload');
    const [d, off] = this.resolve('upload', dst, src.byteLength);
    if (d !== this.dev) throw new Error(`upload: ${hex(dst)} is on device ${d}, not this thread's device ${this.dev}`);
    this.bytes[d]!.set(new Uint8Array(src.buffer, src.byteOffset, src.byteLength), off);
  }

  download(dst: ArrayBufferView, src: number): void {
    this.need('download');
    const [d, off] = this.resolve('download', src, dst.byteLength);
    if (d !== this.dev)
      throw new Error(`download: ${hex(src)} is on device ${d}, not this thread's device ${this.dev}`);
    new Uint8Array(dst.buffer, dst.byteOffset, dst.byteLength).set(this.bytes[d]!.subarray(off, off + dst.byteLength));
  }

  hostRegister(view: ArrayBufferView): HostRegistration {
    this.need('hostRegister');
    if (!(view.buffer instanceof SharedArrayBuffer))
      throw new TypeError('hostRegister: the view must be over a SharedArrayBuffer');
    const id = this.nextReg++;
    const words = Math.floor(view.byteLength / 4);
    this.hostRegs.set(id, new Uint32Array(view.buffer, view.byteOffset, words));
    const ptr = HOST_BASE + id * HOST_UNIT;
    return { hostPtr: asHostPtr(ptr), devicePtr: asDevicePtr(ptr), byteOffset: 0, bytes: words * 4 };
  }
  hostUnregister(hostPtr: number): void {
    if (!this.hostRegs.delete(Math.floor((hostPtr - HOST_BASE) / HOST_UNIT)))
      throw new Error(`hostUnregister(${hex(hostPtr)}): not registered by this thread`);
  }

  // ---- kernels ----
  launchFillF32(ptr: number, n: number, value: number, stream: number): void {
    this.stream('launchFillF32', stream);
    const ep = this.tick();
    const [d, off] = this.access('launchFillF32', ptr, n * 4, WRITE, ep, true);
    this.f32[d]!.fill(value, off / 4, off / 4 + n);
  }

  launchAxpyF32(y: number, x: number, n: number, a: number, stream: number): void {
    this.stream('launchAxpyF32', stream);
    const ep = this.tick();
    const [xd, xo] = this.access('launchAxpyF32(x)', x, n * 4, READ, ep, true);
    const [yd, yo] = this.access('launchAxpyF32(y)', y, n * 4, WRITE, ep, true);
    const xs = this.f32[xd]!,
      ys = this.f32[yd]!;
    const xi = xo / 4,
      yi = yo / 4;
    // a*x of two f32 is exact in f64, so one rounding to f32 matches the GPU's fused multiply-add.
    for (let i = 0; i < n; i++) ys[yi + i] = ys[yi + i]! + a * xs[xi + i]!;
  }

  /** `bytes` of registered host memory at `ptr` (hostRegister's device pointer). */
  private hostBytes(call: string, ptr: number, bytes: number): Uint8Array {
    const id = Math.floor((ptr - HOST_BASE) / HOST_UNIT);
    const view = this.hostRegs.get(id);
    const off = ptr - HOST_BASE - id * HOST_UNIT;
    if (!view || off < 0 || off + bytes > view.byteLength)
      throw new Error(`${call}: [${hex(ptr)}, +${bytes}) is not inside memory registered with hostRegister`);
    return new Uint8Array(view.buffer, view.byteOffset + off, bytes);
  }

  launchSignal(counter: number, value: number, stream: number): void {
    this.stream('launchSignal', stream);
    this.tick();
    const id = Math.floor((counter - HOST_BASE) / HOST_UNIT);
    const view = this.hostRegs.get(id);
    const word = (counter - HOST_BASE - id * HOST_UNIT) / 4;
    if (!view || !Number.isInteger(word) || word >= view.length)
      throw new Error(`launchSignal: ${hex(counter)} is not a registered host word`);
    Atomics.store(view, word, value >>> 0);
  }

  /** `*dst = now`, in nanoseconds of the process's monotonic clock (the CPU's %globaltimer). */
  launchStampNow(dst: number, stream: number): void {
    this.stream('launchStampNow', stream);
    this.storeNs('launchStampNow', dst, this.tick());
  }

  private storeNs(call: string, ptr: number, ep: number): void {
    const [d, off] = this.access(call, ptr, 8, WRITE, ep, true);
    const ns = process.hrtime.bigint();
    this.u32[d]![off / 4] = Number(ns & 0xffffffffn);
    this.u32[d]![off / 4 + 1] = Number(ns >> 32n);
  }

  launchProbeWrite(dst: number, n: number, seed: number, stream: number): void {
    this.stream('launchProbeWrite', stream);
    const ep = this.tick();
    const [d, off] = this.access('launchProbeWrite', dst, n * 4, WRITE, ep, true);
    const u = this.u32[d]!,
      b = off / 4;
    for (let i = 0; i < n; i++) u[b + i] = (Math.imul(i, 0x9e3779b1) ^ seed) >>> 0;
  }

  /** Reads the bytes as the GPU kernel does (a smoke run of the bench's floor, not a figure). */
  launchReadFloor(ptr: number, bytes: number, sink: number, stream: number): void {
    this.stream('launchReadFloor', stream);
    const ep = this.tick();
    const n = Math.floor(bytes / 16) * 4;
    const [d, off] = this.access('launchReadFloor(ptr)', ptr, n * 4, READ, ep, true);
    const u = this.u32[d]!,
      b = off / 4;
    let acc = 0;
    for (let i = 0; i < n; i++) acc ^= u[b + i]!;
    if (acc >>> 0 === 0x9e3779b9) {
      const [sd, so] = this.access('launchReadFloor(sink)', sink, 4, WRITE, ep, true);
      this.u32[sd]![so / 4] = acc >>> 0;
    }
  }

  launchSpin(microseconds: number, stream: number): void {
    this.stream('launchSpin', stream);
    this.tick();
    Atomics.wait(this.sleeper, 0, 0, microseconds / 1000);
  }

  // ---- the TP link's kernels (seed 000) ----
  arSignalBytes(): number {
    return SIG_BYTES;
  }
  arMaxBlocks(): number {
    return AR_MAX_BLOCKS;
  }
  refusalWords(): { entry: number; exit: number } {
    return { entry: REFUSED_ENTRY, exit: REFUSED_EXIT };
  }

  launchPush(src: number, dst: number, n: number, stream: number): void {
    this.stream('launchPush', stream);
    const ep = this.tick();
    const [sd, so] = this.access('launchPush(src)', src, n * 4, READ, ep, true);
    const [dd, dOff] = this.access('launchPush(dst)', dst, n * 4, WRITE, ep, true);
    this.f32[dd]!.set(this.f32[sd]!.subarray(so / 4, so / 4 + n), dOff / 4);
  }

  launchPush2d(
    src: number,
    dst: number,
    rows: number,
    rowLen: number,
    srcStride: number,
    dstStride: number,
    stream: number,
  ): void {
    this.stream('launchPush2d', stream);
    if (rows === 0 || rowLen === 0) return;
    const ep = this.tick();
    // Tracked row by row (stride and width), so two ranks' interleaved rows are not a race.
    const [sd, so] = this.access(
      'launchPush2d(src)',
      src,
      ((rows - 1) * srcStride + rowLen) * 4,
      READ,
      ep,
      true,
      srcStride * 4,
      rowLen * 4,
    );
    const [dd, dOff] = this.access(
      'launchPush2d(dst)',
      dst,
      ((rows - 1) * dstStride + rowLen) * 4,
      WRITE,
      ep,
      true,
      dstStride * 4,
      rowLen * 4,
    );
    const from = this.f32[sd]!,
      to = this.f32[dd]!;
    for (let r = 0; r < rows; r++) {
      const s0 = so / 4 + r * srcStride;
      to.set(from.subarray(s0, s0 + rowLen), dOff / 4 + r * dstStride);
    }
  }

  launchFold(dst: number, stage: number, n: number, stream: number): void {
    this.stream('launchFold', stream);
    const ep = this.tick();
    const [sd, so] = this.access('launchFold(stage)', stage, n * 4, READ, ep, true);
    const [dd, dOff] = this.access('launchFold(dst)', dst, n * 4, WRITE, ep, true);
    const a = this.f32[dd]!,
      b = this.f32[sd]!;
    for (let i = 0; i < n; i++) a[dOff / 4 + i] = a[dOff / 4 + i]! + b[so / 4 + i]!;
  }

  launchOneShot(...args: Parameters<CpuLink['launchOneShot']>): void {
    this.link.launchOneShot(...args);
  }

  llStateBytes(): number {
    return LL_STATE_BYTES;
  }
  llDepth(): number {
    return LL_DEPTH;
  }
  llMaxValues(): number {
    return LL_MAX_VALUES;
  }

  llConfigure(...args: Parameters<CpuLink['llConfigure']>): void {
    this.link.llConfigure(...args);
  }

  /** The reference has no launches to save: every join runs as the kernel does, the server never. */
  llServeStats(_deep?: boolean): { jobs: number; launches: number } {
    return { jobs: 0, launches: 0 };
  }

  launchLl(...args: Parameters<CpuLink['launchLl']>): void {
    this.link.launchLl(...args);
  }

  // ---- the model's kernels (cpu-model-kernels.ts: the f32 operations of the in-process model) ----
  modelMaxRows(): number {
    return 8;
  }
  launchGenWeights(
    dst: number,
    seed: string,
    id: number,
    base: number,
    rows: number,
    srcCols: number,
    colStart: number,
    cols: number,
    kind: number,
    scale: number,
    stream: number,
  ): void {
    mk.genWeights(
      this.kernel('launchGenWeights', stream),
      dst,
      seed,
      id,
      base,
      rows,
      srcCols,
      colStart,
      cols,
      kind,
      scale,
    );
  }
  launchSetI32(dst: number, values: readonly number[], stream: number): void {
    mk.setI32(this.kernel('launchSetI32', stream), dst, values);
  }
  launchEmbed(out: number, emb: number, tokens: number, t: number, H: number, V: number, stream: number): void {
    mk.embed(this.kernel('launchEmbed', stream), out, emb, tokens, t, H, V);
  }
  launchRmsnorm(out: number, input: number, gain: number, t: number, H: number, stream: number): void {
    mk.rmsnormRows(this.kernel('launchRmsnorm', stream), out, input, gain, t, H);
  }
  launchGemv(
    out: number,
    ldo: number,
    x: number,
    ldx: number,
    w: number,
    ldw: number,
    K: number,
    cols: number,
    t: number,
    accumulate: boolean,
    split: number,
    stream: number,
  ): void {
    // The split orders the GPU's sum; the oracle sums in k order whatever it is.
    if (!Number.isInteger(split) || split < 0 || split > 8)
      throw new TypeError(`launchGemv: argument 'split' must be an integer in [0, 8], got ${split}`);
    mk.gemv(this.kernel('launchGemv', stream), out, ldo, x, ldx, w, ldw, K, cols, t, accumulate);
  }
  launchNormGemv(
    normOut: number,
    out: number,
    ldo: number,
    x: number,
    gain: number,
    w: number,
    ldw: number,
    K: number,
    cols: number,
    t: number,
    stream: number,
  ): void {
    if (!Number.isInteger(cols) || cols < 1 || cols > NORM_GEMV_MAX_COLS)
      throw new TypeError(
        `launchNormGemv: argument 'cols' must be an integer in [1, ${NORM_GEMV_MAX_COLS}], got ${cols}`,
      );
    // The two kernels' work in their order: on the GPU one launch gives the same bits.
    mk.rmsnormRows(this.kernel('launchNormGemv', stream), normOut, x, gain, t, K);
    mk.gemv(this.kernel('launchNormGemv', stream), out, ldo, normOut, K, w, ldw, K, cols, t, false);
  }
  launchLatentQuery(
    q: number,
    a: number,
    wdkv: number,
    wq: number,
    cache: number,
    slotStride: number,
    pos: number,
    K: number,
    R: number,
    qcols: number,
    t: number,
    P: number,
    stream: number,
  ): void {
    mk.latentQuery(this.kernel('launchLatentQuery', stream), q, a, wdkv, wq, cache, slotStride, pos, K, R, qcols, t, P);
  }
  launchCacheWrite(
    cache: number,
    c: number,
    pos: number,
    t: number,
    layer: number,
    L: number,
    P: number,
    R: number,
    stream: number,
  ): void {
    mk.cacheWrite(this.kernel('launchCacheWrite', stream), cache, c, pos, t, layer, L, P, R);
  }
  launchMlaAttention(
    u: number,
    ldu: number,
    q: number,
    ldq: number,
    cache: number,
    slotStride: number,
    pos: number,
    wuv: number,
    _work: number,
    t: number,
    nh: number,
    P: number,
    R: number,
    Dv: number,
    stream: number,
  ): void {
    // The GPU's tile partials live in `work`; here the oracle's two-pass softmax needs none.
    mk.mlaAttention(
      this.kernel('launchMlaAttention', stream),
      u,
      ldu,
      q,
      ldq,
      cache,
      slotStride,
      pos,
      wuv,
      t,
      nh,
      P,
      R,
      Dv,
    );
  }
  mlaWorkspaceBytes(t: number, nh: number, P: number, R: number): number {
    return mlaWorkspaceBytes(t, nh, P, R);
  }
  mlaShortPositions(R: number): number {
    return mlaShortPositions(R);
  }
  launchRouter(ids: number, wts: number, logits: number, t: number, E: number, K: number, stream: number): void {
    mk.router(this.kernel('launchRouter', stream), ids, wts, logits, t, E, K);
  }
  launchQuantize(xq: number, xs: number, b: number, t: number, H: number, stream: number): void {
    mk.quantize(this.kernel('launchQuantize', stream), xq, xs, b, t, H);
  }
  launchRouteQuant(
    ids: number,
    wts: number,
    logits: number,
    xq: number,
    xs: number,
    xd: number,
    b: number,
    t: number,
    E: number,
    K: number,
    H: number,
    stream: number,
  ): void {
    const m = this.kernel('launchRouteQuant', stream);
    mk.router(m, ids, wts, logits, t, E, K);
    mk.quantize(m, xq, xs, b, t, H);
    mk.dequantize(m, xd, xq, xs, t, H);
  }
  launchDequantize(xd: number, xq: number, xs: number, t: number, H: number, stream: number): void {
    mk.dequantize(this.kernel('launchDequantize', stream), xd, xq, xs, t, H);
  }
  launchExpertUp(
    act: number,
    xd: number,
    ids: number,
    w1: number,
    w3: number,
    e0: number,
    nE: number,
    t: number,
    K: number,
    H: number,
    F: number,
    stream: number,
  ): void {
    mk.expertUp(this.kernel('launchExpertUp', stream), act, xd, ids, w1, w3, e0, nE, t, K, H, F);
  }
  launchExpertDown(
    contrib: number,
    act: number,
    ids: number,
    w2: number,
    e0: number,
    nE: number,
    t: number,
    K: number,
    H: number,
    F: number,
    stream: number,
  ): void {
    mk.expertDown(this.kernel('launchExpertDown', stream), contrib, act, ids, w2, e0, nE, t, K, H, F);
  }
  launchMoeCombine(
    h: number,
    wts: number,
    ids: number,
    lo: number,
    hi: number,
    splitE: number,
    t: number,
    K: number,
    H: number,
    stream: number,
  ): void {
    mk.moeCombine(this.kernel('launchMoeCombine', stream), h, wts, ids, lo, hi, splitE, t, K, H);
  }
  launchMoeCombineNorm(
    h: number,
    wts: number,
    ids: number,
    lo: number,
    hi: number,
    splitE: number,
    t: number,
    K: number,
    H: number,
    out: number,
    gain: number,
    stream: number,
  ): void {
    // The two kernels' work in their order: on the GPU one launch gives the same bits.
    mk.moeCombine(this.kernel('launchMoeCombineNorm', stream), h, wts, ids, lo, hi, splitE, t, K, H);
    mk.rmsnormRows(this.kernel('launchMoeCombineNorm', stream), out, h, gain, t, H);
  }
  launchArgmax(out: number, logits: number, t: number, V: number, stream: number): void {
    mk.argmaxRows(this.kernel('launchArgmax', stream), out, logits, t, V);
  }

  /** One kernel's memory: every view is an access at this launch's epoch, checked and recorded. */
  private kernel(call: string, stream: number): mk.KernelMemory {
    this.stream(call, stream);
    const ep = this.tick();
    const at = (name: string, ptr: number, bytes: number, kind: number): [ArrayBufferLike, number] => {
      const [d, off] = this.access(`${call}(${name})`, ptr, bytes, kind === mk.WRITE_ACCESS ? WRITE : READ, ep, true);
      return [this.bytes[d]!.buffer, this.bytes[d]!.byteOffset + off];
    };
    return {
      f32: (name, ptr, n, kind) => {
        const [b, o] = at(name, ptr, n * 4, kind);
        return new Float32Array(b, o, n);
      },
      i32: (name, ptr, n, kind) => {
        const [b, o] = at(name, ptr, n * 4, kind);
        return new Int32Array(b, o, n);
      },
      u16: (name, ptr, n, kind) => {
        const [b, o] = at(name, ptr, n * 2, kind);
        return new Uint16Array(b, o, n);
      },
      u8: (name, ptr, n, kind) => {
        const [b, o] = at(name, ptr, n, kind);
        return new Uint8Array(b, o, n);
      },
    };
  }

  // ---- CUDA graphs and NCCL do not exist here ----
  streamBeginCapture(): void {
    throw new Error(NO_GRAPHS);
  }
  streamEndCapture(): never {
    throw new Error(NO_GRAPHS);
  }
  streamEndCaptureChild(): never {
    throw new Error(NO_GRAPHS);
  }
  childGraphDestroy(): void {
    throw new Error(NO_GRAPHS);
  }
  parentGraphBuild(): never {
    throw new Error(NO_GRAPHS);
  }
  graphLaunch(): void {
    throw new Error(NO_GRAPHS);
  }
  graphDestroy(): void {
    throw new Error(NO_GRAPHS);
  }
  ncclLoad(): number {
    throw Object.assign(new Error(NO_NCCL), { code: 'MEMRA_NCCL_MISSING' });
  }
  ncclGetUniqueId(): Uint8Array {
    throw new Error(NO_NCCL);
  }
  ncclCommInitRank(): never {
    throw new Error(NO_NCCL);
  }
  ncclCommDestroy(): void {
    throw new Error(NO_NCCL);
  }
  ncclAllReduceF32(): void {
    throw new Error(NO_NCCL);
  }
  ncclBroadcastF32(): void {
    throw new Error(NO_NCCL);
  }
  ncclAllGatherF32(): void {
    throw new Error(NO_NCCL);
  }
  ncclSendRecvF32(): void {
    throw new Error(NO_NCCL);
  }

  // ---- internals ----
  private inRange(d: number): boolean {
    return Number.isInteger(d) && d >= 0 && d < this.world.devices;
  }

  private need(call: string): void {
    if (this.dev < 0) throw new Error(`${call}: no device bound on this thread: call bindDevice(ordinal) first`);
  }

  private stream(call: string, s: number): void {
    this.need(call);
    if (!this.streams.has(s)) throw new Error(`${call}: stream ${s} is not a stream of device ${this.dev}`);
  }

  /** Advance this lane's stream epoch: every op is one step of the stream's order. */
  private tick(): number {
    const k = this.layout.knows + this.lane * (this.world.lanes + 1);
    this.f64[k] = this.f64[k]! + 1;
    return this.f64[k]!;
  }

  private eventBase(event: number): number {
    return this.layout.eventData + (event - 1) * this.layout.eventStride;
  }

  private eventGenOf(event: number, call: string): number {
    if (!Number.isInteger(event) || event < 1 || event > this.world.lanes * MAX_EVENTS)
      throw new Error(`${call}: ${event} is not an event handle`);
    return Atomics.load(this.i32, this.layout.eventGen + event - 1);
  }

  private allocBase(dev: number, slot: number): number {
    return this.layout.allocData + (dev * MAX_ALLOCS + slot) * this.layout.allocStride;
  }

  /** Whether a kernel on this device may reach device d's memory: its own, or a peer's with access enabled. */
  private peerEnabled(d: number): boolean {
    return d === this.dev || Atomics.load(this.i32, this.layout.peer + this.dev * this.world.devices + d) === 1;
  }

  private deviceOf(ptr: number): number {
    return Math.floor(ptr / ADDRESS_UNIT) - 1;
  }

  /** Device and arena offset of `[ptr, ptr + bytes)`, which must lie in one live allocation. */
  private resolve(call: string, ptr: number, bytes: number): [number, number, number] {
    const d = this.deviceOf(ptr);
    if (!(this.inRange(d) || d === this.world.devices) || !Number.isSafeInteger(bytes) || bytes < 0) {
      throw new Error(`${call}: ${hex(ptr)} (+${bytes} bytes) is not a device address`);
    }
    const off = ptr - (d + 1) * ADDRESS_UNIT;
    const fits = (slot: number): boolean => {
      if (Atomics.load(this.i32, this.layout.allocLive + d * MAX_ALLOCS + slot) !== 1) return false;
      const b = this.allocBase(d, slot);
      const o = this.f64[b]!,
        n = this.f64[b + 1]!;
      return off >= o && off + bytes <= o + n;
    };
    if (this.lastSlot >= 0 && Math.floor(this.lastSlot / MAX_ALLOCS) === d && fits(this.lastSlot % MAX_ALLOCS)) {
      return [d, off, this.lastSlot % MAX_ALLOCS];
    }
    for (let s = 0; s < MAX_ALLOCS; s++) {
      if (fits(s)) {
        this.lastSlot = d * MAX_ALLOCS + s;
        return [d, off, s];
      }
    }
    const where = d === this.world.devices ? 'pinned host memory' : `device ${d}`;
    throw new Error(
      `${call}: [${hex(ptr)}, +${bytes}) in ${where} is not inside a live allocation (freed, or out of bounds)`,
    );
  }

  /**
   * Check an access against every other device's accesses it is not ordered after, then
   * remember it. `kernel` accesses to another device's memory need peer access, as on a GPU.
   */
  private access(
    call: string,
    ptr: number,
    bytes: number,
    kind: number,
    epoch: number,
    kernel: boolean,
    stride = 0,
    width = 0,
  ): [number, number] {
    const [d, off, slot] = this.resolve(call, ptr, bytes);
    if (
      kernel &&
      d !== this.dev &&
      d < this.world.devices &&
      Atomics.load(this.i32, this.layout.peer + this.dev * this.world.devices + d) !== 1
    ) {
      throw new Error(
        `${call} on device ${this.dev} dereferences device ${d}'s memory ${hex(ptr)}, but peer access ${this.dev}->${d} is not enabled`,
      );
    }
    if (bytes === 0) return [d, off];
    // Another device's thread writes its entries of this allocation while this one reads them:
    // unlocked, a reader once saw a new range and epoch with the old entry's stride, so a strided
    // write read as one contiguous range and a correct all-gather was refused (seen once, on CI's two
    // cores). The lock's compare-exchange and store order the plain f64 accesses inside.
    const lock = this.layout.allocLock + d * MAX_ALLOCS + slot;
    while (Atomics.compareExchange(this.i32, lock, 0, 1) !== 0) {
      /* held for a few hundred ns */
    }
    try {
      const L = this.world.lanes;
      const base = this.allocBase(d, slot) + 2;
      const row = this.layout.knows + this.lane * L;
      for (let c = 0; c < L; c++) {
        if (c === this.lane) continue;
        const known = this.f64[row + c]!;
        for (const other of kind === WRITE ? [WRITE, READ] : [WRITE]) {
          const e0 = base + (c * 2 + other) * ACCESS_ENTRIES * ACCESS_FIELDS;
          for (let e = 0; e < ACCESS_ENTRIES; e++) {
            const at = e0 + e * ACCESS_FIELDS,
              f = this.f64;
            if (
              f[at + 2]! > known &&
              overlaps(off, off + bytes, stride, width, f[at]!, f[at + 1]!, f[at + 3]!, f[at + 4]!)
            )
              this.hazard(call, ptr, bytes, kind, other, d, c);
          }
        }
      }
      this.remember(
        base + (this.lane * 2 + kind) * ACCESS_ENTRIES * ACCESS_FIELDS,
        off,
        off + bytes,
        epoch,
        stride,
        width,
      );
    } finally {
      Atomics.store(this.i32, lock, 0);
    }
    return [d, off];
  }

  private remember(e0: number, lo: number, hi: number, epoch: number, stride: number, width: number): void {
    const f = this.f64,
      F = ACCESS_FIELDS;
    let empty = -1,
      oldest = -1,
      second = -1;
    for (let e = 0; e < ACCESS_ENTRIES; e++) {
      const at = e0 + e * F;
      if (f[at + 2] === 0) {
        if (empty < 0) empty = e;
        continue;
      }
      if (f[at] === lo && f[at + 1] === hi && f[at + 3] === stride && f[at + 4] === width) {
        f[at + 2] = epoch;
        return;
      }
      if (oldest < 0 || f[at + 2]! < f[e0 + oldest * F + 2]!) {
        second = oldest;
        oldest = e;
      } else if (second < 0 || f[at + 2]! < f[e0 + second * F + 2]!) second = e;
    }
    if (empty < 0) {
      // Full: fold the oldest entry into the second oldest as one contiguous range covering
      // both. The union can only report more.
      const a = e0 + oldest * F,
        b = e0 + second * F;
      f[b] = Math.min(f[a]!, f[b]!);
      f[b + 1] = Math.max(f[a + 1]!, f[b + 1]!);
      f[b + 2] = Math.max(f[a + 2]!, f[b + 2]!);
      f[b + 3] = 0;
      f[b + 4] = 0;
      empty = oldest;
    }
    const at = e0 + empty * F;
    f[at] = lo;
    f[at + 1] = hi;
    f[at + 2] = epoch;
    f[at + 3] = stride;
    f[at + 4] = width;
  }

  /** Lane `l` as a message names it: its device, and in loopback (one device, two lanes) its rank. */
  private laneName(l: number): string {
    const d = Atomics.load(this.i32, this.layout.laneDevice + l) - 1;
    if (d < 0) return `rank ${l} (released)`;
    return this.loopback ? `device ${d} (rank ${l})` : `device ${d}`;
  }

  private hazard(
    call: string,
    ptr: number,
    bytes: number,
    kind: number,
    other: number,
    owner: number,
    lane: number,
  ): never {
    const me = this.laneName(this.lane),
      c = this.laneName(lane);
    if (kind === WRITE && other === WRITE) {
      throw new OrderingError(
        `${call} on ${me} writes [${hex(ptr)}, +${bytes}) on device ${owner} while ${c} may still be writing it: ` +
          `missing write-after-write edge (before pushing into a consumer's buffer, wait on an event the consumer recorded after its own writes)`,
        'ERR_ORDER_WAW',
      );
    }
    if (kind === WRITE) {
      throw new OrderingError(
        `${call} on ${me} overwrites [${hex(ptr)}, +${bytes}) on device ${owner} while ${c} may still be reading it: ` +
          'missing write-after-read edge (wait until the reader is done, or stage the operand)',
        'ERR_ORDER_WAR',
      );
    }
    throw new OrderingError(
      `${call} on ${me} reads [${hex(ptr)}, +${bytes}) on device ${owner} before ${c}'s write to it is ordered: ` +
        "missing read-after-write edge (wait on the producer's event after its push)",
      'ERR_ORDER_RAW',
    );
  }
}
