/**
 * Per-join profile of the decode walk (the config's `profile: true`): for every join its identity
 * (token, layer, hop, transport, bytes, receiving rank) and two costs.
 *
 * Device time: the join is bracketed by a timing-event pair on its RECEIVING rank's stream: the
 * start event passes when that stream reaches the join, the end event when the join's data has
 * landed there. So a sample is the join as its consumer experiences it, waiting for the producer
 * included. (Events on two devices cannot be subtracted, so the receiver's clock is the only one
 * that sees the whole join.) A step-start event on each rank places the join on that rank's
 * timeline (`deviceStartUs`).
 *
 * Host enqueue time: from the main thread's first ring write of the join until BOTH workers have
 * enqueued its last record, on the process-wide monotonic clock (runtime/host-clock.ts).
 *
 * None of this costs a ring record (workers/profile-board.ts): the start event is a mark on the
 * join's first record on the receiving ring, the end event a mark on that ring's next record
 * (the same point of the stream: after the join, before what follows it), and every record's
 * enqueue time is stamped by its worker into the board. The first version wrote four records a
 * join and read the events behind a stream drain: profiling cost 31% of bench's tokens/s
 * (decode-2xH200-2026-11-30).
 *
 * A join whose transport times itself (Transport.timeNext: `ll`, one kernel a rank) costs no
 * event either: its receiving kernel stores its own start and end (%globaltimer) into the step's
 * stamp block on that rank, a stamp kernel at the step's start places it on the rank's timeline,
 * and the block is copied into the rank's mailbox after the step. A timing event costs the stream
 * 3.5 us (scripts/probes/timing-probe.cu), 300 a bench step: 26% of its tokens/s. Other
 * transports are bracketed by a timing-event pair.
 *
 * Events are made once, in two sets that alternate by step, and reused, as is one stamp block per
 * rank (each step's copy lands in its set's region of the mailbox); a step's are read while the
 * next step runs, never on the walk.
 */
import { type DevicePtr, NO_PTR, ptrAdd } from '../runtime/binding.js';
import type { Runtime } from '../runtime/runtime.js';
import type { DeviceEvent, Rank } from '../runtime/rank.js';
import { hostClockBase, hostMicros } from '../runtime/host-clock.js';
import { HOPS, RECEIVER, type Hop, type JoinSample } from '../profile/profile-data.js';
import { ProfileBoard } from '../workers/profile-board.js';
import { seqDiff } from '../workers/ring-layout.js';
import { RingMarks } from './ring-marks.js';
import { RANKS, type Transport } from '../runtime/transports/transport.js';

export { HOPS, type Hop };

/** What the walk knows of a join (the step number is the caller's). */
export type JoinTiming = Omit<JoinSample, 'step'>;

/** A join as a step graph captured it: its identity and its events, replayed every launch. */
export type CapturedJoin = Readonly<
  Pick<Pending, 'hop' | 'layer' | 'at' | 'transport' | 'bytes' | 'start' | 'end' | 'selfTimed'>
>;

/** The completion counter rank 1 advances once its stamp block is in its mailbox. */
export const PROFILE_SLOT = 1;

/** Bytes of one step's stamp block: the step's start, then [start, end] per (layer, hop). */
export function stampBlockBytes(layers: number): number {
  return 8 * (1 + 2 * layers * HOPS.length);
}

/** Where the walk's mailboxes hold the stamp blocks (two, one per set), and how it copies into them. */
export interface StampMailbox {
  /** Mailbox offset of set 0's block; set 1's follows it. */
  offset: number;
  copy(rank: number, src: number, offset: number, bytes: number): void;
}

/**
 * What a profile may leave out, to measure the profiler (bench/profile-overhead.ts) or to check
 * self-timed joins against timing events (test/gpu/join-profile.test.ts). Both true for a real
 * profile.
 */
export interface ProfileSwitches {
  /**
   * False: joins keep their host times, their device times are NaN, and no timing event or
   * device stamp is taken or read. Read when a profiler is made, not after: a step's read and the
   * step graphs captured must agree with what was recorded (change it, then prepare with
   * profiling off and on).
   */
  deviceEvents: boolean;
  /**
   * False: every join is bracketed by timing events, `ll` too. Read at every join and every step
   * graph's key, so it may change between steps (the GPU test flips it without a re-prepare).
   */
  selfTimed: boolean;
}

