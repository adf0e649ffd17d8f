/**
 * The shared state of the CPU reference backend: every emulated device's memory and the ordering
 * bookkeeping, in SharedArrayBuffers that the main thread creates and hands to every worker, so a
 * worker reaches its peer's "device" memory the way a GPU reaches a peer's over NVLink.
 *
 * Addresses mimic unified addressing: device d's byte `o` is `(d + 1) * 2^40 + o`, so a pointer
 * says which device it lives on, and a number can travel in a ring record like a CUDA pointer.
 * Pinned host memory is one more arena, index `devices`, split evenly between the devices'
 * threads so each allocates from its own part without locks.
 *
 * Ordering is tracked with vector clocks, one per worker's stream (a "lane"; lane r is rank r's
 * worker). Each lane counts the ops its stream has run (its epoch); `knows[p][c]` is the newest
 * epoch of lane c that lane p's stream is ordered after, learned only through event waits. An
 * event record snapshots the recorder's clock; a wait merges it. Every access to device memory is
 * remembered per allocation as (lane, byte range, epoch), so an access that overlaps another
 * lane's access it is not ordered after is a race the GPU would have, and is reported as one (the
 * write-after-write, read-after-write and write-after-read hazards of seed 000). Clocks belong to
 * lanes and memory to devices, so two lanes may share one device (loopback: two ranks on one
 * card, each with its own stream) and their races are still caught.
 */
export const ADDRESS_UNIT = 2 ** 40;
export const MAX_EVENTS = 1024;
export const MAX_ALLOCS = 2048;
/** Access entries kept per (allocation, device, kind); older ones merge (conservatively). */
export const ACCESS_ENTRIES = 4;
/** One remembered access: [lo, hi, epoch, stride, width]; stride 0 is one contiguous range. */
export const ACCESS_FIELDS = 5;
/** SM clock the one-shot's spin bound is counted in (an H200's ~1.98 GHz), in ticks per ms. */
export const TICKS_PER_MS = 1.98e6;

export interface CpuWorldInit {
  devices: number;
  /** Worker streams with a clock of their own (the runtime's ranks). */
  lanes: number;
  arenaBytes: number;
  arenas: SharedArrayBuffer[];
  meta: SharedArrayBuffer;
}

/** Offsets into `meta`, in elements of the typed view named in each. */
export class CpuWorldLayout {
  /** i32[devices]: 0 free, -1 bound by one thread, k > 0 bound by k threads in loopback. */
  readonly claims = 0;
  readonly peer: number; // i32[devices * devices]: peer access enabled p -> c
  readonly laneDevice: number; // i32[lanes]: 1 + the device lane l's thread bound, 0 while unbound
  readonly eventGen: number; // i32[lanes * MAX_EVENTS]: records so far (publication word)
  readonly allocLive: number; // i32[(devices + 1) * MAX_ALLOCS]: the last row is host memory; 2 while being filled in
  readonly allocLock: number; // i32[(devices + 1) * MAX_ALLOCS]: 1 while a thread reads or writes the allocation's access entries
  readonly i32Words: number;
  readonly knows = 0; // f64[lanes * lanes]
  readonly eventData: number; // f64[lanes * MAX_EVENTS * eventStride]
  readonly eventStride: number; // [timestampMs, recorderLane, clock[lanes]]
  readonly barrier: number; // f64[lanes * 2]: stream epoch at one-shot entry / exit arrival
  readonly allocData: number; // f64[(devices + 1) * MAX_ALLOCS * allocStride]
  readonly allocStride: number; // [offset, bytes, access[lanes][2 kinds][ACCESS_ENTRIES][ACCESS_FIELDS]]
  readonly f64Offset: number; // byte offset of the f64 region
  readonly bytes: number;

  constructor(
    readonly devices: number,
    readonly lanes: number,
  ) {
    this.peer = devices;
    this.laneDevice = this.peer + devices * devices;
    this.eventGen = this.laneDevice + lanes;
    this.allocLive = this.eventGen + lanes * MAX_EVENTS;
    this.allocLock = this.allocLive + (devices + 1) * MAX_ALLOCS;
    this.i32Words = this.allocLock + (devices + 1) * MAX_ALLOCS;
    this.f64Offset = Math.ceil((this.i32Words * 4) / 64) * 64;
    this.eventStride = 2 + lanes;
    this.eventData = lanes * lanes;
    this.allocStride = 2 + lanes * 2 * ACCESS_ENTRIES * ACCESS_FIELDS;
    this.barrier = this.eventData + lanes * MAX_EVENTS * this.eventStride;
    this.allocData = this.barrier + lanes * 2;
    this.bytes = this.f64Offset + (this.allocData + (devices + 1) * MAX_ALLOCS * this.allocStride) * 8;
  }
}

/** The most memory an emulated device has: a SharedArrayBuffer each, of up to 2 GiB. */
export const CPU_ARENA_MAX_BYTES = 2 ** 31;

/** Create the shared state for `devices` emulated devices of `arenaBytes` each, driven by `lanes` workers. */
export function createCpuWorld(devices: number, arenaBytes: number, lanes = 2): CpuWorldInit {
  if (!Number.isInteger(devices) || devices < 1 || devices > 8) {
    throw new RangeError(`cpu backend: devices must be an integer in [1, 8], got ${devices}`);
  }
  if (!Number.isInteger(lanes) || lanes < 1 || lanes > 8) {
    throw new RangeError(`cpu backend: lanes must be an integer in [1, 8], got ${lanes}`);
  }
  if (!Number.isInteger(arenaBytes) || arenaBytes < 4096 || arenaBytes > CPU_ARENA_MAX_BYTES) {
    throw new RangeError(`cpu backend: arenaBytes must be an integer in [4096, 2^31], got ${arenaBytes}`);
  }
  const layout = new CpuWorldLayout(devices, lanes);
  return {
    devices,
    lanes,
    arenaBytes,
    // One arena per device, then the pinned-host arena.
    arenas: Array.from({ length: devices + 1 }, () => new SharedArrayBuffer(arenaBytes)),
    meta: new SharedArrayBuffer(layout.bytes),
  };
}
