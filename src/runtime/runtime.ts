/**
 * The runtime: two pinned device workers, their command rings and completion counters, and the
 * proof of peer access between them. The main thread owns the decode walk and never calls CUDA
 * on the hot path; it only writes ring records and reads counters the GPU wrote.
 */
import { loadBinding } from './binding.js';
import type { BackendKind } from './device-api.js';
import { createCpuWorld } from './cpu-world.js';
import { planWorkerCpus, readPlacementInputs } from './cpu-placement.js';
import { probePeerAccess, type PeerStatus } from './peer.js';
import { Rank } from './rank.js';
import { RingProducer, RingView } from '../workers/ring.js';
import { RingState, W_STATE, W_TAIL, seqDiff } from '../workers/ring-layout.js';
import { WorkerHandle } from '../workers/worker-handle.js';
import type { WorkerFault } from '../workers/worker-init.js';

export interface RuntimeOptions {
  /** `auto` (default): CUDA when two devices are visible, else the CPU reference. */
  backend?: BackendKind | 'auto';
  /** Device ordinals of rank 0 and rank 1. Default [0, 1]. */
  devices?: [number, number];
  /** Records per ring, a power of two. Default 4096. */
  ringCapacity?: number;
  /** How long a waiter spins before sleeping. Default 200 us. */
  spinMicros?: number;
  /** A cross-rank handshake that waits longer refuses its record. Default 5000 ms. */
  handshakeTimeoutMs?: number;
  /** Every control call rejects after this long. Default 60000 ms. */
  callTimeoutMs?: number;
  /** Completion counters per rank. Default 256. */
  completionSlots?: number;
  /**
   * Bytes of each rank's mailbox: mapped host memory after the completion counters that device
   * work copies results into (a decode step's tokens), read here without a control call once a
   * counter says the copy is done. Default 64 KiB.
   */
  mailboxBytes?: number;
  /** CPU backend: bytes of emulated memory per device. Default 64 MiB. */
  cpuArenaBytes?: number;
  /** Probe and enable peer access both ways at open. Default true. */
  peerAccess?: boolean;
  /**
   * CUDA: pin each worker's thread to a core of its own near its GPU (runtime/cpu-placement.ts).
   * Default true; where the topology cannot be read the workers run unpinned (see `placement`).
   */
  pinWorkers?: boolean;
}

const PAGE = 4096;

function checkInt(name: string, v: number, lo: number, hi: number): number {
  if (!Number.isInteger(v) || v < lo || v > hi)
    throw new RangeError(`RuntimeOptions.${name} must be an integer in [${lo}, ${hi}], got ${v}`);
  return v;
}

/** The cores to pin the two workers to, or why they stay unpinned. */
function workerCpus(devices: [number, number]): { cpus: Array<number | undefined>; why?: string } {
  try {
    const b = loadBinding();
    const plan = planWorkerCpus(readPlacementInputs(devices.map((d) => b.deviceProps(d).pciBusId)));
    return plan.every((c) => c !== undefined)
      ? { cpus: plan }
      : { cpus: [undefined, undefined], why: 'fewer than two spare cores for the workers' };
  } catch (e) {
    return { cpus: [undefined, undefined], why: `CPU topology unreadable: ${(e as Error).message}` };
  }
}

/** Pick the backend for `auto`: CUDA needs the addon and two devices. */
export function detectBackend(): { backend: BackendKind; devices: number; why: string } {
  let devices = 0;
  try {
    devices = loadBinding().deviceCount();
  } catch (e) {
    return { backend: 'cpu', devices: 0, why: `addon unavailable: ${(e as Error).message}` };
  }
  if (devices >= 2) return { backend: 'cuda', devices, why: `${devices} CUDA devices` };
  return { backend: 'cpu', devices, why: `${devices} CUDA device(s) visible; two are needed` };
}