export function profileSwitches(): ProfileSwitches {
  return { deviceEvents: true, selfTimed: true };
}

interface Pending {
  /** `at`: the join's index in the step, layer * HOPS.length + hop (its event pair, its stamps). */
  hop: Hop;
  layer: number;
  at: number;
  transport: string;
  bytes: number;
  token: number;
  start: DeviceEvent;
  end: DeviceEvent;
  t0: number;
  /** True when the join timed itself into the stamp block (slot = its index) instead of events. */
  selfTimed: boolean;
  /** Each ring's newest record once the join was written: the join's last on that ring. */
  last0: number;
  last1: number;
  /** The later of the two workers' stamps for those records, once read. */
  enqueuedAt: number;
}

/**
 * One step's worth of events. Two sets alternate, so a step's events are read
 * while the next step runs (on the other set) instead of after it, and reading them adds nothing
 * to the time between tokens.
 */
interface EventSet {
  /** Which of the two sets this is (its region of the mailbox's stamp blocks). */
  index: number;
  /** The event pair of join `layer * HOPS.length + hop index`. */
  pairs: Array<[DeviceEvent, DeviceEvent]>;
  stepStart: DeviceEvent[];
  /** The value rank 1's PROFILE_SLOT takes once this set's stamps are in its mailbox. */
  copied: number;
  /** The read of the step that last used this set; awaited before the set is reused. */
  reading: Promise<unknown>;
}

export class JoinProfiler {
  private readonly sets: EventSet[] = [];
  /** One board per rank, attached to that rank's ring. */
  private readonly boards: ProfileBoard[];
  /** The marks on each rank's ring, by rank, once create() has attached them. */
  private readonly marks: RingMarks[] = [];
  private readonly base = hostClockBase();
  private steps = 0;
  private set!: EventSet;
  /** This step's bracketed joins, in walk order. */
  private pending: Pending[] = [];
  /** The host clock when this step's profile began. */
  private stepT0 = 0;
  /** The join between beginJoin and endJoin. */
  private open: Pending | undefined;

  private readonly blockBytes: number;
  private copies = 0;
  /**
   * Per rank, the one stamp block every step writes (NO_PTR: none). One is enough: a step's copy into
   * the mailbox (its set's region) is ordered on the rank's stream before the next step's stamps,
   * so a step graph of self-timed joins holds nothing that changes with the event set.
   */
  private readonly stampBlocks: DevicePtr[] = [NO_PTR, NO_PTR];

  /** The switches' deviceEvents as this profiler was made (see ProfileSwitches). */
  private readonly deviceEvents: boolean;

  /** The profile times the joins between two ranks. */
  private readonly ranks: readonly [Rank, Rank];

  private constructor(
    private readonly rt: Runtime,
    layers: number,
    private readonly switches: ProfileSwitches,
    private readonly mailbox: StampMailbox | undefined,
  ) {
    this.ranks = rt.pair('the join profile');
    this.deviceEvents = switches.deviceEvents;
    this.boards = this.ranks.map((r) => ProfileBoard.create(r.ring.view.capacity));
    this.blockBytes = stampBlockBytes(layers);
  }

  /**
   * `switches` is kept, not copied: its selfTimed is read as the walk goes (see ProfileSwitches).
   * Without a mailbox no join times itself.
   */
  static async create(
    rt: Runtime,
    layers: number,
    opts: { switches?: ProfileSwitches; mailbox?: StampMailbox } = {},
  ): Promise<JoinProfiler> {
    const p = new JoinProfiler(rt, layers, opts.switches ?? profileSwitches(), opts.mailbox);
    try {
      for (let k = 0; k < 2; k++) {
        const set: EventSet = { index: k, pairs: [], stepStart: [], copied: 0, reading: Promise.resolve() };
        p.sets.push(set);
        for (let l = 0; l < layers; l++) {
          for (const hop of HOPS) {
            const r = p.ranks[RECEIVER[hop]];
            set.pairs.push([await r.createEvent(true), await r.createEvent(true)]);
          }
        }
        for (const r of p.ranks) set.stepStart.push(await r.createEvent(true));
      }
      if (p.mailbox) for (const r of p.ranks) p.stampBlocks[r.rank] = await r.alloc(p.blockBytes);
      for (const r of p.ranks) {
        await r.control.call('setProfileBoard', p.boards[r.rank]!.buffer, p.base);
        p.marks[r.rank] = new RingMarks(r.ring, p.boards[r.rank]!.marks);
      }
    } catch (e) {
      await p.close();
      throw e;
    }
    return p;
  }

