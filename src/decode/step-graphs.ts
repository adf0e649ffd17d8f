/**
 * The step graphs (config `stepGraph`): each batch size's whole step, from the embedding to the
 * greedy pick, captured at its first use and replayed after. Refusals latch for the config (they
 * would hold on every step) and the step runs eagerly. A profiled step has a graph of its own
 * (`t/profile`), or one per event set (`t/profile k`) when its joins are bracketed by events,
 * which the graph holds as nodes; a profiled graph keeps its joins.
 *
 * Capture modes follow the transports: per-rank graphs when no join waits on the other rank's
 * events (ll, nccl), one multi-device graph when joins order by events; the two mixed with NCCL
 * are refused (graph.ts: NCCL in a multi-device capture crashed the process).
 */
import type { Runtime } from '../runtime/runtime.js';
import type { Transport } from '../runtime/transports/transport.js';
import { CapturedGraph, type GraphMode } from '../runtime/graph.js';
import type { CapturedJoin, JoinProfiler } from './join-profile.js';

/** One batch size's step graph, or why there is none. */
interface StepGraph {
  t: number;
  /** Captured for a profiled step (it may hold the profiler's events). */
  profiled: boolean;
  graph: CapturedGraph | { refused: string };
  joins?: CapturedJoin[];
}

export class StepGraphs {
  private readonly graphs = new Map<string, StepGraph>();
  /** What the graphs were captured under: another config destroys them. */
  private key = '';
  private counts = { launches: 0, captures: 0 };

  constructor(
    private readonly rt: Runtime,
    /** One rank alone (the unsharded walk): its graph is rank 0's. */
    private readonly oneRank: boolean,
  ) {}

  /** Between steps: a config whose graphs would differ (`key`) destroys the old ones. */
  async configure(key: string): Promise<void> {
    if (key === this.key) return;
    await this.drop();
    this.key = key;
  }

  /**
   * Run the step for t rows from its graph, capturing `body` first if this batch size, shape (what
   * else the body's launches depend on, '' for none) and profiled set has none yet; a refused one
   * runs `body` eagerly.
   */
  async run(
    t: number,
    shape: string,
    trs: ReadonlyArray<Transport | undefined>,
    body: () => void,
    profiler: JoinProfiler | undefined,
    token: number,
  ): Promise<void> {
    const base = shape ? `${t} ${shape}` : `${t}`;
    const key = !profiler
      ? base
      : profiler.graphPerSet(trs)
        ? `${base}/profile ${profiler.setIndex}`
        : `${base}/profile`;
    let entry = this.graphs.get(key);
    if (!entry) {
      entry = { ...(await this.capture(t, trs, body, profiler)), profiled: profiler !== undefined };
      this.graphs.set(key, entry);
    }
    if (entry.graph instanceof CapturedGraph) {
      const t0 = profiler?.now() ?? 0;
      entry.graph.launch();
      if (entry.joins) profiler!.replayed(entry.joins, t0, token);
      this.counts.launches++;
    } else {
      body();
    }
  }

  private async capture(
    t: number,
    trs: ReadonlyArray<Transport | undefined>,
    body: () => void,
    profiler: JoinProfiler | undefined,
  ): Promise<Omit<StepGraph, 'profiled'>> {
    const mode = this.mode(trs);
    if (typeof mode !== 'string') return { t, graph: mode };
    this.counts.captures++;
    const from = profiler?.bracketed ?? 0;
    try {
      const graph = await CapturedGraph.capture(this.rt, body, mode);
      // A graph that issues its body again (the CPU reference) brackets its joins then.
      return { t, graph, joins: profiler && !graph.reissuesBody ? profiler.takeCaptured(from) : undefined };
    } catch (e) {
      profiler?.takeCaptured(from);
      return { t, graph: { refused: `capture failed: ${(e as Error).message}` } };
    }
  }

  private mode(trs: ReadonlyArray<Transport | undefined>): GraphMode | { refused: string } {
    if (this.oneRank) return 'rank0';
    const modes = new Set(trs.map((tr) => tr!.graphMode));
    if (!modes.has('multi-device')) return 'per-rank';
    if (trs.some((tr) => tr!.name === 'nccl'))
      return {
        refused:
          'nccl layers with event-ordered ones: NCCL calls in a multi-device capture crashed the process (runtime/graph.ts); use per-rank transports (ll, nccl) or leave nccl out',
      };
    return 'multi-device';
  }

  /** Destroy the step graphs (`profiledOnly`: those holding the profiler's events). */
  async drop(profiledOnly = false): Promise<void> {
    for (const [key, { graph, profiled }] of [...this.graphs]) {
      if (profiledOnly && !profiled) continue;
      this.graphs.delete(key);
      if (graph instanceof CapturedGraph) await graph.destroy();
    }
  }

  /** Launches and capture attempts so far, and each batch size's refusal (for the profile and the CLI). */
  stats(): { launches: number; captures: number; refused: Array<{ t: number; reason: string }> } {
    const refused = [...this.graphs.values()]
      .filter((e) => !(e.graph instanceof CapturedGraph))
      .map(({ t, graph }) => ({ t, reason: (graph as { refused: string }).refused }));
    return { ...this.counts, refused };
  }
}
