/**
 * The TP link between the two ranks: seed 000's `ArLink` (seed 000: the Rust engine's
 * small-message all-reduce for tensor-parallel decode, docs/architecture.md#terms), its resources
 * and its contracts. The transports (transports/*.ts) move bytes through it; everything here that
 * runs per join only writes ring records.
 *
 * Contracts kept from the seed:
 * - Two ranks on two devices (the runtime refuses one ordinal twice), except in loopback, where
 *   the caller asked for both on one device (RuntimeOptions.loopback: one context, so a "peer"
 *   store is an ordinary store). A one-rank runtime has no link.
 * - Write-after-write: before a producer writes into a consumer's buffer, the consumer records
 *   `ready` after everything it already enqueued and the producer waits on it
 *   (`waitForConsumer`). Without it a push races the consumer's own pending writes: the seed saw
 *   broadcast lose part of a 64 KiB payload that way.
 * - Read-after-write: the consumer waits on the producer's `pushed` before it reads.
 * - Staging is allocated on demand and grown only after draining both ranks: the old buffers go
 *   back to the allocator while a fold may still be writing into them.
 * - The one-shot's refusal words are read only after a drain: checks and failures, never the walk.
 * - The low-latency (LL) joins keep their epochs, acks and slots here too; a refusal there is
 *   reset with the one-shot's.
 * - Every rank is drained before the link or its staging goes away.
 */
import type { Runtime } from './runtime.js';
import type { DeviceEvent, Rank } from './rank.js';
import { asDevicePtr, type DevicePtr, type HostPtr } from './binding.js';
import { checkLinkConstants } from './link-constants.js';

export type PerRank = readonly [DevicePtr, DevicePtr];

/** Ticks the one-shot barrier spins before refusing: about a second of SM clock (seed 000). */
export const AR_SPIN_LIMIT = 2_000_000_000;

interface Buffers {
  device: [DevicePtr, DevicePtr];
  floats: number;
}

/** An idle bound for the LL server (`ArLink.setLlServe`): long enough to span a decode step's gaps. */
export const LL_SERVE_IDLE_MICROS = 1000;

export class ArLink {
  readonly ranks: readonly [Rank, Rank];
  /** Recorded on a rank's own stream after its pending writes: the write-after-write edge. */
  readonly ready: [DeviceEvent, DeviceEvent];
  /** Recorded by a producer after its push: the read-after-write edge. */
  readonly pushed: [DeviceEvent, DeviceEvent];
  /** One-shot barrier signal blocks, zeroed, one per rank. */
  readonly signal: PerRank;
  /** One-shot refusal words, one per rank. */
  readonly err: PerRank;
  readonly maxBlocks: number;
  /** SM clock ticks a device-side wait spins before refusing; `setSpinLimit` changes it. */
  spinLimit = AR_SPIN_LIMIT;
  /**
   * Eager LL joins of up to 32 KB through each rank's LL server (cu/tp_ll_server.h): a stream
   * write per join instead of a launch. The host's cost of a join falls from 5.5-7.0 us to
   * 3.8-4.5 at 8 KB (joins run22), but a served join that other work follows costs its stream
   * about 6 us while the stream's wait for it resolves, so a walk that alternates joins and
   * kernels runs slower (the eager `bench` decode step: 5.66 ms launched, decode run14; 7.07
   * served, docs/performance.md). Hence off by default. Its
   * grid stops after this many microseconds idle (an implicitly synchronizing call such as
   * cudaFree waits up to that long); 0 launches every join.
   * `setLlServe` changes it; LL_SERVE_IDLE_MICROS is a sensible value to turn it on with.
   */
  llServeIdleMicros = 0;
  private stage: Buffers | undefined;
  private scratch: Buffers | undefined;
  /** Pinned host bounce buffers, one per direction (index = producer rank). */
  private host: { ptr: [HostPtr, HostPtr]; floats: number } | undefined;
  /** Low-latency receive slots (llDepth epochs x cap x 8 bytes) and state blocks, per rank. */
  private ll: { recv: [DevicePtr, DevicePtr]; state: [DevicePtr, DevicePtr]; cap: number } | undefined;
  private ncclReady: Promise<void> | undefined;
  private closed = false;
  /** Ends the refusal words' part in the runtime's stall reports (close). */
  private readonly dropStallNote: () => void;