  /** Begin a profiled step: take the set the step before last used (once its read is done). */
  async beginStep(): Promise<void> {
    this.set = this.sets[this.steps++ % 2]!;
    await this.set.reading.catch(() => undefined);
    this.pending = [];
    this.stepT0 = hostMicros(this.base);
    if (this.deviceEvents) {
      for (const r of this.ranks) {
        this.mark(r, this.set.stepStart[r.rank]!);
        if (this.canSelfTime) r.stampNow(this.stampBlocks[r.rank]!);
      }
    }
  }

  /**
   * Issue `join` between this hop's two events on its receiving rank: marks carried by the
   * receiving ring's next records, not records of their own.
   */
  around(
    hop: Hop,
    layer: number,
    transport: string,
    bytes: number,
    token: number,
    join: () => void,
    timer?: Pick<Transport, 'timeNext'>,
  ): void {
    this.beginJoin(hop, layer, transport, bytes, token, timer);
    join();
    this.endJoin();
  }

  /**
   * The join about to be issued (the caller issues it, then calls endJoin): its start mark, or
   * its transport told to time it. Split from `around` so the walk's per-join path needs no
   * closure; joins never nest, so one open join is all there is.
   */
  beginJoin(
    hop: Hop,
    layer: number,
    transport: string,
    bytes: number,
    token: number,
    timer?: Pick<Transport, 'timeNext'>,
  ): void {
    const at = layer * HOPS.length + HOPS.indexOf(hop);
    const [start, end] = this.set.pairs[at]!;
    const r = this.ranks[RECEIVER[hop]];
    const selfTimed = this.timesItself(timer);
    // In replayed()'s field order, so every Pending shares one map (see there).
    this.open = {
      hop,
      layer,
      at,
      transport,
      bytes,
      token,
      start,
      end,
      t0: hostMicros(this.base),
      selfTimed,
      last0: 0,
      last1: 0,
      enqueuedAt: 0,
    };
    if (selfTimed) timer!.timeNext!(r.rank, ptrAdd(this.stampBlocks[r.rank]!, 8 * (1 + 2 * at)));
    else if (this.deviceEvents) this.mark(r, start);
  }

  /** The open join has been issued: its end mark, and each ring's newest record is its last. */
  endJoin(): void {
    const j = this.open;
    if (!j) throw new Error('join profile: endJoin() without beginJoin()');
    this.open = undefined;
    if (this.deviceEvents && !j.selfTimed) this.mark(this.ranks[RECEIVER[j.hop]], j.end);
    j.last0 = this.ranks[0].ring.lastSeq();
    j.last1 = this.ranks[1].ring.lastSeq();
    this.pending.push(j);
  }

  /**
   * After the step's last join, before its read-back: each rank's stamp block into its mailbox,
   * and rank 1 says when (rank 0's copy is ordered before the step's own completion).
   */
  copyStamps(): void {
    if (!this.canSelfTime) return;
    const at = this.mailbox!.offset + this.setIndex * this.blockBytes;
    for (const r of this.ranks) this.mailbox!.copy(r.rank, this.stampBlocks[r.rank]!, at, this.blockBytes);
    this.set.copied = ++this.copies;
    this.ranks[1].signal(PROFILE_SLOT, this.set.copied);
  }

  /** Which of the two event sets this step uses. */
  get setIndex(): number {
    return this.set.index;
  }

  /**
   * Whether a step graph whose joins go through `transports` must be captured once per event set:
   * only when some join is bracketed by events, which become the graph's nodes. Self-timed joins
   * and host times put nothing set-specific into the graph, so one graph serves every step. (This
   * was first taken for the profiled step graph's 11%; that was the object spread in replayed(), run8.)
   */
  graphPerSet(transports: ReadonlyArray<Pick<Transport, 'timeNext'> | undefined>): boolean {
    return this.deviceEvents && !transports.every((tr) => this.timesItself(tr));
  }

