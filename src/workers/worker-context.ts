/**
 * One pinned worker's state, shared by the modules that make it up (serve-loop.ts,
 * record-ops.ts, device-control.ts): its device, its ring and the peer's, its stream and
 * completion pages, and what the control calls set up (graphs, the NCCL communicator, the LL
 * link, the profile board). device-worker.ts makes the one of its thread.
 */
import type { FaultCode } from '../api/errors.js';
import { MemraError } from '../api/errors.js';
import {
  asDevicePtr,
  asNcclComm,
  asStreamHandle,
  type ChildGraphHandle,
  type DevicePtr,
  type GraphHandle,
  type HostRegistration,
  loadBinding,
  type NcclComm,
  type StreamHandle,
} from '../runtime/binding.js';
import type { DeviceApi } from '../runtime/device-api.js';
import { type DeviceProgress, deviceProgressFromEnv } from './device-progress.js';
import { JoinLog } from './join-log.js';
import { PdlChain, type Mailbox } from './model-dispatch.js';
import { RingConsumer, RingView } from './ring.js';
import { StreamWatch } from './stream-watch.js';
import type { WorkerInit } from './worker-init.js';

/** A record this worker will not run; its code goes back to the main thread with the fault. */
export class Refusal extends MemraError<FaultCode> {}

/**
 * The link's low-latency buffers, as `llConfigure` set them (held by the device, per thread):
 * addresses as the main thread computed them, made pointers where they reach the device.
 */
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

export class WorkerContext {
  readonly tag: string;
  readonly dev: DeviceApi;
  readonly ring: RingConsumer;
  readonly peerRing: RingView | undefined;
  /** Counters as this thread sees them; rebased onto the registered pages at open(). */
  completion: Uint32Array = new Uint32Array(0);
  /** 0 until open() and after close(). */
  stream: StreamHandle = asStreamHandle(0);
  signalBase: DevicePtr = asDevicePtr(0);
  /** Where ToMailbox copies land: registered pages after the counters. */
  mailbox: Mailbox = { devicePtr: asDevicePtr(0), bytes: 0 };
  registration: HostRegistration | undefined;
  serving: Promise<void> | undefined;
  closing = false;
  faulted = false;
  /** Records executed, for tests and the profile. */
  executed = 0;
  /** Executable graphs by the slot the main thread named them with. */
  readonly graphs = new Map<number, GraphHandle>();
  /** Child graphs (captured, not instantiated: parts of a parent graph) by slot. */
  readonly children = new Map<number, ChildGraphHandle>();
  /** True between BeginCapture and EndCapture: the stream may not be queried or synchronised. */
  capturing = false;
  /**
   * The profiler's board for this worker's ring (workers/profile-board.ts), and the offset that
   * turns `performance.now()` into the shared host clock: a stamp per record must cost tens of
   * nanoseconds, and `process.hrtime.bigint()` allocates a BigInt.
   */
  board: { marks: Float64Array; stamps: Float64Array; offsetUs: number } | undefined;
  /** This rank's NCCL communicator, once `ncclInit` made it. */
  comm: NcclComm = asNcclComm(0);
  /** Whether `llConfigure` has given this rank's LL joins their buffers. */
  llReady = false;
  /** When each join that waits on the device was enqueued (join-log.ts). */
  readonly joinLog: JoinLog;
  /** Queries the stream while the ring is idle, so a device fault is reported when it happens. */
  readonly watch = new StreamWatch();
  /** With MEMRA_DEVICE_PROGRESS=1, an event after each record: where the device stopped. */
  readonly progress: DeviceProgress | undefined;
  /** Which model launches may overlap the kernel before them on this stream. */
  readonly pdlChain = new PdlChain();

  /** `dev`: workerDevice(init), made by the entry (device-worker.ts). */
  constructor(
    readonly init: WorkerInit,
    dev: DeviceApi,
  ) {
    this.tag = workerTag(init);
    this.dev = dev;
    this.ring = new RingConsumer(new RingView(init.ring, `ring ${init.rank}`));
    this.peerRing = init.peerRing ? new RingView(init.peerRing, `ring ${1 - init.rank}`) : undefined;
    this.joinLog = new JoinLog(init.joinLog);
    this.progress = deviceProgressFromEnv(init.backend);
  }

  needOpen(call: string): void {
    if (this.stream === 0) throw new Error(`${this.tag}: ${call} before open()`);
    if (this.closing) throw new Error(`${this.tag}: ${call} after close()`);
  }
}

export function workerTag(init: WorkerInit): string {
  return `worker ${init.rank} (device ${init.ordinal})`;
}

/**
 * The worker's device: the addon, or the CPU reference, imported only where it runs (every worker
 * compiles what it imports, and a CUDA worker, one per rank of every session, has no use for it).
 */
export async function workerDevice(init: WorkerInit): Promise<DeviceApi> {
  if (init.backend === 'cpu') {
    if (!init.cpuWorld) throw new Error(`${workerTag(init)}: cpu backend without its shared world`);
    const { CpuDevice } = await import('../runtime/cpu-device.js');
    return new CpuDevice(init.cpuWorld, init.rank);
  }
  return loadBinding();
}
