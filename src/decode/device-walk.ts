/**
 * The decode walk on the devices (one GPU, two GPUs or two ranks on one in loopback, or the CPU
 * reference's emulated devices): one step enqueued whole (every layer, every hop, every rank) as
 * ring records, then one read-back of the next tokens through rank 0's mailbox.
 *
 * `sharded` (docs/model.md "How it is sharded"; rank 0 is root):
 *   hop 1  fan-out:    root broadcasts h and the positions (packed: t·H floats, then t words)
 *   local             both: rmsnorm, the latent c (replicated, into each rank's cache), their
 *                     heads' q and attention -> their part of u
 *   hop 2  all-gather: the head parts, token-major (strided at t > 1)
 *   local             both: their column half of u @ Wo
 *   hop 3  gather:     the halves onto root (strided at t > 1); root adds them to h
 *   (`wo: "allreduce"`: each rank multiplies its own part of u by its rows of Wo, and the two
 *    partial sums meet in one all-reduce instead of hops 2 and 3)
 *   MoE               root: rmsnorm, router, fp8 quantization
 *   hop 4  EP fan-out: root broadcasts the packed xq, xs, ids, weights; the peer dequantizes
 *   local             both: the slots whose experts they own
 *   hop 5  EP return:  the peer's per-slot contributions onto root; root merges by owner and sums
 *   (with the config's `epGraph` gate on, hop 4 to the merge goes through the layer's EP graph
 *    slot, ep-graph-slot.ts: a replayed graph when one could be captured, else the same eager
 *    records)
 * `unsharded` (the oracle, and the layout of one GPU): rank 0 does all of it with every head and
 * expert, and no hops; a one-worker runtime runs it.
 *
 * Nothing in the movement hops adds numbers and every kernel computes each output the same way
 * whatever slice it is given (cu/model.h), so the sharded walk is bit-identical to the unsharded
 * one; the allreduce variant is not (a sum of two partial products rounds differently).
 */
import type { Runtime } from '../runtime/runtime.js';
import type { ArLink } from '../runtime/link.js';
import type { PerRank, Transport, TransportName } from '../runtime/transports/transport.js';
import { openTransport } from '../runtime/transports/open.js';
import type { ModelConfig } from './model-config.js';
import { ModelOps } from './model-ops.js';
import { mlaWorkspaceBytes } from './mla-workspace.js';
import {
  ownership,
  WeightLoader,
  type Layout,
  type Ownership,
  type Progress,
  type RankWeights,
} from './device-weights.js';
import { transportForLayer, type DecodeConfig } from './decode-config.js';
import {
  JoinProfiler,
  profileSwitches,
  stampBlockBytes,
  type CapturedJoin,
  type Hop,
  type JoinTiming,
  type ProfileSwitches,
} from './join-profile.js';
import { EpGraphSlots } from './ep-graph-slot.js';
import { checkRoutes } from './route-check.js';
import { EpStepTimer } from './ep-step-timer.js';
import { DeviceSpans, type Span } from './device-spans.js';
import { ParentGraph, type ParentGraphParts } from '../runtime/parent-graph.js';
import { CapturedGraph, type GraphMode } from '../runtime/graph.js';
import { BarrierWatch, REFUSAL_BYTES, waitsOnDevice } from './barrier-watch.js';

/** Per-rank activation buffers, each sized for maxBatch rows. */
interface Buffers {
  hx: number;
  a: number;
  q: number;
  uPart: number;
  uFull: number;
  yPart: number;
  yFull: number;
  yAr: number;
  logitsE: number;
  pack: number;
  xd: number;
  act: number;
  contrib: number;
  contribPeer: number;
  fin: number;
  logitsV: number;
  tokIn: number;
  tokOut: number;
  cache: number;
  /** The attention's tile partials (mla-workspace.ts). */
  attnWork: number;
}

/** The completion counter a step's last record advances on rank 0 (rank 1's PROFILE_SLOT is 1). */
const STEP_SLOT = 0;
/**
 * Mailbox layout: next tokens (i32 × t) at 0, the hidden state (f32 × t·H) from HIDDEN_AT, then
 * (route validation) each layer's ids (i32 × t·K) and weights (f32 × t·K), one stride per layer.
 */
export const HIDDEN_AT = 256;

function routesAt(cfg: ModelConfig, maxBatch: number, layer: number): number {
  return HIDDEN_AT + maxBatch * cfg.hidden * 4 + layer * maxBatch * cfg.topk * 8;
}

/** Then the join profile's two stamp blocks (join-profile.ts), 8-byte aligned. */
function stampsAt(cfg: ModelConfig, maxBatch: number): number {
  return Math.ceil(routesAt(cfg, maxBatch, cfg.layers) / 8) * 8;
}

/** Then each rank's device-barrier refusal word (barrier-watch.ts). */
function refusalAt(cfg: ModelConfig, maxBatch: number): number {
  return stampsAt(cfg, maxBatch) + 2 * stampBlockBytes(cfg.layers);
}