  /**
   * The one rule for whether a join through `timer` times itself into the stamp block instead of
   * being bracketed by events: beginJoin() and graphPerSet() must agree, or a graph captured once
   * for every step would hold one event set's events.
   */
  private timesItself(timer: Pick<Transport, 'timeNext'> | undefined): boolean {
    return this.switches.selfTimed && this.canSelfTime && timer?.timeNext !== undefined;
  }

  /** Whether any join could time itself: device times wanted, and a mailbox to read them from. */
  private get canSelfTime(): boolean {
    return this.deviceEvents && this.mailbox !== undefined;
  }

  /** How many joins this step has bracketed so far. */
  get bracketed(): number {
    return this.pending.length;
  }

  /**
   * The joins bracketed since `from`, taken out of this step: a capture enqueued them into a
   * graph, not onto the streams, so they are this step's only once the graph is launched.
   */
  takeCaptured(from: number): CapturedJoin[] {
    return this.pending.splice(from).map(({ hop, layer, at, transport, bytes, start, end, selfTimed }) => ({
      hop,
      layer,
      at,
      transport,
      bytes,
      start,
      end,
      selfTimed,
    }));
  }

  /**
   * A step graph holding `joins` was just launched (its launch began at host time `t0`): they are
   * this step's joins. Their events are the graph's nodes; their host enqueue is the launch's,
   * one ring record per rank for the whole step.
   */
  replayed(joins: readonly CapturedJoin[], t0: number, token: number): void {
    const last0 = this.ranks[0].ring.lastSeq(),
      last1 = this.ranks[1].ring.lastSeq();
    // Field by field, in beginJoin()'s order, not `{ ...j, token, ... }`: V8 gives a spread object
    // with properties added after it a dictionary map, which made this loop and read()'s accesses
    // cost ~5 us a join, 0.75 ms of a bench step (decode-2xH200-2026-11-30-run8: the profiled step
    // graph's 7%, all of it in the host's enqueue and read).
    for (const j of joins) {
      this.pending.push({
        hop: j.hop,
        layer: j.layer,
        at: j.at,
        transport: j.transport,
        bytes: j.bytes,
        token,
        start: j.start,
        end: j.end,
        t0,
        selfTimed: j.selfTimed,
        last0,
        last1,
        enqueuedAt: 0,
      });
    }
  }

  /** The host clock the profile counts in (µs since this profiler's base). */
  now(): number {
    return hostMicros(this.base);
  }

  /**
   * End the step's enqueue: a mark still waiting for a record (the receiving ring's last join of
   * the step) gets a no-op record to ride on, so every event of the step is on its stream.
   */
  flush(): void {
    for (const r of this.ranks) if (this.marks[r.rank]?.pending) r.nop();
  }

  private mark(r: Rank, ev: DeviceEvent): void {
    // Two marks already wait when a join wrote nothing on its receiving ring: record this one.
    if (!this.marks[r.rank]!.mark(ev.handle)) {
      r.record(ev);
      return;
    }
    ev.records++;
  }

  /**
   * The step's joins with their costs. Call once the step's tokens are back; the promise settles
   * after the events are read, which overlaps the next step (await it whenever convenient).
   */
  endStep(): Promise<JoinTiming[]> {
    const read = this.read(this.set, this.pending, this.stepT0);
    // Handled here too, so a caller that never awaits a step's joins cannot crash the process
    // with an unhandled rejection; one that does await still sees the error.
    read.catch(() => undefined);
    this.set.reading = read;
    this.pending = [];
    return read;
  }