export class Runtime {
  readonly ranks: readonly [Rank, Rank];
  peer: PeerStatus | undefined;
  /** The first fault or worker death; once set, the runtime is closing or closed. */
  failure: Error | undefined;
  /** Set while a consequential fault (ERR_PEER_STOPPED) waits for its cause to arrive. */
  private awaitingCause: ReturnType<typeof setTimeout> | undefined;
  /**
   * Every fault, in arrival order. A refusal on one rank often makes the other refuse too (its
   * handshake finds the peer stopped); the two reports race, so the root cause may be second.
   */
  readonly faults: Error[] = [];
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly faultListeners: Array<(e: Error) => void> = [];
  private readonly counters: Uint32Array[] = [];
  /** Each rank's mailbox (RuntimeOptions.mailboxBytes), written by ToMailbox copies. */
  readonly mailboxes: Uint8Array[] = [];
  /** Where each worker's thread runs: its core, or why it is not pinned. */
  readonly placement: Array<{ rank: number; cpu: number | null; why?: string }> = [];

  private constructor(
    readonly backend: BackendKind,
    private readonly workers: readonly [WorkerHandle, WorkerHandle],
    rings: readonly [RingView, RingView],
    private readonly opts: Required<RuntimeOptions>,
    readonly completionBuffers: readonly [SharedArrayBuffer, SharedArrayBuffer],
  ) {
    const wait = { spinMicros: opts.spinMicros, timeoutMs: opts.handshakeTimeoutMs };
    this.ranks = [0, 1].map(
      (r) => new Rank(r, opts.devices[r]!, new RingProducer(rings[r]!, wait), workers[r]!),
    ) as unknown as [Rank, Rank];
  }

