/**
 * The EP step's device time per layer: a timing-event pair per layer on rank 0's stream. In the
 * seed walk, from the fan-out to the merge, whichever path ran it (the seed-003 graph or its eager
 * twin): both begin and end there (the graph is launched on rank 0's stream and fenced back onto
 * it; the eager step's merge runs there), so the pair brackets the same work either way. In the
 * replicated walk, from the experts to rank 0's merge, the exchange between. Read back once the
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
    this.begin(layer);
    await step();
    this.end(layer);
  }

  /** The layer's EP step starts on rank 0's stream (for a step that needs no closure). */
  begin(layer: number): void {
    this.rt.ranks[0].record(this.pairs[layer]![0]);
  }

  /** The layer's EP step, begun with begin(), has ended on rank 0's stream. */
  end(layer: number): void {
    const pair = this.pairs[layer]!;
    this.rt.ranks[0].record(pair[1]);
    this.pending.push(pair);
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
