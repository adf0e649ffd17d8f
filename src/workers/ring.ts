/**
 * Single-producer single-consumer command ring over a SharedArrayBuffer (layout in
 * ring-layout.ts). The producer is the main thread's decode walk, the consumer a pinned device
 * worker; `RingProducer` and `RingConsumer` are the two ends and each is used by one thread only.
 *
 * Publication order is the whole protocol: a record's words are written with plain stores, then
 * `head` is advanced with `Atomics.store`. JS atomics are sequentially consistent, so a consumer
 * that reads the new `head` with `Atomics.load` also sees the record's words. The same holds in
 * the other direction for `tail`, which frees a slot for reuse only after its record was read.
 *
 * Sleeping uses the Dekker pattern on two sequentially consistent locations: the consumer sets
 * `consumerSleeping` and then reads `doorbell` and `head`; the producer stores `head` and then reads
 * `consumerSleeping`, and if it is set rings the bell (bumps `doorbell`, then notifies). At least
 * one of them sees the other's store, and the consumer waits on `doorbell` only while it still
 * holds the value it read, so a wake-up is never lost, and the producer pays for the bell only
 * when somebody actually sleeps.
 *
 * A control call (a message on the worker's port, answered only when its event loop turns) rings
 * the same bell after posting, every time: a consumer asleep wakes at once, and one about to sleep
 * sees the bell changed since it last turned its loop and turns it instead. Without it each call
 * waited out a sleep slice (2 ms), and opening and closing a session makes over a hundred.
 */
import {
  FAULT_TEXT_MAX,
  FAULT_TEXT_OFFSET,
  FLAG_AFTER_PEER,
  HEADER_BYTES,
  LAYOUT_VERSION,
  RECORD_BYTES,
  RECORD_F64,
  RECORD_I32,
  RING_MAGIC,
  R_AFTER_PEER,
  R_ARG0_F64,
  R_FLAGS,
  R_OP,
  R_SEQ,
  RingState,
  W_CAPACITY,
  W_CONSUMER_SLEEPING,
  W_DOORBELL,
  W_FAULT_OP,
  W_FAULT_SEQ,
  W_FAULT_TEXT_BYTES,
  W_HEAD,
  W_MAGIC,
  W_RECORD_BYTES,
  W_STATE,
  W_TAIL,
  W_TAIL_WAITERS,
  W_VERSION,
  isPowerOfTwo,
  ringBytes,
  seqDiff,
} from './ring-layout.js';
import { MemraError, type RingErrorCode } from '../api/errors.js';

/** A ring that cannot take or give a record: stopped, faulted, stalled, corrupt or misused. */
export class RingError extends MemraError<RingErrorCode> {}

/** Views over one ring's buffer, shared by both ends. */
export class RingView {
  readonly i32: Int32Array;
  readonly rec32: Int32Array;
  readonly rec64: Float64Array;
  readonly capacity: number;
  readonly mask: number;

  constructor(
    readonly sab: SharedArrayBuffer,
    readonly name = 'ring',
  ) {
    this.i32 = new Int32Array(sab, 0, HEADER_BYTES / 4);
    if (this.i32[W_MAGIC] !== RING_MAGIC || this.i32[W_VERSION] !== LAYOUT_VERSION) {
      throw new RingError(`${name}: buffer is not a memra command ring (bad magic or version)`, 'ERR_RING_LAYOUT');
    }
    this.capacity = this.i32[W_CAPACITY]!;
    this.mask = this.capacity - 1;
    if (this.i32[W_RECORD_BYTES] !== RECORD_BYTES || sab.byteLength < ringBytes(this.capacity)) {
      throw new RingError(`${name}: record size or buffer length does not match the layout`, 'ERR_RING_LAYOUT');
    }
    this.rec32 = new Int32Array(sab, HEADER_BYTES, this.capacity * RECORD_I32);
    this.rec64 = new Float64Array(sab, HEADER_BYTES, this.capacity * RECORD_F64);
  }

  /**
   * A new ring. `initialSeq` lets tests start the counters just below 2^32 to exercise their
   * wrap-around; real rings start at 0.
   */
  static create(capacity: number, name = 'ring', initialSeq = 0): RingView {
    if (!isPowerOfTwo(capacity) || capacity < 2 || capacity > 1 << 20) {
      throw new RangeError(`${name}: capacity must be a power of two in [2, 2^20], got ${capacity}`);
    }
    const sab = new SharedArrayBuffer(ringBytes(capacity));
    const i32 = new Int32Array(sab, 0, HEADER_BYTES / 4);
    i32[W_MAGIC] = RING_MAGIC;
    i32[W_VERSION] = LAYOUT_VERSION;
    i32[W_CAPACITY] = capacity;
    i32[W_RECORD_BYTES] = RECORD_BYTES;
    i32[W_HEAD] = initialSeq | 0;
    i32[W_TAIL] = initialSeq | 0;
    return new RingView(sab, name);
  }