  static async open(options: RuntimeOptions = {}): Promise<Runtime> {
    const o: Required<RuntimeOptions> = {
      backend: options.backend ?? 'auto',
      devices: options.devices ?? [0, 1],
      ringCapacity: options.ringCapacity ?? 4096,
      spinMicros: options.spinMicros ?? 200,
      handshakeTimeoutMs: options.handshakeTimeoutMs ?? 5000,
      callTimeoutMs: options.callTimeoutMs ?? 60_000,
      completionSlots: options.completionSlots ?? 256,
      mailboxBytes: options.mailboxBytes ?? 64 * 1024,
      cpuArenaBytes: options.cpuArenaBytes ?? 64 * 2 ** 20,
      peerAccess: options.peerAccess ?? true,
      pinWorkers: options.pinWorkers ?? true,
    };
    if (!['auto', 'cuda', 'cpu'].includes(o.backend))
      throw new RangeError(`RuntimeOptions.backend must be 'auto', 'cuda' or 'cpu', got '${o.backend}'`);
    if (!Array.isArray(o.devices) || o.devices.length !== 2)
      throw new RangeError('RuntimeOptions.devices must be two device ordinals, one per rank');
    checkInt('spinMicros', o.spinMicros, 0, 1_000_000);
    checkInt('handshakeTimeoutMs', o.handshakeTimeoutMs, 1, 600_000);
    checkInt('callTimeoutMs', o.callTimeoutMs, 1, 3_600_000);
    checkInt('completionSlots', o.completionSlots, 1, 1 << 20);
    checkInt('mailboxBytes', o.mailboxBytes, 0, 1 << 30);
    const [d0, d1] = o.devices;
    if (d0 === d1) {
      throw new RangeError(
        `RuntimeOptions.devices: both ranks are on device ${d0}. Two ranks need two devices: a kernel's store into a peer ` +
          'pointer across two contexts on one card is undefined (it reads right at some sizes and wrong at others).',
      );
    }
    const backend: BackendKind = o.backend === 'auto' ? detectBackend().backend : o.backend;
    const deviceCount = backend === 'cuda' ? loadBinding().deviceCount() : 2;
    for (const d of o.devices) {
      if (!Number.isInteger(d) || d < 0 || d >= deviceCount) {
        throw new RangeError(
          `device ordinal ${d} is out of range: ${deviceCount} ${backend === 'cuda' ? 'CUDA devices' : 'CPU reference devices'} visible` +
            (deviceCount > 0 ? ` (ordinals 0..${deviceCount - 1})` : ' (no CUDA device or driver; use backend: "cpu")'),
        );
      }
    }
    const cpus =
      backend === 'cuda' && o.pinWorkers
        ? workerCpus(o.devices)
        : { cpus: [undefined, undefined], why: o.pinWorkers ? 'the CPU reference is not pinned' : 'pinWorkers: false' };
    const rings = [RingView.create(o.ringCapacity, 'ring 0'), RingView.create(o.ringCapacity, 'ring 1')] as const;
    const mailboxOffset = Math.ceil((o.completionSlots * 4) / 256) * 256;
    const completion = [0, 1].map(
      () => new SharedArrayBuffer(PAGE + Math.ceil((mailboxOffset + o.mailboxBytes) / PAGE) * PAGE),
    ) as unknown as [SharedArrayBuffer, SharedArrayBuffer];
    const cpuWorld = backend === 'cpu' ? createCpuWorld(2, o.cpuArenaBytes) : undefined;

    let rt: Runtime | undefined;
    const onFault = (f: WorkerFault): void =>
      rt?.fail(Object.assign(new Error(f.message), { code: f.code, rank: f.rank, seq: f.seq }));
    const onExit =
      (r: number) =>
      (e: Error): void => {
        // The dead consumer cannot mark its own ring: do it for it, so the producer's next push and
        // the peer's handshake refuse at once instead of timing out.
        const ring = rings[r]!;
        Atomics.store(ring.i32, W_STATE, RingState.Stopped);
        Atomics.notify(ring.i32, W_TAIL);
        if (rt && !rt.closed) rt.fail(e);
      };
    const workers = [0, 1].map(
      (r) =>
        new WorkerHandle(
          {
            rank: r,
            ordinal: o.devices[r]!,
            backend,
            cpuWorld,
            ring: rings[r]!.sab,
            peerRing: rings[1 - r]!.sab,
            completion: completion[r]!,
            completionSlots: o.completionSlots,
            mailboxOffset,
            mailboxBytes: o.mailboxBytes,
            spinMicros: o.spinMicros,
            handshakeTimeoutMs: o.handshakeTimeoutMs,
            ...(cpus.cpus[r] === undefined ? {} : { cpu: cpus.cpus[r] }),
          },
          o.callTimeoutMs,
          onFault,
          onExit(r),
        ),
    ) as unknown as [WorkerHandle, WorkerHandle];
    rt = new Runtime(backend, workers, rings, o, completion);
    try {
      const opened = await Promise.all(workers.map((w) => w.call('open')));
      opened.forEach((x, r) => {
        rt!.placement.push({
          rank: r,
          cpu: x.pinned.cpu,
          ...(x.pinned.cpu === null
            ? { why: x.pinned.why ?? cpus.why ?? 'not asked (RuntimeOptions.pinWorkers, or no core to spare)' }
            : {}),
        });
        rt!.counters.push(new Uint32Array(completion[r]!, x.completionOffset, o.completionSlots));
        rt!.mailboxes.push(new Uint8Array(completion[r]!, x.completionOffset + mailboxOffset, o.mailboxBytes));
      });
      if (o.peerAccess) rt.peer = await probePeerAccess(rt.ranks);
      return rt;
    } catch (e) {
      await rt.close().catch(() => undefined);
      throw e;
    }
  }

  /** Called with the first fault or worker death. */
  onFault(cb: (e: Error) => void): void {
    this.faultListeners.push(cb);
  }

  /** Completion counters of a rank, as the GPU last wrote them. */
  counter(rank: number, slot: number): number {
    return Atomics.load(this.counters[rank]!, slot) >>> 0;
  }