  private constructor(
    readonly rt: Runtime,
    ranks: readonly [Rank, Rank],
    events: DeviceEvent[],
    signal: PerRank,
    err: PerRank,
    private readonly signalBytes: number,
    maxBlocks: number,
    private readonly llStateBytes: number,
    private readonly llDepth: number,
    /** The most values one LL join may move. */
    readonly llMaxValues: number,
  ) {
    this.ranks = ranks;
    this.ready = [events[0]!, events[1]!];
    this.pushed = [events[2]!, events[3]!];
    this.signal = signal;
    this.err = err;
    this.maxBlocks = maxBlocks;
    this.dropStallNote = rt.addStallNote(() => this.peekRefusals());
  }

  static async open(rt: Runtime): Promise<ArLink> {
    const ranks = rt.pair('the tp link');
    const [a, b] = ranks;
    // The seed's refusal (two contexts on one card) does not apply in loopback: the runtime put
    // both ranks in this process, where they share the device's one context and address space.
    if (a.ordinal === b.ordinal && !rt.loopback)
      throw new Error(
        `tp link needs two DEVICES; both ranks are on ordinal ${a.ordinal} (loopback, which allows that, is off)`,
      );
    const constants = await a.control.call('linkConstants');
    checkLinkConstants(constants, `tp link (rank 0, ${rt.backend})`);
    const { signalBytes, maxBlocks, llStateBytes, llDepth, llMaxValues } = constants;
    const events = await Promise.all([a.createEvent(), b.createEvent(), a.createEvent(), b.createEvent()]);
    const signal = await Promise.all(ranks.map((r) => r.alloc(signalBytes)));
    const err = await Promise.all(ranks.map((r) => r.alloc(256)));
    const link = new ArLink(
      rt,
      ranks,
      events,
      [signal[0]!, signal[1]!],
      [err[0]!, err[1]!],
      signalBytes,
      maxBlocks,
      llStateBytes,
      llDepth,
      llMaxValues,
    );
    await link.zeroBarrier();
    return link;
  }

  /**
   * Order `producer`'s stream after everything `consumer` has enqueued, so a write into the
   * consumer's memory cannot land on top of the consumer's own pending writes or reads.
   */
  waitForConsumer(producer: number, consumer: number): void {
    this.ranks[consumer]!.record(this.ready[consumer]!);
    this.ranks[producer]!.wait(this.ready[consumer]!);
  }

  /** The producer says its push is enqueued; the consumer's stream waits for it. */
  publish(producer: number, consumer: number): void {
    this.ranks[producer]!.record(this.pushed[producer]!);
    this.ranks[consumer]!.wait(this.pushed[producer]!);
  }

  /** Device staging per rank, at least `floats` long; throws (never drains) if not reserved. */
  stageFor(floats: number): PerRank {
    if (!this.stage || this.stage.floats < floats) {
      throw new Error(
        `tp link: staging holds ${this.stage?.floats ?? 0} floats and this op needs ${floats}; call \`await link.reserve(${floats})\` first (growing drains both ranks, so it is never done on the walk)`,
      );
    }
    return this.stage.device;
  }

  /** Scratch per rank (2 x rows x span for strided NCCL gathers). */
  scratchFor(floats: number): PerRank {
    if (!this.scratch || this.scratch.floats < floats) {
      throw new Error(
        `tp link: scratch holds ${this.scratch?.floats ?? 0} floats and this op needs ${floats}; call \`await link.reserve(...)\` first`,
      );
    }
    return this.scratch.device;
  }

  /** The LL slots' capacity per epoch; throws (never grows) if an op needs more. */
  llFor(floats: number): void {
    if (floats > this.llMaxValues) {
      throw new RangeError(
        `tp link: one low-latency join moves at most ${this.llMaxValues} values and this op needs ${floats}; split it or use another transport`,
      );
    }
    if (!this.ll || this.ll.cap < floats) {
      throw new Error(
        `tp link: the low-latency slots hold ${this.ll?.cap ?? 0} values per epoch and this op needs ${floats}; call \`await link.reserve(${floats})\` first`,
      );
    }
  }