  /** Seq of the newest published record. */
  head(): number {
    return Atomics.load(this.i32, W_HEAD);
  }
  /** Seq of the newest record the consumer has enqueued on its device ("enqueued up to N"). */
  tail(): number {
    return Atomics.load(this.i32, W_TAIL);
  }
  state(): RingState {
    return Atomics.load(this.i32, W_STATE) as RingState;
  }
  /** The refused record; read after `state()` says Faulted, whose atomic store publishes these. */
  fault(): { seq: number; op: number; reason: string } {
    const n = Math.min(FAULT_TEXT_MAX, Atomics.load(this.i32, W_FAULT_TEXT_BYTES));
    // TextDecoder refuses views of shared memory: copy the bytes out first.
    const reason = new TextDecoder().decode(new Uint8Array(this.i32.buffer, FAULT_TEXT_OFFSET, n).slice());
    return { seq: Atomics.load(this.i32, W_FAULT_SEQ) >>> 0, op: Atomics.load(this.i32, W_FAULT_OP), reason };
  }
  /** True once the consumer has enqueued record `seq`. */
  reached(seq: number): boolean {
    return seqDiff(this.tail(), seq) >= 0;
  }

  /** Wake the consumer if it sleeps, or keep it from sleeping through a control call just posted. */
  ringDoorbell(): void {
    Atomics.add(this.i32, W_DOORBELL, 1);
    if (Atomics.load(this.i32, W_CONSUMER_SLEEPING) !== 0) Atomics.notify(this.i32, W_DOORBELL, 1);
  }

  /**
   * Sleep on `tail` until it changes from `seen` or `ms` pass. Registers in `tailWaiters` so the
   * consumer knows to notify; used by the producer when the ring is full and by the peer worker
   * in a handshake.
   */
  sleepOnTail(seen: number, ms: number): void {
    Atomics.add(this.i32, W_TAIL_WAITERS, 1);
    try {
      if (Atomics.load(this.i32, W_TAIL) === seen) Atomics.wait(this.i32, W_TAIL, seen, ms);
    } finally {
      Atomics.sub(this.i32, W_TAIL_WAITERS, 1);
    }
  }
}

export interface BoundedWait {
  /** Spin this long before sleeping: a sleeping wake costs ~12 us, more than a join. */
  spinMicros: number;
  /** Give up after this long with a named error instead of hanging. */
  timeoutMs: number;
}

const now = (): number => performance.now();

/**
 * What a user of the ring keeps beside its records, in a board of its own indexed by slot (the
 * join profiler's marks, decode/ring-marks.ts). While one is attached, `begin` has it write what
 * waits for the next record once that record's slot is free (the consumer is done with the
 * slot's old entry), and sets the flag bits it returns in the record, where the consumer reads
 * them (`RecordRef.flags`). The publish that follows orders the entry before the record.
 */
export interface RingAnnex {
  /** Whether anything waits for the next record; read by every `begin`, so a field, not work. */
  readonly pending: boolean;
  /** Write what waits into `slot`'s entry; returns the record's flag bits (bit 0 is the ring's). */
  take(slot: number): number;
}

/** The main thread's end. */
export class RingProducer {
  private readonly i32: Int32Array;
  private readonly rec32: Int32Array;
  private readonly rec64: Float64Array;
  private readonly mask: number;
  private readonly capacity: number;
  /** Our own copy of `head`: only this end writes it. */
  private next: number;
  /** Last `tail` we read; refreshed only when the ring looks full (saves a shared-line read). */
  private tailSeen: number;
  private open = -1;
  private annex: RingAnnex | undefined;

  constructor(
    readonly view: RingView,
    private readonly wait: BoundedWait,
  ) {
    this.i32 = view.i32;
    this.rec32 = view.rec32;
    this.rec64 = view.rec64;
    this.mask = view.mask;
    this.capacity = view.capacity;
    this.next = view.head();
    this.tailSeen = view.tail();
  }

  /** Seq the next published record will get. */
  nextSeq(): number {
    return (this.next + 1) | 0;
  }

  /** Seq of the newest published record. */
  lastSeq(): number {
    return this.next;
  }

  /** The annex later records carry entries of (one at a time), or undefined for none. */
  attach(annex: RingAnnex | undefined): void {
    this.annex = annex;
  }