export function mailboxBytesFor(cfg: ModelConfig, maxBatch: number): number {
  return refusalAt(cfg, maxBatch) + REFUSAL_BYTES;
}

/** One batch size's step graph, or why there is none; a profiled one keeps its joins. */
interface StepGraph {
  t: number;
  /** Captured for a profiled step (it may hold the profiler's events). */
  profiled: boolean;
  graph: CapturedGraph | { refused: string };
  joins?: CapturedJoin[];
}

export interface StepResult {
  next: number[];
  hidden?: Float32Array;
  /**
   * Every join of the step, when its config profiles: settles once the step's events are read,
   * which overlaps the next step rather than delaying this one's tokens.
   */
  joins?: Promise<JoinTiming[]>;
  /**
   * Host: when the step began (performance.now(), ms), enqueueing it, waiting for its completion
   * counter, and until its tokens were read (µs).
   */
  timing: { hostStartMs: number; hostEnqueueUs: number; waitUs: number; wallUs: number };
  /** With route validation on: each layer's expert ids, t·K of them, row by row. */
  routes?: Int32Array[];
}

export class DeviceWalk {
  /** One per rank the layout uses: rank 0's alone unsharded (a one-worker runtime will do). */
  private readonly ops: readonly ModelOps[];
  private readonly own: [Ownership, Ownership];
  private readonly transports = new Map<TransportName, Transport>();
  private stepSeq = 0;
  private override: Transport | undefined;
  private profiler: JoinProfiler | undefined;
  /** Handed to every profiler this walk makes, so a switch outlives prepare() turning profiling off. */
  readonly profileSwitches: ProfileSwitches = profileSwitches();
  private readonly epSlots: EpGraphSlots;
  /**
   * Each join's per-rank buffers (sharded only), made once: the buffers never move, and a join
   * builds no array. `contrib` is where the EP return lands on each rank.
   */
  private readonly pairs: Record<'hx' | 'pack' | 'uPart' | 'uFull' | 'yPart' | 'yAr' | 'contrib', PerRank> | undefined;
  /** The expert split the EP workspaces (pack, act, contrib buffers) were built for. */
  private readonly builtFor: ReadonlyArray<{ e0: number; nE: number }>;
  /** The config the EP graphs were captured under: a different one empties the slots. */
  private epConfigKey = '';
  /** Set for the step being enqueued when its config asks for profiling. */
  private profiling = false;
  private epTimer: EpStepTimer | undefined;
  /** When set, each step's device time on rank 0, from its first record to its last (timeSteps). */
  private stepSpans: DeviceSpans | undefined;
  /** When set, every model kernel of rank 0 is timed alone (timeKernels); the walk runs eagerly. */
  private kernelSpans: DeviceSpans | undefined;
  /**
   * The whole step captured (config stepGraph), or why not (latched), per batch size t; for a
   * profiled step one more (`t/profile`), or one per event set (`t/profile k`) when its joins are
   * bracketed by events, which the graph holds as nodes. A profiled graph keeps its joins.
   */
  private stepGraphs = new Map<string, StepGraph>();
  /** The config the step graphs were captured under: a different one destroys them. */
  private stepGraphKey = '';
  /** Step-graph launches and capture attempts so far. */
  private stepGraphCounts = { launches: 0, captures: 0 };
  /** Row 0's cache position in the step being enqueued (the profile's token). */
  private token = 0;
  /** Set for the step being enqueued when its config asks for route validation. */
  private validation = false;
  /** The refusal words of the device barriers, read with every step that joins through one (sharded). */
  private readonly barriers: BarrierWatch | undefined;

  private constructor(
    readonly rt: Runtime,
    readonly link: ArLink | undefined,
    readonly cfg: ModelConfig,
    readonly layout: Layout,
    readonly maxBatch: number,
    private readonly loader: WeightLoader,
    private readonly weights: RankWeights[],
    private readonly bufs: Buffers[],
  ) {
    this.ops = (layout === 'sharded' ? rt.pair('the sharded walk') : [rt.ranks[0]]).map((r) => new ModelOps(r));
    this.own = [ownership(cfg, layout, 0), ownership(cfg, layout, 1)];
    this.builtFor = this.own.map((o) => ({ e0: o.e0, nE: o.nE }));
    this.epSlots = new EpGraphSlots(cfg.layers);
    this.barriers = link ? new BarrierWatch(rt, link, refusalAt(cfg, maxBatch)) : undefined;
    if (layout === 'sharded') {
      const [b0, b1] = [bufs[0]!, bufs[1]!];
      this.pairs = {
        hx: [b0.hx, b1.hx],
        pack: [b0.pack, b1.pack],
        uPart: [b0.uPart, b1.uPart],
        uFull: [b0.uFull, b1.uFull],
        yPart: [b0.yPart, b1.yPart],
        yAr: [b0.yAr, b1.yAr],
        contrib: [b0.contribPeer, b1.contrib],
      };
    }
  }

  private get ranksUsed(): number {
    return this.layout === 'sharded' ? 2 : 1;
  }

