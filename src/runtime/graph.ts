/**
 * A captured sequence of joins, replayed with one launch.
 *
 * CUDA: one multi-device graph. Rank 0 begins capturing its stream and records a fork event;
 * rank 1's stream waits on it (the wait carries its handshake, so it is never enqueued before the
 * record) and so joins the capture; the body's records on both rings are captured; rank 1 records
 * a join event that rank 0 waits on, and rank 0 ends the capture. The executable graph lives in
 * worker 0's table and a launch is one record on rank 0's ring. Cross-device events inside the
 * body become graph edges. The one-shot's barrier epochs live in device memory, so replays
 * stay paired however many joins a graph holds.
 *
 * A multi-device graph launched on rank 0's stream is fenced both ways (`launchFenced`).
 *
 * Per-rank mode, for bodies whose ranks never wait on each other's events (NCCL collectives
 * order themselves): each rank captures its own stream into its own graph and a launch is one
 * record per ring. NCCL needs it: re-capturing NCCL calls into a second multi-device graph
 * spanning both communicators' threads crashed the process on the two-H200 machine
 * (2026-11-30), while per-rank capture is how NCCL documents graph use.
 *
 * CPU reference: there are no graphs; a launch issues the body again, which is what a replay
 * means, with every ordering check applied.
 */
import type { Runtime } from './runtime.js';
import type { DeviceEvent, Rank } from './rank.js';

let nextSlot = 1;
/** Graph slots are per worker table but numbered process-wide, so no two graphs ever share one. */
export function nextGraphSlot(): number {
  return nextSlot++;
}

/**
 * A launch of a graph on rank 0's stream whose nodes also run on rank 1's device (on streams of
 * CUDA's own, which rank 1's stream knows nothing about), fenced both ways: the graph waits for
 * what rank 1 enqueued before it, and rank 1's later work waits for the graph.
 */
export interface LaunchFences {
  before: DeviceEvent;
  after: DeviceEvent;
}

export async function createFences(rt: Runtime): Promise<LaunchFences> {
  const [a, b] = rt.pair('a fenced graph launch');
  const [before, after] = await Promise.all([b.createEvent(), a.createEvent()]);
  return { before, after };
}

/** Fences exist only on two-rank runtimes (createFences refuses one rank), so pair() holds. */
const fenced = (rt: Runtime): readonly [Rank, Rank] => rt.pair('a fenced graph launch');

export function launchFenced(rt: Runtime, slot: number, f: LaunchFences): void {
  fenceIn(rt, f);
  rt.ranks[0].graphLaunch(slot);
  fenceOut(rt, f);
}

/** Rank 0's stream waits for what rank 1 enqueued so far (before a fenced launch). */
export function fenceIn(rt: Runtime, f: LaunchFences): void {
  const [a, b] = fenced(rt);
  b.record(f.before);
  a.wait(f.before);
}

/** Rank 1's later work waits for rank 0's stream (after a fenced launch). */
export function fenceOut(rt: Runtime, f: LaunchFences): void {
  const [a, b] = fenced(rt);
  a.record(f.after);
  b.wait(f.after);
}

export async function destroyFences(rt: Runtime, f: LaunchFences): Promise<void> {
  const [a, b] = fenced(rt);
  await Promise.all([b.destroyEvent(f.before), a.destroyEvent(f.after)]);
}

/** Until each rank has enqueued its end-of-capture record, then until both are idle. */
export async function untilCaptured(rt: Runtime, ends: ReadonlyArray<number | undefined>): Promise<void> {
  await rt.waitEnqueued(ends, 60_000, 'graph capture: the ranks did not finish capturing in 60 s');
  await rt.drain();
}

/** `rank0`: a body only rank 0 runs (the unsharded walk), captured and launched there alone. */
export type GraphMode = 'multi-device' | 'per-rank' | 'rank0';

export class CapturedGraph {
  private destroyed = false;
  private constructor(
    private readonly rt: Runtime,
    private readonly slot: number,
    private readonly body: () => void,
    private readonly fences?: LaunchFences,
    /** Per-rank graphs: the ranks that hold one under `slot`. */
    private readonly perRank: readonly number[] = [],
  ) {}

  static async capture(rt: Runtime, body: () => void, mode: GraphMode = 'multi-device'): Promise<CapturedGraph> {
    if (mode !== 'rank0') rt.pair(`a ${mode} graph`);
    if (rt.backend === 'cpu') return new CapturedGraph(rt, 0, body);
    if (mode !== 'multi-device') return CapturedGraph.capturePerRank(rt, body, mode === 'rank0' ? [0] : [0, 1]);
    const [a, b] = rt.pair('a multi-device graph');
    const [fork, join] = await Promise.all([a.createEvent(), b.createEvent()]);
    const slot = nextGraphSlot();
    a.beginCapture();
    a.record(fork);
    b.wait(fork);
    body();
    b.record(join);
    a.wait(join);
    await untilCaptured(rt, [a.endCapture(slot), undefined]);
    await Promise.all([a.destroyEvent(fork), b.destroyEvent(join)]);
    return new CapturedGraph(rt, slot, body, await createFences(rt));
  }

  private static async capturePerRank(rt: Runtime, body: () => void, ranks: readonly number[]): Promise<CapturedGraph> {
    const slot = nextGraphSlot();
    for (const r of ranks) rt.ranks[r]!.beginCapture();
    body();
    const ends: Array<number | undefined> = [undefined, undefined];
    for (const r of ranks) ends[r] = rt.ranks[r]!.endCapture(slot);
    await untilCaptured(rt, ends);
    return new CapturedGraph(rt, slot, body, undefined, ranks);
  }

  /** True where a launch issues the body again (the CPU reference, which has no graphs). */
  get reissuesBody(): boolean {
    return !this.fences && this.perRank.length === 0;
  }

  /** One replay of the whole captured sequence (CUDA: the launch and its two fences). */
  launch(): void {
    if (this.destroyed) throw new Error('graph launch after destroy()');
    if (this.perRank.length > 0) {
      for (const r of this.perRank) this.rt.ranks[r]!.graphLaunch(this.slot);
      return;
    }
    if (!this.fences) {
      this.body();
      return;
    }
    launchFenced(this.rt, this.slot, this.fences);
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    if (this.perRank.length > 0) {
      await Promise.all(this.perRank.map((r) => this.rt.ranks[r]!.control.call('destroyGraph', this.slot)));
      return;
    }
    if (!this.fences) return;
    await this.rt.ranks[0].control.call('destroyGraph', this.slot);
    await destroyFences(this.rt, this.fences);
  }
}