  /**
   * Start a record: waits (bounded) while the ring is full, then returns the record's f64 index
   * of its first argument. Write arguments into `args()` at that index, then `publish()`.
   */
  begin(op: number, afterPeer?: number): number {
    if (this.open >= 0) throw new RingError(`${this.view.name}: begin() twice without publish()`, 'ERR_RING_MISUSE');
    this.checkConsumer();
    if (seqDiff(this.next, this.tailSeen) >= this.capacity) this.waitForSpace();
    const seq = (this.next + 1) | 0;
    const slot = seq & this.mask;
    const w = slot * RECORD_I32;
    this.rec32[w + R_OP] = op;
    this.rec32[w + R_SEQ] = seq;
    this.rec32[w + R_AFTER_PEER] = afterPeer ?? 0;
    let flags = afterPeer === undefined ? 0 : FLAG_AFTER_PEER;
    const annex = this.annex;
    if (annex?.pending) flags |= annex.take(slot);
    this.rec32[w + R_FLAGS] = flags;
    this.open = slot;
    return slot * RECORD_F64 + R_ARG0_F64;
  }

  /** The record arguments, as f64 words; index with what `begin` returned. */
  get args(): Float64Array {
    return this.rec64;
  }

  /** Publish the record begun last; returns its seq. */
  publish(): number {
    if (this.open < 0) throw new RingError(`${this.view.name}: publish() without begin()`, 'ERR_RING_MISUSE');
    this.open = -1;
    this.next = (this.next + 1) | 0;
    Atomics.store(this.i32, W_HEAD, this.next);
    if (Atomics.load(this.i32, W_CONSUMER_SLEEPING) !== 0) this.view.ringDoorbell();
    return this.next;
  }

  /** Convenience for cold paths and tests: one record with up to 14 arguments. */
  push(op: number, args: ArrayLike<number> = [], afterPeer?: number): number {
    const a = this.begin(op, afterPeer);
    for (let i = 0; i < args.length; i++) this.rec64[a + i] = args[i]!;
    return this.publish();
  }

  /**
   * True if a record can be begun without waiting. May be stale pessimistic, never optimistic:
   * `tail` only grows, so a slot seen free stays free, while one seen taken may have been freed
   * since the read (begin() then waits, bounded, and reads again).
   */
  hasSpace(): boolean {
    if (seqDiff(this.next, this.tailSeen) < this.capacity) return true;
    this.tailSeen = this.view.tail();
    return seqDiff(this.next, this.tailSeen) < this.capacity;
  }

  /** Backpressure, never loss: spin, then sleep on `tail`, until a slot frees or time runs out. */
  private waitForSpace(): void {
    const start = now();
    const spinEnd = start + this.wait.spinMicros / 1000;
    const deadline = start + this.wait.timeoutMs;
    for (;;) {
      this.tailSeen = this.view.tail();
      if (seqDiff(this.next, this.tailSeen) < this.capacity) return;
      this.checkConsumer();
      const t = now();
      if (t > deadline) {
        throw new RingError(
          `${this.view.name}: full for ${this.wait.timeoutMs} ms (${this.capacity} records pending); ` +
            'the worker is not consuming: it may be stuck in a handshake or a blocking call',
          'ERR_RING_STALLED',
        );
      }
      if (t > spinEnd) this.view.sleepOnTail(this.tailSeen, Math.min(5, deadline - t));
    }
  }

  private checkConsumer(): void {
    const s = this.view.state();
    if (s === RingState.Running) return;
    if (s === RingState.Faulted) {
      const f = this.view.fault();
      throw new RingError(
        `${this.view.name}: the worker refused record ${f.seq} (op ${f.op})` +
          (f.reason ? `: ${f.reason}` : '') +
          '. Nothing after it runs; the runtime must be closed.',
        'ERR_RING_FAULTED',
      );
    }
    throw new RingError(`${this.view.name}: the worker has stopped; the runtime is closed`, 'ERR_RING_STOPPED');
  }
}

/** A record as the consumer sees it: valid until `advance()`. */
export interface RecordRef {
  op: number;
  seq: number;
  /** Peer seq to wait for, or undefined. */
  afterPeer: number | undefined;
  /** f64 index of argument 0 in `consumer.args`. */
  arg: number;
  /** The record's ring slot, and its flag bits: above bit 0, what an annex set (RingAnnex). */
  slot: number;
  flags: number;
}

/** The device worker's end. */
export class RingConsumer {
  private readonly i32: Int32Array;
  private readonly rec32: Int32Array;
  readonly args: Float64Array;
  private readonly mask: number;
  /** Our own copy of `tail`. */
  private done: number;
  private headSeen: number;
  /** The doorbell when this end last said to turn the event loop. */
  private bellSeen: number;
  private readonly ref: RecordRef = { op: 0, seq: 0, afterPeer: undefined, arg: 0, slot: 0, flags: 0 };