  /** Generate the weights and allocate the activations and caches. Frees everything on failure. */
  static async load(
    rt: Runtime,
    link: ArLink | undefined,
    cfg: ModelConfig,
    layout: Layout,
    maxBatch: number,
    progress?: Progress,
  ): Promise<DeviceWalk> {
    if (layout === 'sharded') rt.pair('the sharded walk');
    if (layout === 'sharded' && !link) throw new Error('the sharded walk needs a tp link');
    const loader = new WeightLoader(cfg);
    const n = layout === 'sharded' ? 2 : 1;
    const weights: RankWeights[] = [];
    const bufs: Buffers[] = [];
    try {
      // Both ranks generate at once; progress counts tensors over both.
      const total = [0, 1].slice(0, n).reduce((a, r) => a + loader.tensorCount(layout, r), 0);
      const done = [0, 0];
      // allSettled, not all: when one rank fails, the other's finished weights must still be freed.
      const loaded = await Promise.allSettled(
        rt.ranks.slice(0, n).map((rank, r) =>
          loader.load(rank, layout, (d, _t, what) => {
            done[r] = d;
            progress?.(done[0]! + done[1]!, total, what);
          }),
        ),
      );
      for (const x of loaded) if (x.status === 'fulfilled') weights.push(x.value);
      const failed = loaded.find((x): x is PromiseRejectedResult => x.status === 'rejected');
      if (failed) throw failed.reason;
      for (let r = 0; r < n; r++) bufs.push(await DeviceWalk.allocBuffers(rt, r, cfg, layout, maxBatch));
      if (link) await link.reserve(DeviceWalk.largestJoin(cfg, maxBatch));
      return new DeviceWalk(rt, link, cfg, layout, maxBatch, loader, weights, bufs);
    } catch (e) {
      await DeviceWalk.release(rt, weights, bufs);
      throw e;
    }
  }

  /** The largest join a step moves, in f32 words (what the link must hold). */
  static largestJoin(cfg: ModelConfig, t: number): number {
    const { hidden: H, heads: N, headDim: Dv, topk: K } = cfg;
    return Math.max(t * H + t, t * N * Dv, t * H, DeviceWalk.packWords(cfg, t), t * K * H);
  }

  /** The EP fan-out's packed payload: xq (t·H bytes), xs (t·H/128), ids (t·K), weights (t·K). */
  private static packWords(cfg: ModelConfig, t: number): number {
    return (t * cfg.hidden) / 4 + (t * cfg.hidden) / 128 + 2 * t * cfg.topk;
  }

  /** Bytes of each activation buffer rank r allocates for maxBatch B. */
  private static bufferSizes(cfg: ModelConfig, layout: Layout, r: number, B: number): Record<keyof Buffers, number> {
    const {
      hidden: H,
      heads: N,
      latent: R,
      headDim: Dv,
      experts: E,
      topk: K,
      ffn: F,
      vocab: V,
      layers: L,
      maxPos: P,
    } = cfg;
    const own = ownership(cfg, layout, r);
    const root = r === 0;
    return {
      hx: (B * H + B) * 4,
      a: B * H * 4,
      q: B * own.nh * R * 4,
      uPart: B * own.nh * Dv * 4,
      uFull: B * N * Dv * 4,
      yPart: B * own.woCols * 4,
      yFull: root ? B * H * 4 : 0,
      yAr: B * H * 4,
      logitsE: root ? B * E * 4 : 0,
      pack: DeviceWalk.packWords(cfg, B) * 4,
      xd: B * H * 4,
      act: B * K * F * 4,
      contrib: B * K * H * 4,
      contribPeer: root && layout === 'sharded' ? B * K * H * 4 : 0,
      fin: root ? B * H * 4 : 0,
      logitsV: root ? B * V * 4 : 0,
      tokIn: root ? B * 4 : 0,
      tokOut: root ? B * 4 : 0,
      cache: B * L * P * R * 4,
      attnWork: mlaWorkspaceBytes(B, own.nh, P, R),
    };
  }

  /** Activation and cache bytes of rank 0 (the larger), for sizing the CPU reference's devices. */
  static activationBytes(cfg: ModelConfig, layout: Layout, maxBatch: number): number {
    return Object.values(DeviceWalk.bufferSizes(cfg, layout, 0, maxBatch)).reduce((a, b) => a + b, 0);
  }

  private static async allocBuffers(
    rt: Runtime,
    r: number,
    cfg: ModelConfig,
    layout: Layout,
    B: number,
  ): Promise<Buffers> {
    const rank = rt.ranks[r]!;
    const sizes = DeviceWalk.bufferSizes(cfg, layout, r, B);
    const out = {} as Buffers;
    try {
      for (const [k, bytes] of Object.entries(sizes) as Array<[keyof Buffers, number]>) {
        out[k] = bytes > 0 ? await rank.alloc(bytes) : 0;
        // Poison: a kernel that reads what no kernel wrote shows NaN, not a plausible zero.
        if (bytes > 0) rank.memset(out[k], 0xff, bytes);
      }
    } catch (e) {
      for (const p of Object.values(out)) if (p) await rank.free(p).catch(() => undefined);
      throw e;
    }
    return out;
  }

