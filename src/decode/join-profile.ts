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
 * enqueued it, taken from a stamp record (Op.Stamp) each worker executes right after the join's
 * records, on the process-wide monotonic clock (runtime/host-clock.ts).
 *
 * Events and stamp words are made once, in two sets that alternate by step, and reused; a step's
 * are read (one control call per rank, in parallel) while the next step runs, never on the walk.
 */
import type { Runtime } from '../runtime/runtime.js';
import type { DeviceEvent } from '../runtime/rank.js';
import { hostClockBase, hostMicros } from '../runtime/host-clock.js';
import { HOPS, RECEIVER, type Hop, type JoinSample } from '../profile/profile-data.js';

export { HOPS, type Hop };

/** What the walk knows of a join (the step number is the caller's). */
export type JoinTiming = Omit<JoinSample, 'step'>;


interface Pending {
  hop: Hop; layer: number; transport: string; bytes: number; token: number;
  start: DeviceEvent; end: DeviceEvent; t0: number; word: number;
}

/**
 * One step's worth of events and stamp words. Two sets alternate, so a step's events are read
 * while the next step runs (on the other set) instead of after it, and reading them adds nothing
 * to the time between tokens.
 */
interface EventSet {
  /** The event pair of join `layer * HOPS.length + hop index`, the same index as its stamp words. */
  pairs: Array<[DeviceEvent, DeviceEvent]>;
  stepStart: DeviceEvent[];
  /** Offset of this set's words in the stamp board. */
  words: number;
  /** The read of the step that last used this set; awaited before the set is reused. */
  reading: Promise<unknown>;
}

export class JoinProfiler {
  private readonly sets: EventSet[] = [];
  /** Two stamp words (one per worker) per (layer, hop), per set. */
  private readonly board: Float64Array;
  private readonly boardBuffer: SharedArrayBuffer;
  private readonly base = hostClockBase();
  private steps = 0;
  private set!: EventSet;
  /** This step's bracketed joins, in walk order, and each ring's newest stamp record. */
  private pending: Pending[] = [];
  private lastStamp: [number, number] = [0, 0];
  /** The host clock when this step's profile began. */
  private stepT0 = 0;

  private constructor(private readonly rt: Runtime, private readonly layers: number) {
    this.boardBuffer = new SharedArrayBuffer(2 * layers * HOPS.length * 2 * 8);
    this.board = new Float64Array(this.boardBuffer);
  }

  static async create(rt: Runtime, layers: number): Promise<JoinProfiler> {
    const p = new JoinProfiler(rt, layers);
    try {
      for (let k = 0; k < 2; k++) {
        const set: EventSet = { pairs: [], stepStart: [], words: k * layers * HOPS.length * 2, reading: Promise.resolve() };
        p.sets.push(set);
        for (let l = 0; l < layers; l++) {
          for (const hop of HOPS) {
            const r = rt.ranks[RECEIVER[hop]];
            set.pairs.push([await r.createEvent(true), await r.createEvent(true)]);
          }
        }
        for (const r of rt.ranks) set.stepStart.push(await r.createEvent(true));
      }
      for (const r of rt.ranks) await r.control.call('setStampBoard', p.boardBuffer, p.base);
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
    for (const r of this.rt.ranks) r.record(this.set.stepStart[r.rank]!);
  }

  /** Issue `join` between this hop's two events on its receiving rank, then stamp both rings. */
  around(hop: Hop, layer: number, transport: string, bytes: number, token: number, join: () => void): void {
    const at = layer * HOPS.length + HOPS.indexOf(hop);
    const [start, end] = this.set.pairs[at]!;
    const r = this.rt.ranks[RECEIVER[hop]];
    const t0 = hostMicros(this.base);
    r.record(start);
    join();
    r.record(end);
    const word = this.set.words + at * 2;
    this.lastStamp = [this.rt.ranks[0].stamp(word), this.rt.ranks[1].stamp(word + 1)];
    this.pending.push({ hop, layer, transport, bytes, token, start, end, t0, word });
  }

  /**
   * The step's joins with their costs. Call once the step's tokens are back; the promise settles
   * after the events are read, which overlaps the next step (await it whenever convenient).
   */
  endStep(): Promise<JoinTiming[]> {
    const read = this.read(this.set, this.pending, this.lastStamp, this.stepT0);
    // Handled here too, so a caller that never awaits a step's joins cannot crash the process
    // with an unhandled rejection; one that does await still sees the error.
    read.catch(() => undefined);
    this.set.reading = read;
    this.pending = [];
    return read;
  }

  private async read(set: EventSet, done: Pending[], lastStamp: [number, number], stepT0: number): Promise<JoinTiming[]> {
    if (done.length === 0) return [];
    // The step's completion is rank 0's; the peer's worker may reach its last stamp a moment later.
    const deadline = performance.now() + 10_000;
    while (!lastStamp.every((seq, r) => this.rt.ranks[r]!.enqueued(seq))) {
      if (this.rt.failure) throw this.rt.failure;
      if (performance.now() > deadline) throw new Error('join profile: a worker did not reach its stamp records within 10 s');
      await new Promise((res) => setImmediate(res));
    }
    // Both ranks' events are read at once: one control round trip each, in parallel.
    const out: JoinTiming[] = [];
    await Promise.all(([0, 1] as const).map(async (rank) => {
      const mine = done.filter((j) => RECEIVER[j.hop] === rank);
      if (mine.length === 0) return;
      const origin = set.stepStart[rank]!.handle;
      const ms: number[] = await this.rt.ranks[rank].control.call('elapsedMsPairs', mine.flatMap((j) => [j.start.handle, j.end.handle, origin, j.start.handle]));
      mine.forEach((j, i) => out.push({
        token: j.token, layer: j.layer, hop: j.hop, transport: j.transport, bytes: j.bytes, rank,
        hostStartUs: j.t0 - stepT0,
        hostEnqueueUs: Math.max(this.board[j.word]!, this.board[j.word + 1]!) - j.t0,
        deviceUs: ms[2 * i]! * 1000,
        deviceStartUs: ms[2 * i + 1]! * 1000,
      }));
    }));
    return out.sort((a, b) => a.layer - b.layer || HOPS.indexOf(a.hop) - HOPS.indexOf(b.hop));
  }

  /** Waits for reads in flight, then releases every event and the workers' boards. */
  async close(): Promise<void> {
    for (const set of this.sets) await set.reading.catch(() => undefined);
    for (const r of this.rt.ranks) await r.control.call('setStampBoard', undefined, this.base).catch(() => undefined);
    for (const set of this.sets) {
      for (const e of [...set.pairs.flat(), ...set.stepStart]) {
        await this.rt.ranks[e.rank]!.destroyEvent(e).catch(() => undefined);
      }
    }
    this.sets.length = 0;
  }
}
