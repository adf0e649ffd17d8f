/**
 * Device time of spans of one rank's stream, each bracketed by a pair of timing events: a whole
 * step (the decode bench's device time) or every kernel of it (its kernel table). The pairs are
 * made once, before any step (an event is created by a control call, never on the walk), and used
 * again after each collect(); a span costs two ring records. Events between kernels break the
 * kernels' overlap (programmatic dependent launch), so spans around every kernel time them one at a
 * time: the sum of a step's kernel spans is not the step.
 */
import type { DeviceEvent, Rank } from '../runtime/rank.js';

export interface Span {
  label: string;
  /** What the span was given (a kernel's ring arguments), for the reader to size its bytes. */
  args: readonly number[];
  us: number;
}

export class DeviceSpans {
  private used = 0;
  private readonly open: Array<{ label: string; args: readonly number[] }> = [];

  private constructor(
    private readonly rank: Rank,
    private readonly pairs: Array<[DeviceEvent, DeviceEvent]>,
  ) {}

  /** `capacity` spans between two collects. */
  static async create(rank: Rank, capacity: number): Promise<DeviceSpans> {
    const spans = new DeviceSpans(rank, []);
    try {
      for (let i = 0; i < capacity; i++) spans.pairs.push([await rank.createEvent(true), await rank.createEvent(true)]);
    } catch (e) {
      await spans.close();
      throw e;
    }
    return spans;
  }

  begin(): void {
    if (this.used >= this.pairs.length) {
      throw new Error(`device spans: more than ${this.pairs.length} spans before a collect(); make the timer larger`);
    }
    this.rank.record(this.pairs[this.used]![0]);
  }

  end(label: string, args: readonly number[] = []): void {
    this.rank.record(this.pairs[this.used]![1]);
    this.open.push({ label, args });
    this.used++;
  }

  /** The spans since the last collect, in stream order, once their events have completed. */
  async collect(): Promise<Span[]> {
    const n = this.used;
    if (n === 0) return [];
    const done = this.open.splice(0);
    this.used = 0;
    const events = this.pairs.slice(0, n).flatMap(([s, e]) => [s.handle, e.handle]);
    const ms: number[] = await this.rank.control.call('elapsedMsPairs', events, events[events.length - 1]);
    return done.map((d, i) => ({ ...d, us: ms[i]! * 1000 }));
  }

  async close(): Promise<void> {
    for (const [s, e] of this.pairs.splice(0)) {
      await this.rank.destroyEvent(s).catch(() => undefined);
      await this.rank.destroyEvent(e).catch(() => undefined);
    }
  }
}