  /**
   * Pinned host bounce buffer for the direction whose producer is `from`, as the address a copy
   * on the device uses: mapped host memory has the same address there (unified addressing).
   */
  hostFor(from: number, floats: number): DevicePtr {
    if (!this.host || this.host.floats < floats) {
      throw new Error(
        `tp link: the host bounce buffer holds ${this.host?.floats ?? 0} floats and this op needs ${floats}; call \`await link.reserve(${floats})\` first`,
      );
    }
    return asDevicePtr(this.host.ptr[from]!);
  }

  /**
   * Make staging, scratch and host buffers hold at least `floats` f32 each (scratch twice that).
   * Growing DRAINS both ranks first: a fold still in flight would otherwise write into memory the
   * allocator has already handed to someone else (the hazard in the seed's own note).
   */
  async reserve(floats: number): Promise<void> {
    if (!Number.isInteger(floats) || floats < 1)
      throw new RangeError(`link.reserve: floats must be a positive integer, got ${floats}`);
    if (this.stage && this.stage.floats >= floats) return;
    await this.rt.drain();
    await this.releaseBuffers();
    const [a, b] = this.ranks;
    const bytes = floats * 4;
    this.stage = { floats, device: [await a.alloc(bytes), await b.alloc(bytes)] };
    this.scratch = { floats: 2 * floats, device: [await a.alloc(2 * bytes), await b.alloc(2 * bytes)] };
    this.host = { floats, ptr: [await a.hostAlloc(bytes), await b.hostAlloc(bytes)] };
    // Slots travel in 16-byte pairs; beyond llMaxValues no LL join can use them (llFor refuses).
    const llValues = Math.min(floats, this.llMaxValues);
    const cap = llValues + (llValues % 2);
    this.ll = {
      cap,
      recv: [await a.alloc(this.llRecvBytes(cap)), await b.alloc(this.llRecvBytes(cap))],
      state: [await a.alloc(this.llStateBytes), await b.alloc(this.llStateBytes)],
    };
    await this.zeroLl();
    await this.configureLl();
  }

  private llRecvBytes(cap: number): number {
    return this.llDepth * cap * 8;
  }

  /** Epochs, acks and slots back to zero on both ranks (the LL protocol's starting state). */
  private async zeroLl(): Promise<void> {
    if (!this.ll) return;
    for (const r of [0, 1]) {
      this.ranks[r]!.memset(this.ll.recv[r]!, 0, this.llRecvBytes(this.ll.cap));
      this.ranks[r]!.memset(this.ll.state[r]!, 0, this.llStateBytes);
    }
    await this.rt.drain();
  }

  /** Change the device-side spin bound of the one-shot and LL waits (joins enqueued later). */
  async setSpinLimit(ticks: number): Promise<void> {
    if (!Number.isSafeInteger(ticks) || ticks < 1)
      throw new RangeError(`link.setSpinLimit: ticks must be a positive integer, got ${ticks}`);
    this.spinLimit = ticks;
    await this.configureLl();
  }

  /** Eager LL joins through the LL server, stopping after `idleMicros` idle (0: a launch per join). */
  async setLlServe(idleMicros: number): Promise<void> {
    if (!Number.isSafeInteger(idleMicros) || idleMicros < 0)
      throw new RangeError(`link.setLlServe: idleMicros must be a non-negative integer, got ${idleMicros}`);
    const before = this.llServeIdleMicros;
    this.llServeIdleMicros = idleMicros;
    try {
      await this.configureLl();
    } catch (e) {
      // Refused (the server needs eager module loading): both ranks go back to what they had, so
      // the link never serves on one rank and launches on the other.
      this.llServeIdleMicros = before;
      await this.configureLl().catch(() => undefined);
      throw e;
    }
  }

  /** Per rank, the LL server's jobs and grid launches so far (zeros on the CPU reference). */
  llServeStats(): Promise<Array<{ jobs: number; launches: number }>> {
    return Promise.all(this.ranks.map((r) => r.control.call('llServeStats')));
  }

  private async configureLl(): Promise<void> {
    const ll = this.ll;
    if (!ll) return;
    await Promise.all(
      this.ranks.map((r, i) =>
        r.control.call('llConfigure', {
          selfRecv: ll.recv[i]!,
          peerRecv: ll.recv[1 - i]!,
          cap: ll.cap,
          selfState: ll.state[i]!,
          peerState: ll.state[1 - i]!,
          err: this.err[i]!,
          spinLimit: this.spinLimit,
          serveIdleMicros: this.llServeIdleMicros,
        }),
      ),
    );
  }

