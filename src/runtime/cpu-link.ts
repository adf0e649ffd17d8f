/**
 * The CPU reference's TP link kernels: the one-shot all-reduce's device barrier and the LL
 * exchange, emulated with Atomics between the two ranks' workers over the shared "device memory"
 * of cpu-world.ts. Their flags, epochs and slots sit where the GPU kernels keep them, a wait
 * outlives the same spin bound (SM ticks at an H200's clock), and a refused wait stores the same
 * refusal words (link-constants.ts). Synchronisation words are atomics, not race-tracked; the
 * data each rank reads and writes goes through its device's ordering checks (cpu-device.ts).
 */
import type { CpuWorldInit, CpuWorldLayout } from './cpu-world.js';
import { TICKS_PER_MS } from './cpu-world.js';
import {
  AR_MAX_BLOCKS,
  LL_DEPTH,
  LL_MAX_CHUNKS,
  LL_MAX_VALUES,
  LL_STATE_BYTES,
  REFUSED_ENTRY,
  REFUSED_EXIT,
} from './link-constants.js';

const WRITE = 0;
const READ = 1;

const hex = (p: number): string => `0x${p.toString(16)}`;

/** The CPU one-shot's signal block: i32 words [start flag, end flag, own epoch]. */
const SIG_START = 0;
const SIG_END = 1;
const SIG_EPOCH = 2;
const SIG_WORDS = 4;
export const SIG_BYTES = 256;
/**
 * Where the LL state's words sit. The GPU keeps an epoch and an ack per chunk of a join; this
 * reference moves a whole join at once, so one epoch (word 0) and one ack (word LL_ACK, the first
 * of the half the peer writes) stand for them.
 */
const LL_ACK = LL_MAX_CHUNKS;

/** What the link's kernels need of the device they run on (CpuDevice gives it). */
export interface LinkDevice {
  readonly world: CpuWorldInit;
  readonly layout: CpuWorldLayout;
  readonly i32: Int32Array;
  readonly f64: Float64Array;
  readonly f32: readonly Float32Array[];
  /** Whose stream clock this thread keeps. */
  readonly lane: number;
  /** The bound device. */
  device(): number;
  /** Bound in loopback: the peer's blocks may be on this device. */
  loopback(): boolean;
  /** Whether a kernel here may reach device d's memory. */
  peerEnabled(d: number): boolean;
  stream(call: string, s: number): void;
  tick(): number;
  resolve(call: string, ptr: number, bytes: number): [number, number, number];
  access(call: string, ptr: number, bytes: number, kind: number, epoch: number, kernel: boolean): [number, number];
  storeNs(call: string, ptr: number, ep: number): void;
}

export class CpuLink {
  /** This thread's LL link, as `llConfigure` set it. */
  private llLink:
    | {
        selfRecv: number;
        peerRecv: number;
        cap: number;
        selfState: number;
        peerState: number;
        rank: number;
        err: number;
        spinLimit: number;
      }
    | undefined;

  constructor(private readonly m: LinkDevice) {}