  private static async release(rt: Runtime, weights: RankWeights[], bufs: Buffers[]): Promise<void> {
    for (const w of weights) await WeightLoader.free(rt.ranks[w.rank]!, w).catch(() => undefined);
    for (let r = 0; r < bufs.length; r++) {
      await rt.ranks[r]!.drain(60_000).catch(() => undefined);
      for (const p of Object.values(bufs[r]!)) if (p) await rt.ranks[r]!.free(p).catch(() => undefined);
    }
  }

  /**
   * Open (once) every transport the config names and, for `wo: "allreduce"`, generate Wo's rows.
   * Between steps only. `everyLayer` replaces the config's transports (benchmarks: a transport
   * that moves nothing times the walk without its joins).
   */
  async prepare(dc: DecodeConfig, everyLayer?: Transport): Promise<void> {
    const names = Array.from({ length: this.cfg.layers }, (_, l) => transportForLayer(dc, l));
    // A step graph holds every layer's transport and the wo variant: another config needs new ones.
    const sgKey = JSON.stringify({ t: names, wo: dc.wo, on: dc.stepGraph, o: everyLayer?.name ?? null });
    if (sgKey !== this.stepGraphKey) {
      await this.dropStepGraphs();
      this.stepGraphKey = sgKey;
    }
    if (this.layout !== 'sharded') return;
    this.override = everyLayer;
    for (const name of everyLayer ? [] : new Set(names)) {
      if (!this.transports.has(name)) this.transports.set(name, await openTransport(name, this.link!));
    }
    if (dc.wo === 'allreduce') {
      await Promise.all([0, 1].map((r) => this.loader.loadWoRows(this.rt.ranks[r]!, this.layout, this.weights[r]!)));
    }
    if (dc.profile && !this.profiler) {
      const mailbox = {
        offset: stampsAt(this.cfg, this.maxBatch),
        copy: (rank: number, src: number, offset: number, bytes: number): void => {
          this.ops[rank]!.toMailbox(src, offset, bytes);
        },
      };
      this.profiler = await JoinProfiler.create(this.rt, this.cfg.layers, {
        switches: this.profileSwitches,
        mailbox: this.layout === 'sharded' ? mailbox : undefined,
      });
    }
    // Off means off: the workers stop stamping their records once the board is gone. The step
    // graphs that hold the profiler's events go first (a replay would record destroyed events).
    if (!dc.profile && this.profiler) {
      await this.dropStepGraphs(true);
      await this.profiler.close();
      this.profiler = undefined;
    }
    // A captured EP step holds its layer's transport: a new transport mapping or gate empties
    // the slots (and lifts latched refusals, whose reasons may no longer hold).
    const key = JSON.stringify({ t: names, g: dc.epGraph, o: everyLayer !== undefined });
    if (key !== this.epConfigKey) {
      await this.epSlots.reset();
      this.epConfigKey = key;
    }
    await this.link!.setSpinLimit(dc.spin.deviceTicks);
    if (this.link!.llServeIdleMicros !== dc.llServeMicros) await this.link!.setLlServe(dc.llServeMicros);
  }

  /**
   * Enqueue one step for rows 0..t-1 (row s is slot s) and wait for its tokens. Arguments are
   * checked by the session; `prepare(dc)` must have run for this config.
   */
  async step(
    tokens: readonly number[],
    positions: readonly number[],
    dc: DecodeConfig,
    wantHidden: boolean,
    timeoutMs = 60_000,
  ): Promise<StepResult> {
    const hostStartMs = performance.now();
    this.profiling = dc.profile && this.profiler !== undefined;
    this.validation = dc.validate;
    this.token = positions[0]!;
    if (this.profiling) await this.profiler!.beginStep();
    const t = tokens.length;
    const H = this.cfg.hidden;
    const b0 = this.bufs[0]!,
      root = this.ops[0]!;
    const posAt = (r: number): number => this.bufs[r]!.hx + t * H * 4;
    // Tokens and positions are the step's only inputs from the host, written before the body:
    // everything after reads them from device memory, so a captured body replays any step.
    this.stepSpans?.begin();
    root.setI32(b0.tokIn, tokens);
    root.setI32(posAt(0), positions);
    const trs = this.transportsFor(dc);
    if (dc.stepGraph && !this.validation && !this.epTimer && !this.kernelSpans)
      await this.runStepGraph(t, dc, trs, posAt);
    else {
      this.head(t);
      for (let l = 0; l < this.cfg.layers; l++) {
        this.attention(l, t, trs[l], dc, posAt);
        await this.moe(l, t, trs[l], dc);
      }
      this.tail(t);
      if (this.profiling) this.profiler!.flush();
    }
    if (this.profiling) this.profiler!.copyStamps();
    const refusals = this.barriers && waitsOnDevice(trs) ? this.barriers.copy(this.ops) : undefined;
    root.toMailbox(b0.tokOut, 0, 4 * t);
    if (wantHidden) root.toMailbox(b0.hx, HIDDEN_AT, 4 * t * H);
    this.stepSpans?.end('step');
    const seq = ++this.stepSeq;
    root.rank.signal(STEP_SLOT, seq);
    const hostEnqueueUs = (performance.now() - hostStartMs) * 1000;
    await this.rt.waitCompleted(0, STEP_SLOT, seq, timeoutMs);
    const waitUs = (performance.now() - hostStartMs) * 1000 - hostEnqueueUs;
    const box = this.rt.mailboxes[0]!;
    const next = Array.from(new Int32Array(box.buffer, box.byteOffset, t));
    const hidden = wantHidden
      ? new Float32Array(box.buffer.slice(box.byteOffset + HIDDEN_AT, box.byteOffset + HIDDEN_AT + 4 * t * H))
      : undefined;
    const out: StepResult = {
      next,
      timing: { hostStartMs, hostEnqueueUs, waitUs, wallUs: (performance.now() - hostStartMs) * 1000 },
    };
    if (hidden) out.hidden = hidden;
    if (this.profiling) out.joins = this.profiler!.endStep();
    if (refusals !== undefined) {
      // The profile's read of this step settles on its own; nobody will await it if this throws.
      await this.barriers!.check(refusals, timeoutMs).catch((e: unknown) => {
        out.joins?.catch(() => undefined);
        throw e;
      });
    }
    if (this.validation) out.routes = this.checkRoutes(t);
    return out;
  }

