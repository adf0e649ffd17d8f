/**
 * The runtime: one pinned device worker per rank (one, the unsharded layout on one GPU; or two),
 * their command rings and completion counters, and, with two ranks, the proof that each reaches
 * the other's memory. The main thread owns the decode walk and never calls CUDA on the hot path;
 * it only writes ring records and reads counters the GPU wrote.
 */
import { loadBinding } from './binding.js';
import type { BackendKind } from './device-api.js';
import { createCpuWorld } from './cpu-world.js';
import { planWorkerCpus, readPlacementInputs } from './cpu-placement.js';
import { checkDevices, checkInRange, defaultDevices, detectBackend, visibleDevices } from './device-choice.js';
import { probePeerAccess, type PeerStatus } from './peer.js';
import { Rank } from './rank.js';
import { JoinLog, describeJoinHalves } from '../workers/join-log.js';
import { RingProducer, RingView } from '../workers/ring.js';
import { RingState, W_STATE, W_TAIL, seqDiff } from '../workers/ring-layout.js';
import { WorkerHandle } from '../workers/worker-handle.js';
import { reportStallNotes, reportStreams } from './stream-report.js';
import type { WorkerFault } from '../workers/worker-init.js';
import { boolean, deferred, integer, oneOf, options, powerOfTwo } from '../api/check.js';
import { holdOpen } from './exit-guard.js';

export interface RuntimeOptions {
  /** `auto` (default): CUDA when a device is visible, else the CPU reference. */
  backend?: BackendKind | 'auto';
  /**
   * Device ordinals, one per rank: `[d]` opens one worker (rank 0), `[d0, d1]` two. Default
   * [0, 1] where two devices are visible (the CPU reference emulates two), [0] where one is,
   * [0, 0] with `loopback`.
   */
  devices?: readonly number[];
  /**
   * Two ranks on one device in this process (`devices: [d, d]`), for tests and for developing
   * two-rank code on one card. Every thread of a process uses the device's one primary context,
   * so both ranks share an address space and a "peer" store is an ordinary store. Its timings are
   * not two-GPU figures; the `nccl` transport refuses it. Default false.
   */
  loopback?: boolean;
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
  /** CPU backend: bytes of emulated memory per device (in loopback, per rank). Default 64 MiB. */
  cpuArenaBytes?: number;
  /**
   * Two ranks: probe and enable peer access both ways at open (in loopback, where there is no
   * peer access to enable, the same write-and-read-back check of each rank's memory by the
   * other). Default true.
   */
  peerAccess?: boolean;
  /**
   * CUDA: pin each worker's thread to a core of its own near its GPU (runtime/cpu-placement.ts).
   * Default true; where the topology cannot be read the workers run unpinned (see `placement`).
   */
  pinWorkers?: boolean;
  /**
   * For tests and the soak: the control plane's fault hooks, `hang` (a call that answers only
   * after the milliseconds it is given), `crash` (an uncaught error on the worker's thread) and
   * `failStream` (the worker's stream queries throw, as after a kernel's fault). Without it the
   * workers do not load them, and the calls are refused by name. Default false.
   */
  faultHooks?: boolean;
}

const PAGE = 4096;

/**
 * Every option's type and range, checked before anything is started; the rules between options
 * (which devices, loopback's) are device-choice.ts's.
 */
export const RUNTIME_OPTIONS = options<RuntimeOptions>({
  backend: oneOf(['auto', 'cuda', 'cpu']),
  // Their shape and the rules between them are checkDevices's (device-choice.ts), in its words.
  devices: deferred(),
  loopback: deferred(),
  ringCapacity: powerOfTwo(2, 1 << 20),
  spinMicros: integer(0, 1_000_000),
  handshakeTimeoutMs: integer(1, 600_000),
  callTimeoutMs: integer(1, 3_600_000),
  completionSlots: integer(1, 1 << 20),
  mailboxBytes: integer(0, 1 << 30),
  cpuArenaBytes: integer(4096, 2 ** 31),
  peerAccess: boolean,
  pinWorkers: boolean,
  faultHooks: boolean,
});

