/**
 * Per-join latency of the decode walk, from timing events on the device (the config's
 * `profile: true`). Each join is bracketed on its RECEIVING rank's stream: the start event is
 * passed when that stream reaches the join, the end event when the join's data has landed there.
 * So a sample is the join as its consumer experiences it, waiting for the producer included.
 * (Events on two devices cannot be subtracted from each other, so the receiver's clock is the
 * only one that sees the whole join.) The events are made once and reused every step; reading
 * them is one control call per rank after the step's tokens are back, never on the walk.
 */
import type { Runtime } from '../runtime/runtime.js';
import type { DeviceEvent } from '../runtime/rank.js';

import { HOPS, type Hop } from '../profile/profile-data.js';

export { HOPS, type Hop };

/** The rank whose stream receives each hop (the all-gather lands on both; rank 0 is timed). */
const RECEIVER: Record<Hop, 0 | 1> = { 'fan-out': 1, 'head all-gather': 0, wo: 0, 'ep fan-out': 1, 'ep return': 0 };

export interface JoinTiming { hop: Hop; layer: number; transport: string; us: number }

export class JoinProfiler {
  private readonly pairs = new Map<string, [DeviceEvent, DeviceEvent]>();
  /** This step's bracketed joins, in walk order. */
  private pending: Array<{ hop: Hop; layer: number; transport: string; start: DeviceEvent; end: DeviceEvent }> = [];

  private constructor(private readonly rt: Runtime) {}

  /** Two timing events per hop and layer, on the hop's receiving rank. */
  static async create(rt: Runtime, layers: number): Promise<JoinProfiler> {
    const p = new JoinProfiler(rt);
    try {
      for (let l = 0; l < layers; l++) {
        for (const hop of HOPS) {
          const r = rt.ranks[RECEIVER[hop]];
          p.pairs.set(`${hop}/${l}`, [await r.createEvent(true), await r.createEvent(true)]);
        }
      }
    } catch (e) {
      await p.close();
      throw e;
    }
    return p;
  }

  /** Issue `join` between this hop's two events on its receiving rank. */
  around(hop: Hop, layer: number, transport: string, join: () => void): void {
    const [start, end] = this.pairs.get(`${hop}/${layer}`)!;
    const r = this.rt.ranks[RECEIVER[hop]];
    r.record(start);
    join();
    r.record(end);
    this.pending.push({ hop, layer, transport, start, end });
  }

  /** The joins bracketed since the last call, with their device times (after the step is done). */
  async collect(): Promise<JoinTiming[]> {
    const done = this.pending;
    this.pending = [];
    const out: JoinTiming[] = [];
    for (const rank of [0, 1] as const) {
      const mine = done.filter((j) => RECEIVER[j.hop] === rank);
      if (mine.length === 0) continue;
      const ms: number[] = await this.rt.ranks[rank].control.call('elapsedMsPairs', mine.flatMap((j) => [j.start.handle, j.end.handle]));
      mine.forEach((j, i) => out.push({ hop: j.hop, layer: j.layer, transport: j.transport, us: ms[i]! * 1000 }));
    }
    return out.sort((a, b) => a.layer - b.layer || HOPS.indexOf(a.hop) - HOPS.indexOf(b.hop));
  }

  async close(): Promise<void> {
    for (const [s, e] of this.pairs.values()) {
      await this.rt.ranks[s.rank]!.destroyEvent(s).catch(() => undefined);
      await this.rt.ranks[e.rank]!.destroyEvent(e).catch(() => undefined);
    }
    this.pairs.clear();
  }
}