  /**
   * The one-shot all-reduce with its barrier emulated on Atomics: the flags live in the signal
   * blocks in device memory, exactly where the GPU kernel keeps them, and a wait longer than the
   * spin bound (SM ticks, at an H200's clock) writes the same refusal words. Passing a barrier
   * also orders this stream after the peer's arrival, as the GPU's acquire does.
   */
  launchOneShot(
    x: number,
    in0: number,
    in1: number,
    out: number,
    selfSignal: number,
    peerSignal: number,
    rank: number,
    n: number,
    err: number,
    spinLimit: number,
    blocks: number,
    stream: number,
  ): void {
    this.m.stream('launchOneShot', stream);
    if (rank !== 0 && rank !== 1) throw new TypeError(`launchOneShot: argument 'rank' must be 0 or 1, got ${rank}`);
    if (!Number.isInteger(blocks) || blocks < 1 || blocks > AR_MAX_BLOCKS)
      throw new TypeError(
        `launchOneShot: argument 'blocks' must be an integer in [1, ${AR_MAX_BLOCKS}], got ${blocks}`,
      );
    const ep = this.m.tick();
    // Flags are synchronisation words (atomics), not data: resolved, not race-tracked.
    const [selfDev, selfOff] = this.m.resolve('launchOneShot(selfSignal)', selfSignal, SIG_BYTES);
    const [peerDev, peerOff] = this.m.resolve('launchOneShot(peerSignal)', peerSignal, SIG_BYTES);
    if (!this.m.peerEnabled(peerDev)) {
      throw new Error(
        `launchOneShot on device ${this.m.device()} stores into device ${peerDev}'s signal block, but peer access ${this.m.device()}->${peerDev} is not enabled`,
      );
    }
    const [errDev, errOff] = this.m.resolve('launchOneShot(err)', err, 4);
    // In loopback the peer's signal block is on this device too.
    if (selfDev !== this.m.device() || (peerDev === this.m.device() && !this.m.loopback()))
      throw new Error(
        `launchOneShot on device ${this.m.device()}: selfSignal must be this device's and peerSignal the peer's`,
      );
    const peerLane = 1 - this.m.lane;
    const mine = new Int32Array(this.m.world.arenas[selfDev]!, selfOff, SIG_WORDS);
    const theirs = new Int32Array(this.m.world.arenas[peerDev]!, peerOff, SIG_WORDS);
    const errWord = new Int32Array(this.m.world.arenas[errDev]!, errOff, 1);
    if (x !== 0) {
      // Fused staging, before the entry barrier, as the GPU kernel does it.
      const [xd, xo] = this.m.access('launchOneShot(x)', x, n * 4, READ, ep - 0.5, true);
      const stagePtr = rank === 0 ? in0 : in1;
      const [sd, so] = this.m.access('launchOneShot(stage)', stagePtr, n * 4, WRITE, ep - 0.5, true);
      this.m.f32[sd]!.set(this.m.f32[xd]!.subarray(xo / 4, xo / 4 + n), so / 4);
    }
    const e = mine[SIG_EPOCH]! + 1;
    const deadline = performance.now() + spinLimit / TICKS_PER_MS;
    const meet = (flag: number, kind: number, refusal: number): boolean => {
      // Entry publishes "everything before this kernel" (ep - 0.5: not the kernel's own reads,
      // which come after it); exit publishes the reads too, so the peer may then overwrite them.
      this.m.f64[this.m.layout.barrier + this.m.lane * 2 + kind] = kind === 0 ? ep - 0.5 : ep;
      Atomics.store(theirs, flag, e); // release: the peer sees our arrival epoch with it
      Atomics.notify(theirs, flag);
      for (;;) {
        const seen = Atomics.load(mine, flag);
        if (seen >= e) break;
        const left = deadline - performance.now();
        if (left <= 0) {
          Atomics.compareExchange(errWord, 0, 0, refusal);
          return false;
        }
        Atomics.wait(mine, flag, seen, left);
      }
      const row = this.m.layout.knows + this.m.lane * this.m.world.lanes + peerLane;
      this.m.f64[row] = Math.max(this.m.f64[row]!, this.m.f64[this.m.layout.barrier + peerLane * 2 + kind]!);
      return true;
    };
    if (!meet(SIG_START, 0, REFUSED_ENTRY)) return;
    const [d0, o0] = this.m.access('launchOneShot(in0)', in0, n * 4, READ, ep, true);
    const [d1, o1] = this.m.access('launchOneShot(in1)', in1, n * 4, READ, ep, true);
    const [dOut, oOut] = this.m.access('launchOneShot(out)', out, n * 4, WRITE, ep, true);
    const a = this.m.f32[d0]!,
      b = this.m.f32[d1]!,
      o = this.m.f32[dOut]!;
    for (let i = 0; i < n; i++) o[oOut / 4 + i] = a[o0 / 4 + i]! + b[o1 / 4 + i]!; // rank order: in0 + in1
    // After an exit refusal the epoch still advances, as on the GPU: the peer passed this round's
    // entry and finishes it, so advancing keeps the ranks' epochs in step.
    meet(SIG_END, 1, REFUSED_EXIT);
    mine[SIG_EPOCH] = e;
  }

  /**
   * The low-latency join, as cu/tp_ll.cu does it: values cross as {value, epoch} word pairs into
   * the peer's receive slots (one slot set per epoch, LL_DEPTH sets in rotation), the receiver
   * waits on its own memory, and a sender first waits for the peer's ack of the epoch that last
   * used the set. The slots and
   * state words are synchronisation memory (atomics), not race-tracked; the data each rank reads
   * and writes is its own and is.
   */
  llConfigure(
    selfRecv: number,
    peerRecv: number,
    cap: number,
    selfState: number,
    peerState: number,
    rank: number,
    err: number,
    spinLimit: number,
    serveIdleMicros: number,
  ): void {
    if (cap % 2 !== 0 || cap > 0xffffffff)
      throw new TypeError(
        `llConfigure: argument 'cap' (${cap}) must be even (slots travel in 16-byte pairs) and fit 32 bits`,
      );
    if (!Number.isSafeInteger(serveIdleMicros) || serveIdleMicros < 0)
      throw new TypeError(
        `llConfigure: argument 'serveIdleMicros' must be a non-negative integer, got ${serveIdleMicros}`,
      );
    this.llLink = { selfRecv, peerRecv, cap, selfState, peerState, rank, err, spinLimit };
  }