  /** Spin until the GPU has written a value at or past `value` into the counter. */
  spinUntilCompleted(rank: number, slot: number, value: number, timeoutMs = 10_000): void {
    const end = performance.now() + timeoutMs;
    const c = this.counters[rank]!;
    while (seqDiff(Atomics.load(c, slot), value) < 0) {
      if (this.failure) throw this.failure;
      if (performance.now() > end)
        throw new Error(
          `completion counter ${slot} of rank ${rank} did not reach ${value} in ${timeoutMs} ms (it reads ${this.counter(rank, slot)})`,
        );
    }
  }

  /**
   * Until each rank r has enqueued its record seqs[r] (undefined: no wait on that rank), yielding
   * to the event loop between polls; throws the runtime's failure, or `timeout` after `timeoutMs`.
   */
  async waitEnqueued(seqs: ReadonlyArray<number | undefined>, timeoutMs: number, timeout: string): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!seqs.every((s, r) => s === undefined || this.ranks[r]!.enqueued(s))) {
      if (this.failure) throw this.failure;
      if (performance.now() > deadline) throw new Error(timeout);
      await new Promise((res) => setImmediate(res));
    }
  }

  /**
   * Like `spinUntilCompleted`, but yields to the event loop between polls, after spinning first
   * for `spinMicros` (the runtime's, unless given: 0 for a wait in the background, which must not
   * hold the thread the caller's next step is enqueued from).
   */
  async waitCompleted(
    rank: number,
    slot: number,
    value: number,
    timeoutMs = 10_000,
    spinMicros = this.opts.spinMicros,
  ): Promise<void> {
    const end = performance.now() + timeoutMs;
    const c = this.counters[rank]!;
    const spinEnd = performance.now() + spinMicros / 1000;
    while (seqDiff(Atomics.load(c, slot), value) < 0) {
      if (this.failure) throw this.failure;
      const t = performance.now();
      if (t > end)
        throw new Error(
          `completion counter ${slot} of rank ${rank} did not reach ${value} in ${timeoutMs} ms (it reads ${this.counter(rank, slot)})`,
        );
      if (t > spinEnd) await new Promise((r) => setImmediate(r));
    }
  }

  /** Every record pushed so far, on both ranks, has run to completion. */
  async drain(): Promise<void> {
    await Promise.all(this.ranks.map((r) => r.drain()));
  }

  private fail(e: Error): void {
    this.faults.push(e);
    if (this.failure) return;
    // A worker that stopped because its PEER refused a record is a consequence; the peer's own
    // fault, posted at about the same moment, is the cause and may arrive second. Report the
    // cause: wait a moment for it, then fall back to this one.
    if ((e as { code?: string }).code === 'ERR_PEER_STOPPED') {
      if (!this.awaitingCause) {
        this.awaitingCause = setTimeout(() => {
          if (!this.failure) this.report(e);
        }, 500);
        this.awaitingCause.unref();
      }
      return;
    }
    this.report(e);
  }

  private report(e: Error): void {
    if (this.awaitingCause) {
      clearTimeout(this.awaitingCause);
      this.awaitingCause = undefined;
    }
    this.failure = e;
    for (const cb of this.faultListeners) cb(e);
    // A worker that died leaves the pair unusable: close the survivor too.
    if ((e as { code?: string }).code === 'ERR_WORKER_EXITED') void this.close().catch(() => undefined);
  }

  /**
   * Drain both ranks, then release their devices and end the workers. Work in flight is finished
   * first: freeing memory a queued kernel still writes is the lifetime hazard of seed 000.
   */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    const errors: Error[] = [];
    await Promise.all(
      this.workers.map(async (w) => {
        if (w.dead) return;
        try {
          await w.call('close', Math.floor(this.opts.callTimeoutMs / 2));
        } catch (e) {
          if (!w.dead) errors.push(e as Error);
        }
      }),
    );
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.terminate()));
    if (errors.length > 0)
      throw new AggregateError(errors, `runtime close: ${errors.map((e) => e.message).join('; ')}`);
  }
}