  private async read(set: EventSet, done: Pending[], stepT0: number): Promise<JoinTiming[]> {
    if (done.length === 0) return [];
    // All of it in a later turn of the event loop: the caller's next step() reaches its launch
    // through microtasks only, so this work overlaps that step on the device instead of running
    // between the two, with the GPU idle (from the step graph it added ~50 us to each step's
    // enqueue, decode-2xH200-2026-11-30-run9). Stamps stay valid for a ring's capacity of records.
    await new Promise((res) => setImmediate(res));
    // The step's completion is rank 0's; the peer's worker may enqueue its last join a moment
    // later. Its stamps must be read before its ring wraps onto their slots.
    const last = done[done.length - 1]!;
    await this.rt.waitEnqueued(
      [last.last0, last.last1],
      10_000,
      "join profile: a worker did not enqueue the step's last join within 10 s",
    );
    const stampOf = (rank: 0 | 1, seq: number): number => {
      const ring = this.ranks[rank].ring;
      if (seqDiff(ring.lastSeq(), seq) >= ring.view.capacity)
        throw new Error(`join profile: ring ${rank} wrapped past record ${seq >>> 0} before its stamp was read`);
      return this.boards[rank]!.stamps[seq & (ring.view.capacity - 1)]!;
    };
    for (const j of done) j.enqueuedAt = Math.max(stampOf(0, j.last0), stampOf(1, j.last1));
    const selfTimed = done.some((j) => j.selfTimed);
    // No spin: this read runs behind the next step's enqueue, on the same thread.
    if (selfTimed) await this.rt.waitCompleted(1, PROFILE_SLOT, set.copied, 10_000, 0);
    // Both ranks at once: for the event-timed joins one control round trip each, in parallel.
    const out: JoinTiming[] = [];
    await Promise.all(
      RANKS.map(async (rank) => {
        const mine = done.filter((j) => RECEIVER[j.hop] === rank);
        if (mine.length === 0) return;
        const timed = this.deviceEvents ? mine.filter((j) => !j.selfTimed) : [];
        const origin = set.stepStart[rank]!.handle;
        // The newest of them all is the last join's end: this rank's stream recorded them in order.
        const ms: number[] =
          timed.length > 0
            ? await this.ranks[rank].control.call(
                'elapsedMsPairs',
                timed.flatMap((j) => [j.start.handle, j.end.handle, origin, j.start.handle]),
                timed[timed.length - 1]!.end.handle,
              )
            : [];
        const stamps = selfTimed ? this.stampsOf(rank, set) : undefined;
        // `timed` is `mine` without the self-timed joins, in order: k walks it alongside.
        let k = 0;
        const device = (j: Pending): [number, number] => {
          if (!this.deviceEvents) return [NaN, NaN];
          if (j.selfTimed) return stamps!(j.at);
          k++;
          return [ms[2 * k - 2]! * 1000, ms[2 * k - 1]! * 1000];
        };
        for (const j of mine) {
          const [deviceUs, deviceStartUs] = device(j);
          out.push({
            token: j.token,
            layer: j.layer,
            hop: j.hop,
            transport: j.transport,
            bytes: j.bytes,
            rank,
            hostStartUs: j.t0 - stepT0,
            hostEnqueueUs: j.enqueuedAt - j.t0,
            deviceUs,
            deviceStartUs,
          });
        }
      }),
    );
    return out.sort((a, b) => a.layer - b.layer || HOPS.indexOf(a.hop) - HOPS.indexOf(b.hop));
  }

  /** Join `at`'s [device µs, µs from the step's start] from `rank`'s stamp block for `set`. */
  private stampsOf(rank: number, set: EventSet): (at: number) => [number, number] {
    const box = this.rt.mailboxes[rank]!;
    const v = new BigUint64Array(
      box.buffer,
      box.byteOffset + this.mailbox!.offset + set.index * this.blockBytes,
      this.blockBytes / 8,
    );
    const stepStart = v[0]!;
    return (at) => {
      const start = v[1 + 2 * at]!,
        end = v[2 + 2 * at]!;
      if (start < stepStart || end < start)
        throw new Error(
          `join profile: rank ${rank}'s stamps for join ${at} are out of order (step ${stepStart}, start ${start}, end ${end} ns): the join did not time itself this step`,
        );
      return [Number(end - start) / 1000, Number(start - stepStart) / 1000];
    };
  }

  /** Waits for reads in flight, then releases every event and the workers' boards. */
  async close(): Promise<void> {
    for (const set of this.sets) await set.reading.catch(() => undefined);
    for (const r of this.ranks) {
      this.marks[r.rank]?.detach();
      await r.control.call('setProfileBoard', undefined, this.base).catch(() => undefined);
    }
    for (const set of this.sets) {
      for (const e of [...set.pairs.flat(), ...set.stepStart]) {
        await this.ranks[e.rank]!.destroyEvent(e).catch(() => undefined);
      }
    }
    for (const r of this.ranks)
      if (this.stampBlocks[r.rank]) await r.free(this.stampBlocks[r.rank]!).catch(() => undefined);
    this.sets.length = 0;
  }
}
