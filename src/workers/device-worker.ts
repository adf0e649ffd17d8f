/**
 * The pinned device worker: binds one device once, is the only thread that touches it, and turns
 * ring records into work on its stream. Hot path: the ring. Cold path: comlink calls on the
 * control port (open, allocate, upload, read back, close).
 *
 * The loop never blocks the thread's event loop for long: it spins briefly for records, then
 * sleeps in short `Atomics.wait` slices with a turn of the event loop between them, so control
 * calls are answered while the ring is idle; under a continuous stream of records it turns the
 * loop once a millisecond for the same reason.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises';
import * as Comlink from 'comlink';
import { portEndpoint } from './comlink-port.js';
import { RingConsumer, RingView, type RecordRef } from './ring.js';
import { RingState, seqDiff } from './ring-layout.js';
import { OP_COUNT, Op, opName } from './ops.js';
import type { WorkerFault, WorkerInit } from './worker-init.js';
import type { DeviceApi } from '../runtime/device-api.js';
import type { HostRegistration } from '../runtime/binding.js';
import { loadBinding } from '../runtime/binding.js';
import { hostMicros } from '../runtime/host-clock.js';
import { executeModelOp, PdlChain, type Mailbox } from './model-dispatch.js';
import { ProfileBoard } from './profile-board.js';

const init = workerData as WorkerInit;
const tag = `worker ${init.rank} (device ${init.ordinal})`;

class Refusal extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * The CPU reference is imported only where it runs: every worker compiles what it imports, and a
 * CUDA worker, one per rank of every session, has no use for it.
 */
async function makeDevice(): Promise<DeviceApi> {
  if (init.backend === 'cpu') {
    if (!init.cpuWorld) throw new Error(`${tag}: cpu backend without its shared world`);
    const { CpuDevice } = await import('../runtime/cpu-device.js');
    return new CpuDevice(init.cpuWorld, init.rank);
  }
  return loadBinding();
}

const dev = await makeDevice();
const ring = new RingConsumer(new RingView(init.ring, `ring ${init.rank}`));
const peerRing = init.peerRing ? new RingView(init.peerRing, `ring ${1 - init.rank}`) : undefined;
/** Counters as this thread sees them; rebased onto the registered pages at open(). */
let completion: Uint32Array = new Uint32Array(0);
let stream = 0;
let signalBase = 0;
/** Where ToMailbox copies land: registered pages after the counters. */
let mailbox: Mailbox = { devicePtr: 0, bytes: 0 };
let registration: HostRegistration | undefined;
let serving: Promise<void> | undefined;
let closing = false;
let faulted = false;
/** Records executed, for tests and the profile. */
let executed = 0;
/** Executable graphs by the slot the main thread named them with. */
const graphs = new Map<number, number>();
/** Child graphs (captured, not instantiated: parts of a parent graph) by slot. */
const children = new Map<number, number>();
/** True between BeginCapture and EndCapture: the stream may not be queried or synchronised. */
let capturing = false;
/**
 * The profiler's board for this worker's ring (workers/profile-board.ts), and the offset that
 * turns `performance.now()` into the shared host clock: a stamp per record must cost tens of
 * nanoseconds, and `process.hrtime.bigint()` allocates a BigInt.
 */
let board: { marks: Float64Array; stamps: Float64Array; offsetUs: number } | undefined;
/** This rank's NCCL communicator, once `ncclInit` made it. */
let comm = 0;

/** The link's low-latency buffers, as `llConfigure` set them (held by the device, per thread). */
export interface LlConfig {
  selfRecv: number;
  peerRecv: number;
  cap: number;
  selfState: number;
  peerState: number;
  err: number;
  spinLimit: number;
  serveIdleMicros: number;
}
let llReady = false;

function needLl(): void {
  if (!llReady) throw new Refusal('an LL join before llConfigure: open the ll transport first', 'ERR_BAD_RECORD');
}

function needComm(): number {
  if (comm === 0) throw new Refusal('an NCCL op before ncclInit: open the nccl transport first', 'ERR_BAD_RECORD');
  return comm;
}

