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
 * Events are made once, in two sets that alternate by step, and reused; a step's are read (one
 * control call per rank, in parallel) while the next step runs, never on the walk.
 */
import type { Runtime } from '../runtime/runtime.js';
import type { DeviceEvent } from '../runtime/rank.js';
import { hostClockBase, hostMicros } from '../runtime/host-clock.js';
import { HOPS, RECEIVER, type Hop, type JoinSample } from '../profile/profile-data.js';
import { ProfileBoard } from '../workers/profile-board.js';
import { seqDiff } from '../workers/ring-layout.js';

export { HOPS, type Hop };

/** What the walk knows of a join (the step number is the caller's). */
export type JoinTiming = Omit<JoinSample, 'step'>;

/** A join as a step graph captured it: its identity and its events, replayed every launch. */
export type CapturedJoin = Readonly<Pick<Pending, 'hop' | 'layer' | 'transport' | 'bytes' | 'start' | 'end'>>;


interface Pending {
  hop: Hop; layer: number; transport: string; bytes: number; token: number;
  start: DeviceEvent; end: DeviceEvent; t0: number;
  /** Each ring's newest record once the join was written: the join's last on that ring. */
  last0: number; last1: number;
  /** The later of the two workers' stamps for those records, once read. */
  enqueuedAt: number;
}

/**
 * One step's worth of events. Two sets alternate, so a step's events are read
 * while the next step runs (on the other set) instead of after it, and reading them adds nothing
 * to the time between tokens.
 */
interface EventSet {
  /** The event pair of join `layer * HOPS.length + hop index`. */
  pairs: Array<[DeviceEvent, DeviceEvent]>;
  stepStart: DeviceEvent[];
  /** The read of the step that last used this set; awaited before the set is reused. */
  reading: Promise<unknown>;
}

export class JoinProfiler {
  private readonly sets: EventSet[] = [];
  /** One board per rank, attached to that rank's ring. */
  private readonly boards: ProfileBoard[];
  private readonly base = hostClockBase();
  private steps = 0;
  private set!: EventSet;
  /** This step's bracketed joins, in walk order. */
  private pending: Pending[] = [];
  /** The host clock when this step's profile began. */
  private stepT0 = 0;

  private constructor(private readonly rt: Runtime, private readonly deviceEvents: boolean) {
    this.boards = rt.ranks.map((r) => ProfileBoard.create(r.ring.view.capacity));
  }