  /** Bring up NCCL: one communicator per device in this process, both ranks joining at once. */
  openNccl(): Promise<void> {
    if (this.rt.loopback) {
      return Promise.reject(
        new Error(
          `the nccl transport cannot run in loopback (both ranks on device ${this.ranks[0].ordinal}): NCCL refuses one device twice in a ` +
            'communicator (ncclCommInitRank: ncclInvalidUsage). Use host, peer, push, oneshot or ll here, or two devices for nccl',
        ),
      );
    }
    this.ncclReady ??= (async () => {
      const [a, b] = this.ranks;
      const id = await a.control.call('ncclUniqueId');
      await Promise.all([a.control.call('ncclInit', id, 2, 0), b.control.call('ncclInit', id, 2, 1)]);
    })();
    return this.ncclReady;
  }

  /** One-shot launch shape: both ranks MUST agree, the barrier pairs block i with block i. */
  blocksFor(n: number): number {
    return Math.min(this.maxBlocks, Math.max(1, Math.ceil(n / 512)));
  }

  /**
   * The one-shot's refusal words per rank: 0 clean, REFUSED_ENTRY entry barrier expired,
   * REFUSED_EXIT exit (link-constants.ts).
   * Drains both ranks, so it belongs in checks and after failures, never on the walk.
   */
  async barrierErrors(): Promise<[number, number]> {
    await this.rt.drain();
    return this.refusalWords();
  }

  /** Each rank's refusal word as its device holds it now, not after its stream (Rank.peekI32). */
  private async refusalWords(): Promise<[number, number]> {
    const [a, b] = await Promise.all(this.ranks.map(async (r, i) => (await r.peekI32(this.err[i]!, 1))[0]!));
    return [a!, b!];
  }

  /**
   * The refusal words as the devices hold them now, without draining: a stalled step's report.
   * A refused join leaves the ranks' epochs apart when one rank advanced past it, and the step's
   * later joins then pair wrong or wait out their bounds one after another, which looks like a
   * stall (docs/reliability.md, the loopback stall).
   */
  private async peekRefusals(): Promise<string> {
    const w = await this.refusalWords();
    if (w.every((v) => v === 0)) return "the tp link's refusal words read 0 on both ranks: no join has refused";
    return (
      `the tp link's refusal words read ${w.map((v, r) => `${v} on rank ${r}`).join(' and ')}: a join refused, ` +
      "and until the barrier's reset the step's later joins pair wrong or each wait out their spin bound"
    );
  }

  /**
   * After a refusal the two ranks' barrier epochs disagree; drain both and zero every flag,
   * epoch and refusal word so the one-shot can be used again.
   */
  async resetBarrier(): Promise<void> {
    await this.rt.drain();
    await this.zeroBarrier();
    await this.zeroLl();
    // A refused join's other half may never have been issued: pair the ranks' joins afresh.
    for (const log of this.rt.joinLogs) log.realign();
  }

  private async zeroBarrier(): Promise<void> {
    await Promise.all(
      this.ranks.map(async (r, i) => {
        await r.upload(this.signal[i]!, new Uint8Array(this.signalBytes));
        await r.upload(this.err[i]!, new Uint8Array(256));
      }),
    );
  }

  private async releaseBuffers(): Promise<void> {
    const [a, b] = this.ranks;
    for (const buf of [this.stage, this.scratch]) {
      if (!buf) continue;
      await a.free(buf.device[0]);
      await b.free(buf.device[1]);
    }
    if (this.host) {
      await a.hostFree(this.host.ptr[0]);
      await b.hostFree(this.host.ptr[1]);
    }
    if (this.ll) {
      for (const p of [this.ll.recv, this.ll.state]) {
        await a.free(p[0]);
        await b.free(p[1]);
      }
    }
    this.stage = this.scratch = this.host = this.ll = undefined;
  }

  /** Drain every rank, then free everything the link owns. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.dropStallNote();
    await this.rt.drain();
    await this.releaseBuffers();
    await Promise.all(
      this.ranks.map(async (r, i) => {
        await r.free(this.signal[i]!);
        await r.free(this.err[i]!);
        await r.destroyEvent(this.ready[i]!);
        await r.destroyEvent(this.pushed[i]!);
      }),
    );
  }
}