/** Wait (bounded) until the peer has enqueued its record `seq`: the cross-device handshake. */
function awaitPeer(seq: number, mine: number): void {
  if (!peerRing)
    throw new Refusal(
      `record ${mine >>> 0} waits for a peer's record ${seq >>> 0}, but this runtime has one rank: a cross-rank wait needs two`,
      'ERR_NO_PEER',
    );
  if (peerRing.reached(seq)) return;
  const start = performance.now();
  const spinEnd = start + init.spinMicros / 1000;
  const deadline = start + init.handshakeTimeoutMs;
  for (;;) {
    const seen = peerRing.tail();
    if (seqDiff(seen, seq) >= 0) return;
    const peerState = peerRing.state();
    if (peerState !== RingState.Running) {
      const f = peerState === RingState.Faulted ? peerRing.fault() : undefined;
      throw new Refusal(
        `record ${mine >>> 0} waits for the peer's record ${seq >>> 0}, but the peer worker has stopped (it enqueued up to ${seen >>> 0})` +
          (f ? `: it refused record ${f.seq} (${f.reason})` : ''),
        'ERR_PEER_STOPPED',
      );
    }
    const t = performance.now();
    if (t > deadline) {
      throw new Refusal(
        `handshake timed out after ${init.handshakeTimeoutMs} ms: record ${mine >>> 0} waits for the peer's record ${seq >>> 0}, ` +
          `and the peer has enqueued only up to ${seen >>> 0} (was that record ever pushed to the peer's ring?)`,
        'ERR_HANDSHAKE_TIMEOUT',
      );
    }
    if (t > spinEnd) peerRing.sleepOnTail(seen, Math.min(2, deadline - t));
  }
}

/** Which model launches may overlap the kernel before them on this stream. */
const pdlChain = new PdlChain();