/** The cores to pin the workers to, or why they stay unpinned. */
function workerCpus(devices: readonly number[]): { cpus: Array<number | undefined>; why?: string } {
  const none = devices.map(() => undefined);
  try {
    const b = loadBinding();
    const plan = planWorkerCpus(readPlacementInputs(devices.map((d) => b.deviceProps(d).pciBusId)));
    return plan.every((c) => c !== undefined)
      ? { cpus: plan }
      : { cpus: none, why: `fewer than ${devices.length} spare core(s) for the workers` };
  } catch (e) {
    return { cpus: none, why: `CPU topology unreadable: ${(e as Error).message}` };
  }
}

export { detectBackend };

/** A runtime's ranks: one (one worker) or two. */
export type Ranks = readonly [Rank] | readonly [Rank, Rank];

export class Runtime {
  /** One rank per device ordinal asked for; code that needs two gets them through `pair()`. */
  readonly ranks: Ranks;
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
  /** Ends the exit guard's hold (runtime/exit-guard.ts), once closed. */
  private release: () => void = () => undefined;
  private readonly faultListeners: Array<(e: Error) => void> = [];
  private readonly counters: Uint32Array[] = [];
  /** Each rank's mailbox (RuntimeOptions.mailboxBytes), written by ToMailbox copies. */
  readonly mailboxes: Uint8Array[] = [];
  /** Where each worker's thread runs: its core, or why it is not pinned. */
  readonly placement: Array<{ rank: number; cpu: number | null; why?: string }> = [];
  /** Added to a completion wait's timeout report (addStallNote). */
  private readonly stallNotes = new Set<() => Promise<string>>();

  private constructor(
    readonly backend: BackendKind,
    private readonly workers: readonly WorkerHandle[],
    rings: readonly RingView[],
    private readonly opts: Required<RuntimeOptions>,
    readonly completionBuffers: readonly SharedArrayBuffer[],
    /** When each rank's worker issued each join that waits on the device (workers/join-log.ts). */
    readonly joinLogs: readonly JoinLog[],
  ) {
    const wait = { spinMicros: opts.spinMicros, timeoutMs: opts.handshakeTimeoutMs };
    this.ranks = workers.map(
      (w, r) => new Rank(r, opts.devices[r]!, new RingProducer(rings[r]!, wait), w),
    ) as unknown as Ranks;
  }

  /**
   * `note` is asked, and its words added, whenever a completion wait times out, until the returned
   * function is called: what the runtime cannot see for itself, such as a link's refusal words (a
   * refused join can leave a step's later joins each waiting out their bound, which reads as a
   * stall). A note must not drain a stream; each gets the stream report's bound.
   */
  addStallNote(note: () => Promise<string>): () => void {
    this.stallNotes.add(note);
    return () => this.stallNotes.delete(note);
  }

  /** Both ranks on one device (RuntimeOptions.loopback). */
  get loopback(): boolean {
    return this.opts.loopback;
  }

  /** The device ordinal of each rank. */
  get devices(): readonly number[] {
    return this.opts.devices;
  }

  /**
   * Both ranks, for code that needs two (the link, its transports, the sharded walk, the parent
   * graph, two-rank graphs); throws naming `what` on a one-rank runtime.
   */
  pair(what: string): readonly [Rank, Rank] {
    if (this.ranks.length === 2) return this.ranks;
    throw new RangeError(
      `${what} needs two ranks, and this runtime has one (devices [${this.opts.devices.join(', ')}]): ` +
        'open it with two devices, or with devices [d, d] and loopback: true to put both ranks on one',
    );
  }