  launchLl(
    reduce: number,
    rows: number,
    rowLen: number,
    sendSrc: number,
    localSrc: number,
    localDst: number,
    recvDst: number,
    dstStride: number,
    stamp: number,
    stream: number,
  ): void {
    this.m.stream('launchLl', stream);
    if (stamp !== 0 && stamp % 8 !== 0)
      throw new TypeError(`launchLl: argument 'stamp' (${hex(stamp)}) must be 8-byte aligned (two u64), or 0`);
    if (!this.llLink)
      throw new Error('launchLl: no LL link on this thread: call llConfigure first (open the ll transport)');
    const { selfRecv, peerRecv, cap, selfState, peerState, rank, err, spinLimit } = this.llLink;
    const total = rows * rowLen;
    if (total > LL_MAX_VALUES)
      throw new TypeError(
        `launchLl: rows x rowLen (${rows} x ${rowLen}) exceed the ${LL_MAX_VALUES} values one LL join may move; split the join or use another transport`,
      );
    if ((sendSrc !== 0 || recvDst !== 0) && total > cap)
      throw new TypeError(
        `launchLl: ${total} elements exceed the receive buffer's ${cap} slots per epoch; reserve a larger link`,
      );
    const ep = this.m.tick();
    if (stamp !== 0) this.m.storeNs('launchLl(stamp)', stamp, ep);
    const words = (ptr: number, n: number, call: string): Int32Array => {
      const [d, off] = this.m.resolve(call, ptr, n * 4);
      if (!this.m.peerEnabled(d)) {
        throw new Error(
          `${call} on device ${this.m.device()} stores into device ${d}'s memory, but peer access ${this.m.device()}->${d} is not enabled`,
        );
      }
      return new Int32Array(this.m.world.arenas[d]!, off, n);
    };
    const state = words(selfState, LL_STATE_BYTES / 4, 'launchLl(selfState)');
    const peer = words(peerState, LL_STATE_BYTES / 4, 'launchLl(peerState)');
    const errWord = words(err, 1, 'launchLl(err)');
    const e = (state[0]! + 1) | 0;
    const par = (e & (LL_DEPTH - 1)) * cap;
    const deadline = performance.now() + spinLimit / TICKS_PER_MS;
    const waitFor = (w: Int32Array, at: number, done: (v: number) => boolean): boolean => {
      for (;;) {
        const v = Atomics.load(w, at);
        if (done(v)) return true;
        const left = deadline - performance.now();
        if (left <= 0) return false;
        Atomics.wait(w, at, v, left);
      }
    };
    const rowsCopy = (from: Float32Array, fromOff: number, to: Float32Array, toOff: number): void => {
      for (let r = 0; r < rows; r++)
        to.set(from.subarray(fromOff + r * rowLen, fromOff + (r + 1) * rowLen), toOff + r * dstStride);
    };
    const reach = ((rows - 1) * dstStride + rowLen) * 4;
    if (localSrc !== 0) {
      const [sd, so] = this.m.access('launchLl(localSrc)', localSrc, total * 4, READ, ep, true);
      const [dd, dOff] = this.m.access('launchLl(localDst)', localDst, reach, WRITE, ep, true);
      rowsCopy(this.m.f32[sd]!, so / 4, this.m.f32[dd]!, dOff / 4);
    }
    let mine: Float32Array | undefined;
    let mineOff = 0;
    if (sendSrc !== 0) {
      if (!waitFor(state, LL_ACK, (v) => ((v - (e - LL_DEPTH)) | 0) >= 0)) {
        Atomics.compareExchange(errWord, 0, 0, REFUSED_EXIT);
        return;
      }
      const [sd, so] = this.m.access('launchLl(sendSrc)', sendSrc, total * 4, READ, ep, true);
      mine = this.m.f32[sd]!;
      mineOff = so / 4;
      const slots = words(peerRecv, 2 * LL_DEPTH * cap, 'launchLl(peerRecv)');
      const values = new Float32Array(slots.buffer, slots.byteOffset, slots.length);
      for (let i = 0; i < total; i++) {
        values[2 * (par + i)] = mine[mineOff + i]!;
        Atomics.store(slots, 2 * (par + i) + 1, e); // after its value: the pair is published together
      }
      Atomics.notify(slots, 2 * (par + total - 1) + 1);
    }
    if (recvDst !== 0) {
      const slots = words(selfRecv, 2 * LL_DEPTH * cap, 'launchLl(selfRecv)');
      const values = new Float32Array(slots.buffer, slots.byteOffset, slots.length);
      // The sender publishes in order, so the last flag arriving means they all have.
      if (!waitFor(slots, 2 * (par + total - 1) + 1, (v) => v === e)) {
        Atomics.compareExchange(errWord, 0, 0, REFUSED_ENTRY);
        return;
      }
      const [dd, dOff] = this.m.access('launchLl(recvDst)', recvDst, reduce ? total * 4 : reach, WRITE, ep, true);
      const out = this.m.f32[dd]!,
        base = dOff / 4;
      for (let i = 0; i < total; i++) {
        if (Atomics.load(slots, 2 * (par + i) + 1) !== e)
          throw new Error(`launchLl: slot ${i} holds epoch ${slots[2 * (par + i) + 1]}, expected ${e}`);
        const theirs = values[2 * (par + i)]!;
        if (reduce) {
          const own = mine![mineOff + i]!;
          out[base + i] = rank === 0 ? own + theirs : theirs + own;
        } else {
          const r = Math.floor(i / rowLen);
          out[base + r * dstStride + (i - r * rowLen)] = theirs;
        }
      }
    }
    state[0] = e;
    Atomics.store(peer, LL_ACK, e);
    Atomics.notify(peer, LL_ACK);
    if (stamp !== 0) this.m.storeNs('launchLl(stamp)', stamp + 8, ep);
  }
}