  /** Each layer's transport for this config (undefined everywhere for the unsharded walk). */
  private transportsFor(dc: DecodeConfig): Array<Transport | undefined> {
    return Array.from({ length: this.cfg.layers }, (_, l) => {
      if (this.layout !== 'sharded') return undefined;
      const tr = this.override ?? this.transports.get(transportForLayer(dc, l));
      if (!tr)
        throw new Error(
          `step: transport '${transportForLayer(dc, l)}' of layer ${l} was not prepared; call prepare(config) between steps`,
        );
      return tr;
    });
  }

  /** The embedding: the step's first kernel. */
  private head(t: number): void {
    const b0 = this.bufs[0]!;
    this.ops[0]!.embed(b0.hx, this.weights[0]!.emb, b0.tokIn, t, this.cfg.hidden, this.cfg.vocab);
  }

  /** The final norm, the logits and the greedy pick, into tokOut. */
  private tail(t: number): void {
    const { hidden: H, vocab: V } = this.cfg;
    const b0 = this.bufs[0]!,
      w0 = this.weights[0]!,
      root = this.ops[0]!;
    root.rmsnorm(b0.fin, b0.hx, w0.gf, t, H);
    root.gemv(b0.logitsV, V, b0.fin, H, w0.wvocab, V, H, V, t);
    root.argmax(b0.tokOut, b0.logitsV, t, V);
  }

  /**
   * The whole step from the embedding to the greedy pick, through this batch size's captured
   * graph: captured at its first use, replayed after. Refusals latch for the config (they would
   * hold on every step) and the step runs eagerly. Capture modes follow the transports: per-rank
   * graphs when no join waits on the other rank's events (ll, nccl), one multi-device graph when
   * joins order by events; the two mixed with NCCL are refused (graph.ts: NCCL in a multi-device
   * capture crashed the process).
   */
  private async runStepGraph(
    t: number,
    dc: DecodeConfig,
    trs: Array<Transport | undefined>,
    posAt: (r: number) => number,
  ): Promise<void> {
    const profiler = this.profiling ? this.profiler! : undefined;
    const body = (): void => {
      this.head(t);
      for (let l = 0; l < this.cfg.layers; l++) {
        this.attention(l, t, trs[l], dc, posAt);
        this.moeEager(l, t, trs[l]);
      }
      this.tail(t);
      profiler?.flush();
    };
    const key = !profiler ? `${t}` : profiler.graphPerSet(trs) ? `${t}/profile ${profiler.setIndex}` : `${t}/profile`;
    let entry = this.stepGraphs.get(key);
    if (!entry) {
      entry = { ...(await this.captureStep(t, trs, body, profiler)), profiled: profiler !== undefined };
      this.stepGraphs.set(key, entry);
    }
    if (entry.graph instanceof CapturedGraph) {
      const t0 = profiler?.now() ?? 0;
      entry.graph.launch();
      if (entry.joins) profiler!.replayed(entry.joins, t0, this.token);
      this.stepGraphCounts.launches++;
    } else {
      body();
    }
  }