function execute(r: RecordRef, a: Float64Array): void {
  const i = r.arg;
  // While a profile board is set, no launch overlaps the one before it: a join's events must
  // bracket the join alone, not the tail of the kernel ahead (the profile-overhead rows price it).
  const pdl = pdlChain.next(r.op, r.marked) && !board;
  switch (r.op) {
    case Op.Nop:
      return;
    case Op.Fill:
      dev.launchFillF32(a[i]!, a[i + 1]!, a[i + 2]!, stream);
      return;
    case Op.Axpy:
      dev.launchAxpyF32(a[i]!, a[i + 1]!, a[i + 2]!, a[i + 3]!, stream);
      return;
    case Op.Copy:
      dev.memcpyAsync(a[i]!, a[i + 1]!, a[i + 2]!, stream);
      return;
    case Op.CopyPeer:
      dev.memcpyPeerAsync(a[i]!, a[i + 1]!, a[i + 2]!, a[i + 3]!, a[i + 4]!, stream);
      return;
    case Op.Memset:
      dev.memsetAsync(a[i]!, a[i + 1]!, a[i + 2]!, stream);
      return;
    case Op.EventRecord:
      dev.eventRecord(a[i]!, stream);
      return;
    case Op.EventWait:
      dev.streamWaitEvent(stream, a[i]!, a[i + 1]!);
      return;
    case Op.Signal: {
      const slot = a[i]!;
      if (!Number.isInteger(slot) || slot < 0 || slot >= completion.length) {
        throw new Refusal(
          `Signal: completion slot ${slot} is out of range [0, ${completion.length})`,
          'ERR_BAD_RECORD',
        );
      }
      dev.launchSignal(signalBase + slot * 4, a[i + 1]!, stream);
      return;
    }
    case Op.StampNow:
      dev.launchStampNow(a[i]!, stream);
      return;
    case Op.ProbeWrite:
      dev.launchProbeWrite(a[i]!, a[i + 1]!, a[i + 2]!, stream);
      return;
    case Op.Spin:
      dev.launchSpin(a[i]!, stream);
      return;
    case Op.Push:
      dev.launchPush(a[i]!, a[i + 1]!, a[i + 2]!, stream);
      return;
    case Op.Push2d:
      dev.launchPush2d(a[i]!, a[i + 1]!, a[i + 2]!, a[i + 3]!, a[i + 4]!, a[i + 5]!, stream);
      return;
    case Op.Fold:
      dev.launchFold(a[i]!, a[i + 1]!, a[i + 2]!, stream);
      return;
    case Op.OneShot:
      dev.launchOneShot(
        a[i]!,
        a[i + 1]!,
        a[i + 2]!,
        a[i + 3]!,
        a[i + 4]!,
        a[i + 5]!,
        a[i + 6]!,
        a[i + 7]!,
        a[i + 8]!,
        a[i + 9]!,
        a[i + 10]!,
        stream,
      );
      return;
    case Op.BeginCapture:
      dev.streamBeginCapture(stream);
      capturing = true;
      return;
    case Op.EndCapture: {
      const slot = a[i]!;
      if (graphs.has(slot)) throw new Refusal(`EndCapture: graph slot ${slot} is in use`, 'ERR_BAD_RECORD');
      capturing = false;
      graphs.set(slot, dev.streamEndCapture(stream));
      return;
    }
    case Op.EndCaptureChild: {
      const slot = a[i]!;
      if (children.has(slot))
        throw new Refusal(`EndCaptureChild: child graph slot ${slot} is in use`, 'ERR_BAD_RECORD');
      capturing = false;
      children.set(slot, dev.streamEndCaptureChild(stream));
      return;
    }
    case Op.GraphLaunch: {
      const g = graphs.get(a[i]!);
      if (g === undefined) throw new Refusal(`GraphLaunch: no graph in slot ${a[i]}`, 'ERR_BAD_RECORD');
      dev.graphLaunch(g, stream);
      return;
    }
    case Op.NcclAllReduce:
      dev.ncclAllReduceF32(a[i]!, a[i + 1]!, a[i + 2]!, needComm(), stream);
      return;
    case Op.NcclBroadcast:
      dev.ncclBroadcastF32(a[i]!, a[i + 1]!, a[i + 2]!, a[i + 3]!, needComm(), stream);
      return;
    case Op.NcclAllGather:
      dev.ncclAllGatherF32(a[i]!, a[i + 1]!, a[i + 2]!, needComm(), stream);
      return;
    case Op.Ll: {
      needLl();
      dev.launchLl(
        a[i]!,
        a[i + 1]!,
        a[i + 2]!,
        a[i + 3]!,
        a[i + 4]!,
        a[i + 5]!,
        a[i + 6]!,
        a[i + 7]!,
        a[i + 8]!,
        stream,
      );
      return;
    }
    case Op.NcclSendRecv:
      dev.ncclSendRecvF32(a[i]!, a[i + 1]!, a[i + 2]!, a[i + 3]!, a[i + 4]!, needComm(), stream);
      return;
    default:
      if (executeModelOp(dev, r.op, a, i, stream, mailbox, pdl)) return;
      throw new Refusal(`unknown op ${r.op}: this worker knows ops 0..${OP_COUNT - 1}`, 'ERR_UNKNOWN_OP');
  }
}

/** The profiler's events for this slot (a join's start, the join before's end), in stream order. */
function recordMarks(slot: number): void {
  if (!board)
    throw new Refusal(
      'a record carries profile marks, but no profile board is set: call setProfileBoard first',
      'ERR_BAD_RECORD',
    );
  const e0 = board.marks[2 * slot]!,
    e1 = board.marks[2 * slot + 1]!;
  dev.eventRecordMark(e0, stream);
  if (e1 !== 0) dev.eventRecordMark(e1, stream);
}

/** Run available records for up to ~1 ms; false once the ring is faulted. */
function runBatch(): boolean {
  const end = performance.now() + 1;
  const args = ring.args;
  while (ring.available() > 0) {
    const r = ring.peek();
    try {
      if (r.afterPeer !== undefined) awaitPeer(r.afterPeer, r.seq);
      if (r.marked) recordMarks(r.slot);
      execute(r, args);
      // Before advance(): whoever sees `tail` reach this record sees its stamp too.
      if (board) board.stamps[r.slot] = performance.now() * 1000 + board.offsetUs;
    } catch (e) {
      refuse(r, e);
      return false;
    }
    ring.advance();
    executed++;
    if ((executed & 63) === 0 && performance.now() > end) break;
  }
  return true;
}