  /**
   * `deviceEvents: false` is for measuring the profiler (bench/decode.ts): joins keep their host
   * times, their device times are NaN, and no event is recorded or read.
   */
  static async create(rt: Runtime, layers: number, opts: { deviceEvents?: boolean } = {}): Promise<JoinProfiler> {
    const p = new JoinProfiler(rt, opts.deviceEvents ?? true);
    try {
      for (let k = 0; k < 2; k++) {
        const set: EventSet = { pairs: [], stepStart: [], reading: Promise.resolve() };
        p.sets.push(set);
        for (let l = 0; l < layers; l++) {
          for (const hop of HOPS) {
            const r = rt.ranks[RECEIVER[hop]];
            set.pairs.push([await r.createEvent(true), await r.createEvent(true)]);
          }
        }
        for (const r of rt.ranks) set.stepStart.push(await r.createEvent(true));
      }
      for (const r of rt.ranks) {
        await r.control.call('setProfileBoard', p.boards[r.rank]!.buffer, p.base);
        r.ring.attachMarks(p.boards[r.rank]!.marks);
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
    if (this.deviceEvents) for (const r of this.rt.ranks) this.mark(r, this.set.stepStart[r.rank]!);
  }

  /**
   * Issue `join` between this hop's two events on its receiving rank: marks carried by the
   * receiving ring's next records, not records of their own.
   */
  around(hop: Hop, layer: number, transport: string, bytes: number, token: number, join: () => void): void {
    const [start, end] = this.set.pairs[layer * HOPS.length + HOPS.indexOf(hop)]!;
    const r = this.rt.ranks[RECEIVER[hop]];
    const t0 = hostMicros(this.base);
    if (this.deviceEvents) this.mark(r, start);
    join();
    if (this.deviceEvents) this.mark(r, end);
    this.pending.push({ hop, layer, transport, bytes, token, start, end, t0, last0: this.rt.ranks[0].ring.lastSeq(), last1: this.rt.ranks[1].ring.lastSeq(), enqueuedAt: 0 });
  }

  /** Which of the two event sets this step uses: a step graph captures one graph per set. */
  get setIndex(): number { return this.sets.indexOf(this.set); }

  /** How many joins this step has bracketed so far. */
  get bracketed(): number { return this.pending.length; }

  /**
   * The joins bracketed since `from`, taken out of this step: a capture enqueued them into a
   * graph, not onto the streams, so they are this step's only once the graph is launched.
   */
  takeCaptured(from: number): CapturedJoin[] {
    return this.pending.splice(from).map(({ hop, layer, transport, bytes, start, end }) => ({ hop, layer, transport, bytes, start, end }));
  }

  /**
   * A step graph holding `joins` was just launched (its launch began at host time `t0`): they are
   * this step's joins. Their events are the graph's nodes; their host enqueue is the launch's,
   * one ring record per rank for the whole step.
   */
  replayed(joins: readonly CapturedJoin[], t0: number, token: number): void {
    const last0 = this.rt.ranks[0].ring.lastSeq(), last1 = this.rt.ranks[1].ring.lastSeq();
    for (const j of joins) this.pending.push({ ...j, token, t0, last0, last1, enqueuedAt: 0 });
  }

  /** The host clock the profile counts in (µs since this profiler's base). */
  now(): number { return hostMicros(this.base); }

  /**
   * End the step's enqueue: a mark still waiting for a record (the receiving ring's last join of
   * the step) gets a no-op record to ride on, so every event of the step is on its stream.
   */
  flush(): void {
    for (const r of this.rt.ranks) if (r.ring.marksPending()) r.nop();
  }

  private mark(r: Runtime['ranks'][number], ev: DeviceEvent): void {
    // Two marks already wait when a join wrote nothing on its receiving ring: record this one.
    if (!r.ring.mark(ev.handle)) { r.record(ev); return; }
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
    // The step's completion is rank 0's; the peer's worker may enqueue its last join a moment
    // later. Its stamps must be read before its ring wraps onto their slots.
    const lastSeq = [done[done.length - 1]!.last0, done[done.length - 1]!.last1];
    const deadline = performance.now() + 10_000;
    while (!lastSeq.every((seq, r) => this.rt.ranks[r]!.enqueued(seq))) {
      if (this.rt.failure) throw this.rt.failure;
      if (performance.now() > deadline) throw new Error('join profile: a worker did not enqueue the step\'s last join within 10 s');
      await new Promise((res) => setImmediate(res));
    }
    const stampOf = (rank: 0 | 1, seq: number): number => {
      const ring = this.rt.ranks[rank].ring;
      if (seqDiff(ring.lastSeq(), seq) >= ring.view.capacity) throw new Error(`join profile: ring ${rank} wrapped past record ${seq >>> 0} before its stamp was read`);
      return this.boards[rank]!.stamps[seq & (ring.view.capacity - 1)]!;
    };
    for (const j of done) j.enqueuedAt = Math.max(stampOf(0, j.last0), stampOf(1, j.last1));
    // Both ranks' events are read at once: one control round trip each, in parallel.
    const out: JoinTiming[] = [];
    await Promise.all(([0, 1] as const).map(async (rank) => {
      const mine = done.filter((j) => RECEIVER[j.hop] === rank);
      if (mine.length === 0) return;
      const origin = set.stepStart[rank]!.handle;
      // The newest of them all is the last join's end: this rank's stream recorded them in order.
      const ms: number[] = this.deviceEvents
        ? await this.rt.ranks[rank].control.call('elapsedMsPairs', mine.flatMap((j) => [j.start.handle, j.end.handle, origin, j.start.handle]), mine[mine.length - 1]!.end.handle)
        : [];
      mine.forEach((j, i) => out.push({
        token: j.token, layer: j.layer, hop: j.hop, transport: j.transport, bytes: j.bytes, rank,
        hostStartUs: j.t0 - stepT0,
        hostEnqueueUs: j.enqueuedAt - j.t0,
        deviceUs: this.deviceEvents ? ms[2 * i]! * 1000 : NaN,
        deviceStartUs: this.deviceEvents ? ms[2 * i + 1]! * 1000 : NaN,
      }));
    }));
    return out.sort((a, b) => a.layer - b.layer || HOPS.indexOf(a.hop) - HOPS.indexOf(b.hop));
  }

  /** Waits for reads in flight, then releases every event and the workers' boards. */
  async close(): Promise<void> {
    for (const set of this.sets) await set.reading.catch(() => undefined);
    for (const r of this.rt.ranks) {
      r.ring.attachMarks(undefined);
      await r.control.call('setProfileBoard', undefined, this.base).catch(() => undefined);
    }
    for (const set of this.sets) {
      for (const e of [...set.pairs.flat(), ...set.stepStart]) {
        await this.rt.ranks[e.rank]!.destroyEvent(e).catch(() => undefined);
      }
    }
    this.sets.length = 0;
  }
}