  static async open(options: RuntimeOptions = {}): Promise<Runtime> {
    RUNTIME_OPTIONS(options, 'RuntimeOptions');
    const backendAsked = options.backend ?? 'auto';
    const loopback = options.loopback ?? false;
    // The shape and loopback rules first: they need no device, and a refusal then names them.
    if (options.devices !== undefined) checkDevices(options.devices, loopback);
    const backend: BackendKind = backendAsked === 'auto' ? detectBackend().backend : backendAsked;
    const visible = visibleDevices(backend);
    const o: Required<RuntimeOptions> = {
      backend,
      devices: [...(options.devices ?? defaultDevices(visible, loopback))],
      loopback,
      ringCapacity: options.ringCapacity ?? 4096,
      spinMicros: options.spinMicros ?? 200,
      handshakeTimeoutMs: options.handshakeTimeoutMs ?? 5000,
      callTimeoutMs: options.callTimeoutMs ?? 60_000,
      completionSlots: options.completionSlots ?? 256,
      mailboxBytes: options.mailboxBytes ?? 64 * 1024,
      cpuArenaBytes: options.cpuArenaBytes ?? 64 * 2 ** 20,
      peerAccess: options.peerAccess ?? true,
      pinWorkers: options.pinWorkers ?? true,
      faultHooks: options.faultHooks ?? false,
    };
    checkInRange(checkDevices(o.devices, o.loopback), visible, backend);
    const n = o.devices.length;
    const cpus =
      backend === 'cuda' && o.pinWorkers
        ? workerCpus(o.devices)
        : {
            cpus: o.devices.map(() => undefined),
            why: o.pinWorkers ? 'the CPU reference is not pinned' : 'pinWorkers: false',
          };
    const rings = o.devices.map((_, r) => RingView.create(o.ringCapacity, `ring ${r}`));
    const joinLogs = o.devices.map(() => JoinLog.create());
    const mailboxOffset = Math.ceil((o.completionSlots * 4) / 256) * 256;
    const completion = o.devices.map(
      () => new SharedArrayBuffer(PAGE + Math.ceil((mailboxOffset + o.mailboxBytes) / PAGE) * PAGE),
    );
    // In loopback both ranks allocate on one emulated device: it holds each rank's share.
    const cpuWorld = backend === 'cpu' ? createCpuWorld(2, o.cpuArenaBytes * (o.loopback ? 2 : 1), n) : undefined;

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
    const workers = o.devices.map(
      (ordinal, r) =>
        new WorkerHandle(
          {
            rank: r,
            ordinal,
            loopback: o.loopback,
            backend,
            cpuWorld,
            ring: rings[r]!.sab,
            ...(n === 2 ? { peerRing: rings[1 - r]!.sab } : {}),
            joinLog: joinLogs[r]!.sab,
            completion: completion[r]!,
            completionSlots: o.completionSlots,
            mailboxOffset,
            mailboxBytes: o.mailboxBytes,
            spinMicros: o.spinMicros,
            handshakeTimeoutMs: o.handshakeTimeoutMs,
            faultHooks: o.faultHooks,
            ...(cpus.cpus[r] === undefined ? {} : { cpu: cpus.cpus[r] }),
          },
          o.callTimeoutMs,
          onFault,
          onExit(r),
        ),
    );
    rt = new Runtime(backend, workers, rings, o, completion, joinLogs);
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
      if (o.peerAccess && rt.ranks.length === 2) rt.peer = await probePeerAccess(rt.ranks, o.loopback);
      rt.release = holdOpen(
        `a runtime (${backend}, ${o.loopback ? `device ${o.devices[0]}, both ranks` : `device${n === 2 ? 's' : ''} ${o.devices.join(' and ')}`})`,
        () => rt!.close(),
      );
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
      if (t > end) {
        const halves = describeJoinHalves(
          this.joinLogs,
          0,
          'joins that wait on the device since the last barrier reset',
        );
        const notes = await reportStallNotes(this.stallNotes);
        throw new Error(
          `completion counter ${slot} of rank ${rank} did not reach ${value} in ${timeoutMs} ms (it reads ${this.counter(rank, slot)}); ` +
            (await reportStreams(this.workers)) +
            (halves ? `; ${halves}` : '') +
            (notes ? `; ${notes}` : ''),
        );
      }
      if (t > spinEnd) await new Promise((r) => setImmediate(r));
    }
  }

  /** Every record pushed so far, on every rank, has run to completion. */
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
    // A worker that died leaves the runtime unusable: close the survivor too.
    if ((e as { code?: string }).code === 'ERR_WORKER_EXITED') void this.close().catch(() => undefined);
  }

  /**
   * Drain every rank, then release their devices and end the workers. Work in flight is finished
   * first: freeing memory a queued kernel still writes is the lifetime hazard of seed 000.
   */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  /** `await using rt = await Runtime.open(...)` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
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
    this.release();
    await Promise.all(this.workers.map((w) => w.terminate('was closed with its runtime')));
    if (errors.length > 0)
      throw new AggregateError(errors, `runtime close: ${errors.map((e) => e.message).join('; ')}`);
  }
}