function refuse(r: RecordRef, e: unknown): void {
  faulted = true;
  const err = e as Error & { code?: string };
  if (capturing) {
    // A refusal inside a capture would leave the stream capturing forever, and every later
    // query, drain or close of it would fail: end the capture and throw its graph away.
    capturing = false;
    try {
      dev.graphDestroy(dev.streamEndCapture(stream));
    } catch {
      /* the capture was invalid: ending it is all we need */
    }
  }
  ring.fault(r.seq, r.op, `${opName(r.op)}: ${err.message}`);
  const fault: WorkerFault = {
    type: 'fault',
    rank: init.rank,
    seq: r.seq >>> 0,
    op: r.op,
    code: err.code ?? 'ERR_RECORD_FAILED',
    message: `${tag} refused record ${r.seq >>> 0} (${opName(r.op)}): ${err.message}`,
  };
  parentPort?.postMessage(fault);
}

async function serve(): Promise<void> {
  // Turn the event loop (where control calls arrive) at most once a millisecond while records
  // keep coming: a turn costs microseconds, which a join waiting on this worker would pay.
  let lastTurn = performance.now();
  while (!closing && !faulted) {
    if (ring.available() > 0) {
      if (!runBatch()) break;
      if (performance.now() - lastTurn > 1) {
        await yieldToLoop();
        lastTurn = performance.now();
      }
      continue;
    }
    if (ring.spinForWork(init.spinMicros)) continue;
    // Short blocking sleeps with a turn of the event loop between them: a record, or a control
    // call's doorbell (ring.ts), wakes us at once; the slice bounds a wake-up that never comes.
    if (!ring.sleepForWork(2)) {
      await yieldToLoop();
      lastTurn = performance.now();
    }
  }
}

/** Until every published record has been enqueued and the stream has finished it. */
async function drain(timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const pending = (): boolean => !faulted && ring.available() > 0;
  const busy = (): boolean => {
    if (capturing)
      throw new Error(`${tag}: drain requested while the stream is capturing a graph; end the capture first`);
    return stream !== 0 && !dev.streamQuery(stream);
  };
  while (pending() || busy()) {
    if (performance.now() > deadline) {
      throw new Error(`${tag}: drain timed out after ${timeoutMs} ms (${ring.available()} records not enqueued)`);
    }
    await sleep(pending() ? 0 : 0.05);
  }
}

/**
 * Poll `done` until it holds (the serve loop runs between polls), refusing when the ring faults
 * or `timeoutMs` pass.
 */
async function until(done: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (faulted) throw new Error(`${tag}: the ring is faulted while waiting for ${what}`);
    if (performance.now() > deadline) throw new Error(`${tag}: ${what}: not within ${timeoutMs} ms`);
    await sleep(0.05);
  }
}

function needOpen(call: string): void {
  if (stream === 0) throw new Error(`${tag}: ${call} before open()`);
  if (closing) throw new Error(`${tag}: ${call} after close()`);
}