  private async captureStep(
    t: number,
    trs: Array<Transport | undefined>,
    body: () => void,
    profiler: JoinProfiler | undefined,
  ): Promise<Omit<StepGraph, 'profiled'>> {
    const mode = this.stepGraphMode(trs);
    if (typeof mode !== 'string') return { t, graph: mode };
    this.stepGraphCounts.captures++;
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

  private stepGraphMode(trs: Array<Transport | undefined>): GraphMode | { refused: string } {
    if (this.layout !== 'sharded') return 'rank0';
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
  private async dropStepGraphs(profiledOnly = false): Promise<void> {
    for (const [key, { graph, profiled }] of [...this.stepGraphs]) {
      if (profiledOnly && !profiled) continue;
      this.stepGraphs.delete(key);
      if (graph instanceof CapturedGraph) await graph.destroy();
    }
  }

  /** The step graphs' counters and each batch size's refusal (for the profile and the CLI). */
  stepGraphStats(): { launches: number; captures: number; refused: Array<{ t: number; reason: string }> } {
    const refused = [...this.stepGraphs.values()]
      .filter((e) => !(e.graph instanceof CapturedGraph))
      .map(({ t, graph }) => ({ t, reason: (graph as { refused: string }).refused }));
    return { ...this.stepGraphCounts, refused };
  }

  /**
   * Open one join: bracketed by the profiler's events (or timed by its transport) when this step
   * is profiled. The caller issues the join, then calls joinEnd(); no closure, so the per-join
   * path stays a ring write and a launch. `floats` is what the join delivers to its receiving
   * rank (the profile's bytes / 4).
   */
  private joinBegin(hop: Hop, l: number, tr: Transport, floats: number): void {
    if (this.profiling) this.profiler!.beginJoin(hop, l, tr.name, floats * 4, this.token, tr);
  }

  private joinEnd(): void {
    if (this.profiling) this.profiler!.endJoin();
  }

  private attention(
    l: number,
    t: number,
    tr: Transport | undefined,
    dc: DecodeConfig,
    posAt: (r: number) => number,
  ): void {
    const { hidden: H, heads: N, latent: R, headDim: Dv, layers: L, maxPos: P } = this.cfg;
    const n = this.ranksUsed;
    const b = this.bufs,
      w = this.weights;
    if (tr) {
      this.joinBegin('fan-out', l, tr, t * H + t);
      tr.broadcast(0, b[0]!.hx, this.pairs!.hx, t * H + t);
      this.joinEnd();
    }
    for (let r = 0; r < n; r++) {
      const o = this.ops[r]!,
        br = b[r]!,
        lw = w[r]!.layers[l]!,
        nh = this.own[r]!.nh;
      o.rmsnorm(br.a, br.hx, lw.g1, t, H);
      o.latentQuery(br.q, br.a, lw.wdkv, lw.wq, br.cache + l * P * R * 4, L * P * R, posAt(r), H, R, nh * R, t, P);
      o.mlaAttention(
        br.uPart,
        nh * Dv,
        br.q,
        nh * R,
        br.cache + l * P * R * 4,
        L * P * R,
        posAt(r),
        lw.wuv,
        br.attnWork,
        t,
        nh,
        P,
        R,
        Dv,
      );
    }
    const root = this.ops[0]!;
    if (!tr) {
      // Unsharded: uPart holds every head already, and the residual add rides on the product
      // (f32(h + y), the bits the sharded walk's separate add gives).
      root.gemv(b[0]!.hx, H, b[0]!.uPart, N * Dv, w[0]!.layers[l]!.woCols, H, N * Dv, H, t, true);
      return;
    }
    const nh = N / 2;
    if (dc.wo === 'allreduce') {
      for (let r = 0; r < 2; r++)
        this.ops[r]!.gemv(b[r]!.yAr, H, b[r]!.uPart, nh * Dv, w[r]!.layers[l]!.woRows, H, nh * Dv, H, t);
      this.joinBegin('wo', l, tr, t * H);
      tr.allReduce(this.pairs!.yAr, t * H);
      this.joinEnd();
      root.axpy(b[0]!.hx, b[0]!.yAr, t * H, 1);
      return;
    }
    this.joinBegin('head all-gather', l, tr, t * nh * Dv);
    tr.allGather(this.pairs!.uPart, this.pairs!.uFull, nh * Dv, t);
    this.joinEnd();
    const half = H / 2;
    for (let r = 0; r < 2; r++)
      this.ops[r]!.gemv(b[r]!.yPart, half, b[r]!.uFull, N * Dv, w[r]!.layers[l]!.woCols, half, N * Dv, half, t);
    this.joinBegin('wo', l, tr, t * half);
    tr.gather(0, this.pairs!.yPart, b[0]!.yFull, half, t);
    this.joinEnd();
    root.axpy(b[0]!.hx, b[0]!.yFull, t * H, 1);
  }

  /** The MoE block with its EP step eager (inside a step graph, which captures it as it is). */
  private moeEager(l: number, t: number, tr: Transport | undefined): void {
    if (this.moeHead(l, t, tr)) this.epEager(l, t, tr!);
  }

  /** The MoE block, its EP step through the layer's EP graph slot when the config gates it on. */
  private async moe(l: number, t: number, tr: Transport | undefined, dc: DecodeConfig): Promise<void> {
    if (!this.moeHead(l, t, tr)) return;
    // The common case allocates nothing: the slot and the timer need closures, the eager step not.
    if (!dc.epGraph && !this.epTimer) {
      this.epEager(l, t, tr!);
      return;
    }
    const eager = (): void => this.epEager(l, t, tr!);
    const step = async (): Promise<void> => {
      if (!dc.epGraph) {
        eager();
        return;
      }
      await this.epSlots.run(
        l,
        () => ({ t, ownership: this.own, builtFor: this.builtFor, validation: this.validation, missing: [] }),
        async () => {
          const g = await ParentGraph.build(this.rt, this.epParts(l, t));
          return { launch: () => g.launch(), destroy: () => g.destroy() };
        },
        eager,
      );
    };
    if (this.epTimer) await this.epTimer.around(l, step);
    else await step();
  }

  /**
   * Root's norm, router and fp8 quantization; unsharded, the experts and the merge too. Returns
   * whether the EP step (fan-out to merge) is still to run: sharded only.
   */
  private moeHead(l: number, t: number, tr: Transport | undefined): boolean {
    const { hidden: H, experts: E, topk: K } = this.cfg;
    const b0 = this.bufs[0]!,
      root = this.ops[0]!;
    const p0 = this.packAt(0, t),
      lw0 = this.weights[0]!.layers[l]!;
    root.rmsnorm(b0.a, b0.hx, lw0.g2, t, H);
    root.gemv(b0.logitsE, E, b0.a, H, lw0.wr, E, H, E, t);
    root.routeQuant(p0.ids, p0.wts, b0.logitsE, p0.xq, p0.xs, b0.xd, b0.a, t, E, K, H);
    // ids then wts, adjacent in the pack: one copy.
    if (this.validation) root.toMailbox(p0.ids, routesAt(this.cfg, this.maxBatch, l), 2 * t * K * 4);
    if (tr) return true;
    this.experts(0, l, t);
    root.moeCombine(b0.hx, p0.wts, p0.ids, b0.contrib, b0.contrib, E, t, K, H);
    return false;
  }

  // The EP step, fan-out to merge: the part seed 003 turns into one graph. Its three halves are
  // the same methods on both paths (epEager, epParts), so the graph and its eager twin cannot drift.

  /** The peer's half: dequantize what the fan-out brought, then its experts' slots. */
  private epPeer(l: number, t: number): void {
    const p1 = this.packAt(1, t);
    this.ops[1]!.dequantize(this.bufs[1]!.xd, p1.xq, p1.xs, t, this.cfg.hidden);
    this.experts(1, l, t);
  }

  /** Root merges both halves' per-slot contributions by owner, sums them and adds the residual. */
  private epPost(t: number): void {
    const { hidden: H, experts: E, topk: K } = this.cfg;
    const b0 = this.bufs[0]!,
      p0 = this.packAt(0, t);
    this.ops[0]!.moeCombine(b0.hx, p0.wts, p0.ids, b0.contrib, b0.contribPeer, E / 2, t, K, H);
  }

  /** The eager twin: the fan-out and the return through the layer's transport. */
  private epEager(l: number, t: number, tr: Transport): void {
    const { hidden: H, topk: K } = this.cfg;
    const b = this.bufs;
    const words = DeviceWalk.packWords(this.cfg, t);
    this.joinBegin('ep fan-out', l, tr, words);
    tr.broadcast(0, b[0]!.pack, this.pairs!.pack, words);
    this.joinEnd();
    this.epPeer(l, t);
    this.experts(0, l, t);
    this.joinBegin('ep return', l, tr, t * K * H);
    tr.broadcast(1, b[1]!.contrib, this.pairs!.contrib, t * K * H);
    this.joinEnd();
    this.epPost(t);
  }

  /** The EP step as the parent graph's parts: the seed's four copies (xq, xs, ids, weights) and the return. */
  private epParts(l: number, t: number): ParentGraphParts {
    const { hidden: H, topk: K } = this.cfg;
    const p0 = this.packAt(0, t),
      p1 = this.packAt(1, t);
    const keys = ['xq', 'xs', 'ids', 'wts'] as const;
    return {
      owner: () => this.experts(0, l, t),
      peer: () => this.epPeer(l, t),
      post: () => this.epPost(t),
      tx: keys.map((k, i) => {
        const end = i + 1 < keys.length ? p0[keys[i + 1]!] : p0.wts + t * K * 4;
        return { src: p0[k], dst: p1[k], bytes: end - p0[k] };
      }),
      rx: { src: this.bufs[1]!.contrib, dst: this.bufs[0]!.contribPeer, bytes: t * K * H * 4 },
    };
  }

  /** Time every layer's EP step on the device from now on (the `ep` benchmark), or stop. */
  async timeEpSteps(on: boolean): Promise<void> {
    if (on && !this.epTimer) this.epTimer = await EpStepTimer.create(this.rt, this.cfg.layers);
    if (!on && this.epTimer) {
      await this.epTimer.close();
      this.epTimer = undefined;
    }
  }

  /** Device µs of each EP step timed since the last call (after the step's tokens are back). */
  async epStepTimes(): Promise<number[]> {
    return this.epTimer ? this.epTimer.collect() : [];
  }

  /** Time each step on rank 0's stream from now on (the decode bench), or stop. */
  async timeSteps(on: boolean): Promise<void> {
    if (on && !this.stepSpans) this.stepSpans = await DeviceSpans.create(this.rt.ranks[0], 1);
    if (!on && this.stepSpans) {
      await this.stepSpans.close();
      this.stepSpans = undefined;
    }
  }

  /** Device µs of the step timed since the last call (after its tokens are back). */
  async stepDeviceUs(): Promise<number | undefined> {
    return (await this.stepSpans?.collect())?.[0]?.us;
  }

  /**
   * Time every model kernel of rank 0 alone from now on, `capacity` a step (a layer launches at
   * most 16; the decode bench's kernel table), or stop. While on, steps run eagerly.
   */
  async timeKernels(on: boolean, capacity = 16 * this.cfg.layers + 16): Promise<void> {
    if (on && !this.kernelSpans) this.kernelSpans = await DeviceSpans.create(this.rt.ranks[0], capacity);
    if (!on && this.kernelSpans) {
      await this.kernelSpans.close();
      this.kernelSpans = undefined;
    }
    this.ops[0]!.spans = this.kernelSpans;
  }

  /** Rank 0's kernels of the step timed since the last call, in stream order. */
  async kernelTimes(): Promise<Span[]> {
    return this.kernelSpans ? this.kernelSpans.collect() : [];
  }

  /**
   * Fill positions [0, upTo) of every slot's cache, every layer and rank, with `value`: the
   * decode bench times a step at a long context without decoding up to it (the attention reads
   * and computes the same whatever the rows hold). Between steps only.
   */
  fillCache(value: number, upTo: number): void {
    const { layers: L, maxPos: P, latent: R } = this.cfg;
    if (!Number.isInteger(upTo) || upTo < 0 || upTo > P)
      throw new RangeError(`fillCache: upTo must be an integer in [0, ${P}], got ${upTo}`);
    for (let r = 0; r < this.ranksUsed; r++) {
      for (let s = 0; s < this.maxBatch; s++) {
        for (let l = 0; l < L; l++)
          this.rt.ranks[r]!.fill(this.bufs[r]!.cache + (s * L + l) * P * R * 4, upTo * R, value);
      }
    }
  }

  /** Route validation: every layer's routes of this step, read from the mailbox. */
  private checkRoutes(t: number): Int32Array[] {
    const box = this.rt.mailboxes[0]!,
      K = this.cfg.topk;
    const routes: Int32Array[] = [];
    for (let l = 0; l < this.cfg.layers; l++) {
      const at = box.byteOffset + routesAt(this.cfg, this.maxBatch, l);
      const ids = new Int32Array(box.buffer.slice(at, at + t * K * 4));
      const wts = new Float32Array(box.buffer.slice(at + t * K * 4, at + 2 * t * K * 4));
      const bad = checkRoutes(ids, wts, t, K, this.cfg.experts, l);
      if (bad) throw Object.assign(new Error(bad), { code: 'ERR_ROUTE_VALIDATION' });
      routes.push(ids);
    }
    return routes;
  }

  /** Where the EP fan-out's packed payload sits in rank r's pack buffer, for t rows. */
  private packAt(r: number, t: number): { xq: number; xs: number; ids: number; wts: number } {
    const H = this.cfg.hidden,
      K = this.cfg.topk;
    const base = this.bufs[r]!.pack;
    const xs = base + t * H;
    const ids = xs + ((t * H) / 128) * 4;
    return { xq: base, xs, ids, wts: ids + t * K * 4 };
  }

  /** Rank r's experts for layer l: the slots whose expert it owns. */
  private experts(r: number, l: number, t: number): void {
    const { hidden: H, topk: K, ffn: F } = this.cfg;
    const o = this.ops[r]!,
      br = this.bufs[r]!,
      lw = this.weights[r]!.layers[l]!,
      own = this.own[r]!,
      ids = this.packAt(r, t).ids;
    o.expertUp(br.act, br.xd, ids, lw.w1, lw.w3, own.e0, own.nE, t, K, H, F);
    o.expertDown(br.contrib, br.act, ids, lw.w2, own.e0, own.nE, t, K, H, F);
  }

  /** The EP graph slots' counters and each refused layer's reason (for the profile). */
  epGraphStats(): { dispatches: number; captures: number; refused: Array<{ layer: number; reason: string }> } {
    const refused: Array<{ layer: number; reason: string }> = [];
    for (let l = 0; l < this.cfg.layers; l++) {
      const s = this.epSlots.slot(l);
      if (s.state === 'refused') refused.push({ layer: l, reason: s.reason });
    }
    return { dispatches: this.epSlots.dispatches, captures: this.epSlots.captures, refused };
  }

  /** Weight bytes per rank. */
  weightBytes(): number[] {
    return this.weights.map((w) => w.bytes);
  }

  /** Drain, then free the weights, buffers and caches. */
  async close(): Promise<void> {
    await this.epSlots.reset();
    await this.dropStepGraphs();
    await this.profiler?.close();
    await this.epTimer?.close();
    await this.timeSteps(false);
    await this.timeKernels(false);
    await DeviceWalk.release(this.rt, this.weights, this.bufs);
  }
}
