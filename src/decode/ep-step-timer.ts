/**
 * The EP step's device time per layer, from the fan-out to the merge, whichever path ran it (the
 * seed-003 graph or its eager twin): a timing-event pair per layer on rank 0's stream. Both paths
 * begin and end there (the graph is launched on rank 0's stream and fenced back onto it; the eager
 * step's merge runs there), so the pair brackets the same work either way. Read back once the
 * step's tokens are in, never on the walk.
 */
import type { Runtime } from '../runtime/runtime.js';
import type { DeviceEvent } from '../runtime/rank.js';

export class EpStepTimer {
  private pending: Array<[DeviceEvent, DeviceEvent]> = [];

  private constructor(
    private readonly rt: Runtime,
    private readonly pairs: Array<[DeviceEvent, DeviceEvent]>,
  ) {}

  static async create(rt: Runtime, layers: number): Promise<EpStepTimer> {
    const pairs: Array<[DeviceEvent, DeviceEvent]> = [];
    const t = new EpStepTimer(rt, pairs);
    try {
      for (let l = 0; l < layers; l++)
        pairs.push([await rt.ranks[0].createEvent(true), await rt.ranks[0].createEvent(true)]);
    } catch (e) {
      await t.close();
      throw e;
    }
    return t;
  }

  async around(layer: number, step: () => Promise<void>): Promise<void> {
    const [start, end] = this.pairs[layer]!;
    this.rt.ranks[0].record(start);
    await step();
    this.rt.ranks[0].record(end);
    this.pending.push([start, end]);
  }

  /** Device µs of each EP step bracketed since the last call, in walk order. */
  async collect(): Promise<number[]> {
    const done = this.pending;
    this.pending = [];
    if (done.length === 0) return [];
    const ms: number[] = await this.rt.ranks[0].control.call(
      'elapsedMsPairs',
      done.flatMap(([s, e]) => [s.handle, e.handle]),
    );
    return ms.map((x) => x * 1000);
  }

  async close(): Promise<void> {
    for (const [s, e] of this.pairs) {
      await this.rt.ranks[0].destroyEvent(s).catch(() => undefined);
      await this.rt.ranks[0].destroyEvent(e).catch(() => undefined);
    }
    this.pairs.length = 0;
  }
}