const control = {
  /** Bind the device; returns where in the completion buffer the GPU-visible counters start. */
  async open(): Promise<{
    ordinal: number;
    backend: string;
    deviceCount: number;
    completionOffset: number;
    pinned: { cpu: number | null; why?: string };
  }> {
    // Pinned before the device is bound, so what the context allocates for this thread is
    // first touched on the core (and NUMA node) the thread will stay on.
    // Unasked, the runtime knows why (its placement plan); the worker reports only what it saw.
    let pinned: { cpu: number | null; why?: string } = { cpu: null };
    if (init.cpu !== undefined) {
      try {
        loadBinding().setThreadAffinity([init.cpu]);
        pinned = { cpu: init.cpu };
      } catch (e) {
        pinned = { cpu: null, why: (e as Error).message };
      }
    }
    dev.bindDevice(init.ordinal, init.loopback);
    stream = dev.streamCreate();
    // Registration takes whole pages; a SharedArrayBuffer need not start on one, so the buffer
    // carries a spare page and the counters start where the registered pages do.
    registration = dev.hostRegister(new Uint8Array(init.completion));
    if (registration.bytes < init.mailboxOffset + init.mailboxBytes) {
      throw new Error(
        `${tag}: only ${registration.bytes} bytes of the completion buffer could be registered; ${init.mailboxOffset + init.mailboxBytes} needed`,
      );
    }
    completion = new Uint32Array(init.completion, registration.byteOffset, init.completionSlots);
    signalBase = registration.devicePtr;
    mailbox = { devicePtr: registration.devicePtr + init.mailboxOffset, bytes: init.mailboxBytes };
    serving = serve().catch((e: unknown) => {
      parentPort?.postMessage({
        type: 'fault',
        rank: init.rank,
        seq: 0,
        op: -1,
        code: 'ERR_WORKER_LOOP',
        message: `${tag}: ${(e as Error).message}`,
      } satisfies WorkerFault);
    });
    return {
      ordinal: init.ordinal,
      backend: init.backend,
      deviceCount: dev.deviceCount(),
      completionOffset: registration.byteOffset,
      pinned,
    };
  },

  async alloc(bytes: number): Promise<number> {
    needOpen('alloc');
    return dev.malloc(bytes);
  },

  async free(ptr: number): Promise<void> {
    needOpen('free');
    // Records still in the ring or on the stream may use this memory: the seed's lifetime hazard.
    await drain(10_000);
    dev.free(ptr);
  },

  async upload(ptr: number, data: Uint8Array): Promise<void> {
    needOpen('upload');
    // A synchronous copy does not order against a non-blocking stream: drain it first.
    await drain(10_000);
    dev.upload(ptr, data);
  },

  async download(ptr: number, bytes: number): Promise<Uint8Array> {
    needOpen('download');
    await drain(10_000);
    const out = new Uint8Array(bytes);
    dev.download(out, ptr);
    return Comlink.transfer(out, [out.buffer]);
  },

  async createEvent(timing: boolean): Promise<number> {
    needOpen('createEvent');
    return dev.eventCreate(timing);
  },

  async destroyEvent(event: number): Promise<void> {
    needOpen('destroyEvent');
    await drain(10_000);
    dev.eventDestroy(event);
  },

  async elapsedMs(start: number, end: number): Promise<number> {
    needOpen('elapsedMs');
    await drain(10_000);
    return dev.eventElapsedMs(start, end);
  },

  /**
   * Milliseconds between each pair [start0, end0, start1, end1, ...]: one call for a step's joins.
   * The caller has seen every record of these events ENQUEUED (the profiler waits for its stamp
   * records). This waits for the events themselves, never for the stream: the profiler reads a
   * step while the next one runs, and a drain here waited for that next step too, then held up
   * the step after it behind this worker's once-a-millisecond event-loop turn (profiling cost
   * 31% of tokens/s on bench, decode-2xH200-2026-11-30).
   */
  async elapsedMsPairs(events: number[], newest?: number): Promise<number[]> {
    needOpen('elapsedMsPairs');
    if (events.length % 2 !== 0)
      throw new Error(`elapsedMsPairs: an even number of events (start, end pairs), got ${events.length}`);
    // Records published before this call are enqueued first, so no event is queried on an older
    // record; then, when the caller names the newest event (one stream records them in order,
    // so its completion is everyone's), one query instead of one per event.
    const head = ring.view.head();
    await until(() => seqDiff(head, ring.view.tail()) <= 0, 10_000, `record ${head >>> 0} enqueued`);
    const awaited = newest === undefined ? events : [newest];
    await until(() => awaited.every((e) => dev.eventQuery(e)), 10_000, `${awaited.length} event(s) completed`);
    const out: number[] = [];
    for (let i = 0; i < events.length; i += 2) out.push(dev.eventElapsedMs(events[i]!, events[i + 1]!));
    return out;
  },

  async linkConstants(): Promise<{
    signalBytes: number;
    maxBlocks: number;
    llStateBytes: number;
    llDepth: number;
    llMaxValues: number;
  }> {
    return {
      signalBytes: dev.arSignalBytes(),
      maxBlocks: dev.arMaxBlocks(),
      llStateBytes: dev.llStateBytes(),
      llDepth: dev.llDepth(),
      llMaxValues: dev.llMaxValues(),
    };
  },

  /** Where this rank's LL joins find their buffers (set again when the link grows them). */
  async llConfigure(c: LlConfig): Promise<void> {
    needOpen('llConfigure');
    await drain(10_000);
    dev.llConfigure(
      c.selfRecv,
      c.peerRecv,
      c.cap,
      c.selfState,
      c.peerState,
      init.rank,
      c.err,
      c.spinLimit,
      c.serveIdleMicros,
    );
    llReady = true;
  },

  /** What this rank's LL server has done (zeros on the CPU reference, which has none). */
  async llServeStats(deep = false): Promise<{ jobs: number; launches: number }> {
    needOpen('llServeStats');
    return dev.llServeStats(deep);
  },

  /**
   * Generate a bf16 weight slice on this rank's stream (cold: model load). Ordered with ring work
   * only by when it is enqueued, so the loader drains before the first step.
   */
  async genWeights(
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
  ): Promise<void> {
    needOpen('genWeights');
    // The next step kernel must not start before the weights it may read ahead are written.
    pdlChain.reset();
    dev.launchGenWeights(dst, seed, id, base, rows, srcCols, colStart, cols, kind, scale, stream);
  },

  /**
   * The card's read floor: `bytes` of device memory filled with a non-zero byte, then read by a
   * kernel that only reads, `reps` times (replays of a captured graph on CUDA), each bracketed by
   * timing events. Returns each read's GB/s. Cold path: it drains first and frees what it took.
   */
  async readFloor(bytes: number, reps: number): Promise<number[]> {
    needOpen('readFloor');
    await drain(10_000);
    pdlChain.reset();
    const buf = dev.malloc(bytes);
    const sink = dev.malloc(4);
    const e0 = dev.eventCreate(true);
    const e1 = dev.eventCreate(true);
    let graph = 0;
    try {
      dev.memsetAsync(buf, 0x3c, bytes, stream);
      dev.launchReadFloor(buf, bytes, sink, stream);
      if (init.backend === 'cuda') {
        dev.streamBeginCapture(stream);
        dev.launchReadFloor(buf, bytes, sink, stream);
        graph = dev.streamEndCapture(stream);
      }
      const gbps: number[] = [];
      for (let r = 0; r < reps; r++) {
        dev.eventRecord(e0, stream);
        if (graph) dev.graphLaunch(graph, stream);
        else dev.launchReadFloor(buf, bytes, sink, stream);
        dev.eventRecord(e1, stream);
        dev.streamSynchronize(stream);
        gbps.push(bytes / (dev.eventElapsedMs(e0, e1) * 1e6));
      }
      return gbps;
    } finally {
      dev.streamSynchronize(stream);
      if (graph) dev.graphDestroy(graph);
      dev.eventDestroy(e0);
      dev.eventDestroy(e1);
      dev.free(sink);
      dev.free(buf);
    }
  },

  async hostAlloc(bytes: number): Promise<number> {
    needOpen('hostAlloc');
    return dev.hostAlloc(bytes);
  },
  async hostFree(ptr: number): Promise<void> {
    needOpen('hostFree');
    await drain(10_000);
    dev.hostFree(ptr);
  },

  async destroyGraph(slot: number): Promise<void> {
    needOpen('destroyGraph');
    await drain(10_000);
    const g = graphs.get(slot);
    if (g === undefined) throw new Error(`${tag}: no graph in slot ${slot}`);
    graphs.delete(slot);
    dev.graphDestroy(g);
  },

  /** The CPUs this worker's thread may run on (CUDA backend: the addon asks the kernel). */
  async threadAffinity(): Promise<number[]> {
    if (init.backend !== 'cuda') throw new Error(`${tag}: threadAffinity needs the CUDA backend's addon`);
    return loadBinding().threadAffinity();
  },

  /** This ring's profile board (or none), and the host clock base the main thread counts from. */
  async setProfileBoard(buffer: SharedArrayBuffer | undefined, base: bigint): Promise<void> {
    if (!buffer) {
      board = undefined;
      return;
    }
    const b = new ProfileBoard(buffer, ring.view.capacity);
    board = { marks: b.marks, stamps: b.stamps, offsetUs: hostMicros(base) - performance.now() * 1000 };
  },

  /** The native handle of child graph `slot`, for the peer's thread to build a parent with. */
  async childGraphHandle(slot: number): Promise<number> {
    needOpen('childGraphHandle');
    const c = children.get(slot);
    if (c === undefined) throw new Error(`${tag}: no child graph in slot ${slot}`);
    return c;
  },

  /**
   * Seed 003's parent graph from this thread's children `owner` and `post` and the peer's child
   * (its native handle); stored as executable graph `slot`.
   */
  async buildParentGraph(spec: {
    slot: number;
    owner: number;
    post: number;
    peerChild: number;
    peerDevice: number;
    copies: Array<{ dst: number; src: number; bytes: number }>;
  }): Promise<void> {
    needOpen('buildParentGraph');
    if (graphs.has(spec.slot)) throw new Error(`${tag}: graph slot ${spec.slot} is in use`);
    const owner = children.get(spec.owner),
      post = children.get(spec.post);
    if (owner === undefined || post === undefined)
      throw new Error(`${tag}: no child graph in slot ${owner === undefined ? spec.owner : spec.post}`);
    graphs.set(spec.slot, dev.parentGraphBuild(owner, spec.peerChild, post, spec.peerDevice, spec.copies, stream));
  },

  /** Refused (by the addon) while a parent graph holds it: destroy the parent first. */
  async destroyChildGraph(slot: number): Promise<void> {
    needOpen('destroyChildGraph');
    const c = children.get(slot);
    if (c === undefined) throw new Error(`${tag}: no child graph in slot ${slot}`);
    dev.childGraphDestroy(c);
    children.delete(slot);
  },

  /** NCCL's version, loading the library; throws naming it when it is missing. */
  async ncclLoad(): Promise<number> {
    return dev.ncclLoad();
  },
  async ncclUniqueId(): Promise<Uint8Array> {
    dev.ncclLoad();
    return dev.ncclGetUniqueId();
  },
  /** Blocks this thread until every rank has joined: call it on all ranks at once. */
  async ncclInit(id: Uint8Array, nranks: number, rank: number): Promise<void> {
    needOpen('ncclInit');
    if (comm !== 0) return;
    comm = dev.ncclCommInitRank(id, nranks, rank);
  },

  async enablePeer(peer: number): Promise<void> {
    needOpen('enablePeer');
    dev.enablePeerAccess(peer);
  },
  async disablePeer(peer: number): Promise<void> {
    needOpen('disablePeer');
    dev.disablePeerAccess(peer);
  },
  async canAccessPeer(peer: number): Promise<boolean> {
    return dev.canAccessPeer(init.ordinal, peer);
  },
  async memInfo(): Promise<{ free: number; total: number }> {
    needOpen('memInfo');
    return dev.memGetInfo();
  },

  async drain(timeoutMs = 10_000): Promise<void> {
    needOpen('drain');
    await drain(timeoutMs);
  },

  async stats(): Promise<{ executed: number; faulted: boolean; tail: number }> {
    return { executed, faulted, tail: ring.view.tail() >>> 0 };
  },

  /**
   * Drain, then release everything. Nothing may be freed while the stream can still touch it:
   * a pending kernel would write into memory the allocator has handed to someone else.
   */
  async close(timeoutMs = 10_000): Promise<void> {
    if (stream === 0) {
      ring.stop();
      return;
    }
    let drained: unknown;
    try {
      await drain(timeoutMs);
    } catch (e) {
      drained = e;
    }
    closing = true;
    ring.stop();
    await serving;
    // Parents before children (a held child refuses to go); a child the PEER's parent still holds
    // is left to releaseDevice, whose teardown forces it (CUDA cloned it into that parent).
    for (const g of graphs.values()) dev.graphDestroy(g);
    graphs.clear();
    for (const c of children.values()) {
      try {
        dev.childGraphDestroy(c);
      } catch {
        /* held by the peer's parent */
      }
    }
    children.clear();
    if (comm !== 0) dev.ncclCommDestroy(comm);
    comm = 0;
    if (registration) dev.hostUnregister(registration.hostPtr);
    registration = undefined;
    // releaseDevice synchronizes the device before it frees anything.
    dev.releaseDevice();
    stream = 0;
    if (drained) throw drained;
  },

  // ---- test hooks: failure injection for the control plane's own tests ----
  async hang(ms: number): Promise<void> {
    await sleep(ms);
  },
  async crash(message: string): Promise<void> {
    setImmediate(() => {
      throw new Error(message);
    });
  },
};

export type DeviceControl = typeof control;

Comlink.expose(control, portEndpoint(init.control));