  constructor(readonly view: RingView) {
    this.i32 = view.i32;
    this.rec32 = view.rec32;
    this.args = view.rec64;
    this.mask = view.mask;
    this.done = view.tail();
    this.headSeen = view.head();
    this.bellSeen = Atomics.load(view.i32, W_DOORBELL);
  }

  /**
   * Records published and not yet advanced past. May be stale low, never high: it re-reads `head`
   * only once the records it last saw are consumed, and the producer may have published more
   * since. A caller that sees 0 must wait (spinForWork, sleepForWork), not conclude the ring is
   * drained for good.
   */
  available(): number {
    if (this.headSeen === this.done) this.headSeen = this.view.head();
    return seqDiff(this.headSeen, this.done);
  }

  /** The oldest unconsumed record; call only when `available() > 0`. The object is reused. */
  peek(): RecordRef {
    const seq = (this.done + 1) | 0;
    const slot = seq & this.mask;
    const w = slot * RECORD_I32;
    const r = this.ref;
    r.op = this.rec32[w + R_OP]!;
    r.seq = this.rec32[w + R_SEQ]!;
    const flags = this.rec32[w + R_FLAGS]!;
    r.afterPeer = (flags & FLAG_AFTER_PEER) !== 0 ? this.rec32[w + R_AFTER_PEER]! : undefined;
    r.arg = slot * RECORD_F64 + R_ARG0_F64;
    r.slot = slot;
    r.flags = flags;
    if (r.seq !== seq) {
      throw new RingError(
        `${this.view.name}: record at slot ${slot} has seq ${r.seq >>> 0}, expected ${seq >>> 0} (torn or overwritten record)`,
        'ERR_RING_CORRUPT',
      );
    }
    return r;
  }

  /** Mark the oldest record enqueued: publishes "enqueued up to N" and frees its slot. */
  advance(): number {
    this.done = (this.done + 1) | 0;
    Atomics.store(this.i32, W_TAIL, this.done);
    if (Atomics.load(this.i32, W_TAIL_WAITERS) !== 0) Atomics.notify(this.i32, W_TAIL);
    return this.done;
  }

  /** Spin up to `micros` for a record; true if one arrived. */
  spinForWork(micros: number): boolean {
    const end = now() + micros / 1000;
    do {
      if (this.available() > 0) return true;
    } while (now() < end);
    return false;
  }

  /**
   * Sleep until a record is published, the doorbell rings or `ms` pass; true if work is
   * available. False says to turn the event loop: a control call may be waiting there (the bell
   * rang since the last false), or the time ran out. This blocks the thread, so callers keep `ms`
   * short and yield to their event loop between sleeps. (`Atomics.waitAsync` would not block, but
   * in Node 20 its wake-up can stall while the main thread is itself blocked in a wait, which is
   * exactly when a producer meets a full ring.)
   */
  sleepForWork(ms: number): boolean {
    Atomics.store(this.i32, W_CONSUMER_SLEEPING, 1);
    try {
      const bell = Atomics.load(this.i32, W_DOORBELL);
      if (bell === this.bellSeen && Atomics.load(this.i32, W_HEAD) === this.done)
        Atomics.wait(this.i32, W_DOORBELL, bell, ms);
      if (this.available() > 0) return true;
      // Every call posted before the bell read here is in the port's queue: the turn answers it.
      this.bellSeen = Atomics.load(this.i32, W_DOORBELL);
      return false;
    } finally {
      Atomics.store(this.i32, W_CONSUMER_SLEEPING, 0);
    }
  }

  /** Refuse the oldest record: nothing after it will run, and the producer's next push throws. */
  fault(seq: number, op: number, reason = ''): void {
    const text = new TextEncoder().encode(reason);
    let n = Math.min(text.length, FAULT_TEXT_MAX);
    while (n > 0 && n < text.length && (text[n]! & 0xc0) === 0x80) n--; // not inside a character
    new Uint8Array(this.i32.buffer, FAULT_TEXT_OFFSET, n).set(text.subarray(0, n));
    Atomics.store(this.i32, W_FAULT_TEXT_BYTES, n);
    Atomics.store(this.i32, W_FAULT_SEQ, seq);
    Atomics.store(this.i32, W_FAULT_OP, op);
    Atomics.store(this.i32, W_STATE, RingState.Faulted);
    Atomics.notify(this.i32, W_TAIL);
  }

  stop(): void {
    if (this.view.state() === RingState.Running) Atomics.store(this.i32, W_STATE, RingState.Stopped);
    Atomics.notify(this.i32, W_TAIL);
  }
}
