/**
 * The decode walk on the devices (one GPU, two GPUs or two ranks on one in loopback, or the CPU
 * reference's emulated devices): one step enqueued whole (every layer, every hop, every rank) as
 * ring records, then one read-back of the next tokens through rank 0's mailbox.
 *
 * Which rank computes what, and the joins between, is a walk's (layer-walk.ts): unsharded
 * (unsharded-walk.ts: rank 0 alone, the oracle and the layout of one GPU), and for the sharded
 * layout the config's `walk`: `seed` (seed-walk.ts: root-centred, five joins a layer) or
 * `replicated` (replicated-walk.ts: both ranks hold h, three joins a layer). Both sharded walks are
 * bit-identical to the unsharded one (their `wo: "allreduce"` variant within rounding). The walks share the layer's pieces (layer-pieces.ts), the
 * hops (walk-joins.ts) and the buffers (walk-buffers.ts); this module loads them, prepares a
 * config, and enqueues and reads back a step, eagerly or from its step graph (step-graphs.ts).
 */
import { ptrAdd } from '../runtime/binding.js';
import type { Runtime } from '../runtime/runtime.js';
import type { ArLink } from '../runtime/link.js';
import type { Transport, TransportName } from '../runtime/transports/transport.js';
import { openTransport } from '../runtime/transports/open.js';
import type { ModelConfig } from './model-config.js';
import { ModelOps } from './model-ops.js';
import { ownership, WeightLoader, type Layout, type Progress, type RankWeights } from './device-weights.js';
import { transportForLayer, type DecodeConfig } from './decode-config.js';
import { JoinProfiler, profileSwitches, type JoinTiming, type ProfileSwitches } from './join-profile.js';
import { checkRoutes } from './route-check.js';
import { EpStepTimer } from './ep-step-timer.js';
import { DeviceSpans, type Span } from './device-spans.js';
import { allocBuffers, freeBuffers, largestJoin, type Buffers } from './walk-buffers.js';
import { HIDDEN_AT, refusalAt, routesAt, stampsAt } from './walk-mailbox.js';
import { BarrierWatch, waitsOnDevice } from './barrier-watch.js';
import { LayerPieces } from './layer-pieces.js';
import { WalkJoins } from './walk-joins.js';
import type { LayerWalk } from './layer-walk.js';
import { UnshardedWalk } from './unsharded-walk.js';
import { SeedWalk } from './seed-walk.js';
import { ReplicatedWalk } from './replicated-walk.js';
import { StepGraphs } from './step-graphs.js';

export { HIDDEN_AT, mailboxBytesFor } from './walk-mailbox.js';

/** The completion counter a step's last record advances on rank 0 (rank 1's PROFILE_SLOT is 1). */
const STEP_SLOT = 0;

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
  private readonly pieces: LayerPieces;
  /** The two-rank walks and their hops (sharded only). */
  private readonly joins: WalkJoins | undefined;
  private readonly seed: SeedWalk | undefined;
  private readonly replicated: ReplicatedWalk | undefined;
  private readonly unsharded: UnshardedWalk | undefined;
  private readonly transports = new Map<TransportName, Transport>();
  private readonly stepGraphs: StepGraphs;
  private stepSeq = 0;
  private override: Transport | undefined;
  /** Handed to every profiler this walk makes, so a switch outlives prepare() turning profiling off. */
  readonly profileSwitches: ProfileSwitches = profileSwitches();
  /** The config the EP graphs were captured under: a different one empties the slots. */
  private epConfigKey = '';
  private epTimer: EpStepTimer | undefined;
  /** When set, each step's device time on rank 0, from its first record to its last (timeSteps). */
  private stepSpans: DeviceSpans | undefined;
  /** When set, every model kernel of rank 0 is timed alone (timeKernels); the walk runs eagerly. */
  private kernelSpans: DeviceSpans | undefined;
  /** The last step's rows and walk (residuals()). */
  private last: { t: number; walk: LayerWalk } | undefined;
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
    const ranks = layout === 'sharded' ? rt.pair('the sharded walk') : [rt.ranks[0]];
    const ops = ranks.map((r) => new ModelOps(r));
    const own = ranks.map((_, r) => ownership(cfg, layout, r));
    this.pieces = new LayerPieces(cfg, maxBatch, ops, bufs, weights, own);
    if (layout === 'sharded') {
      this.joins = new WalkJoins(cfg, maxBatch, [bufs[0]!, bufs[1]!]);
      this.seed = new SeedWalk(rt, this.pieces, this.joins);
      this.replicated = new ReplicatedWalk(this.pieces, this.joins);
    } else {
      this.unsharded = new UnshardedWalk(this.pieces);
    }
    this.stepGraphs = new StepGraphs(rt, layout !== 'sharded');
    this.barriers = link ? new BarrierWatch(rt, link, refusalAt(cfg, maxBatch)) : undefined;
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
      for (let r = 0; r < n; r++) bufs.push(await allocBuffers(rt.ranks[r]!, cfg, layout, maxBatch));
      if (link) await link.reserve(largestJoin(cfg, maxBatch));
      return new DeviceWalk(rt, link, cfg, layout, maxBatch, loader, weights, bufs);
    } catch (e) {
      await DeviceWalk.release(rt, weights, bufs);
      throw e;
    }
  }

  private static async release(rt: Runtime, weights: RankWeights[], bufs: Buffers[]): Promise<void> {
    for (const w of weights) await WeightLoader.free(rt.ranks[w.rank]!, w).catch(() => undefined);
    for (let r = 0; r < bufs.length; r++) await freeBuffers(rt.ranks[r]!, bufs[r]!);
  }

  /**
   * Open (once) every transport the config names, and generate on first use what its walk and
   * `wo` variant need that the load did not (Wo's rows for `allreduce`; rank 1's embedding and
   * routing for the replicated walk). Between steps only. `everyLayer` replaces the config's
   * transports (benchmarks: a transport that moves nothing times the walk without its joins).
   */
  async prepare(dc: DecodeConfig, everyLayer?: Transport): Promise<void> {
    const sharded = this.layout === 'sharded';
    const names = Array.from({ length: this.cfg.layers }, (_, l) => transportForLayer(dc, l));
    // A step graph holds the walk, every layer's transport and the wo variant: another config needs new ones.
    await this.stepGraphs.configure(
      JSON.stringify({
        walk: sharded ? dc.walk : null,
        t: names,
        wo: dc.wo,
        on: dc.stepGraph,
        o: everyLayer?.name ?? null,
      }),
    );
    if (!sharded) return;
    this.override = everyLayer;
    for (const name of everyLayer ? [] : new Set(names)) {
      if (!this.transports.has(name)) this.transports.set(name, await openTransport(name, this.link!));
    }
    if (dc.wo === 'allreduce') {
      await Promise.all([0, 1].map((r) => this.loader.loadWoRows(this.rt.ranks[r]!, this.layout, this.weights[r]!)));
    }
    if (dc.walk === 'replicated') await this.loader.loadRouting(this.rt.ranks[1]!, this.weights[1]!);
    const joins = this.joins!;
    if (dc.profile && !joins.profiler) {
      joins.profiler = await JoinProfiler.create(this.rt, this.cfg.layers, {
        switches: this.profileSwitches,
        mailbox: {
          offset: stampsAt(this.cfg, this.maxBatch),
          copy: (rank: number, src: number, offset: number, bytes: number): void => {
            this.pieces.ops[rank]!.toMailbox(src, offset, bytes);
          },
        },
      });
    }
    // Off means off: the workers stop stamping their records once the board is gone. The step
    // graphs that hold the profiler's events go first (a replay would record destroyed events).
    if (!dc.profile && joins.profiler) {
      await this.stepGraphs.drop(true);
      await joins.profiler.close();
      joins.profiler = undefined;
    }
    // A captured EP step holds its layer's transport: a new transport mapping or gate empties
    // the slots (and lifts latched refusals, whose reasons may no longer hold).
    const key = JSON.stringify({ t: names, g: dc.epGraph, o: everyLayer !== undefined });
    if (key !== this.epConfigKey) {
      await this.seed!.resetEpGraphs();
      this.epConfigKey = key;
    }
    await this.link!.setSpinLimit(dc.spin.deviceTicks);
    if (this.link!.llServeIdleMicros !== dc.llServeMicros) await this.link!.setLlServe(dc.llServeMicros);
  }

  /** The walk a step under `dc` takes. */
  private walkFor(dc: DecodeConfig): LayerWalk {
    return this.unsharded ?? (dc.walk === 'replicated' ? this.replicated! : this.seed!);
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
    const profiler = dc.profile ? this.joins?.profiler : undefined;
    if (this.joins) {
      this.joins.profiling = profiler !== undefined;
      this.joins.token = positions[0]!;
    }
    this.pieces.validation = dc.validate;
    if (profiler) await profiler.beginStep();
    const t = tokens.length;
    const H = this.cfg.hidden;
    const b0 = this.bufs[0]!,
      root = this.pieces.ops[0]!;
    const walk = this.walkFor(dc);
    const trs = this.transportsFor(dc);
    // Tokens and positions are the step's only inputs from the host, written before the body:
    // everything after reads them from device memory, so a captured body replays any step.
    this.stepSpans?.begin();
    walk.inputs(tokens, positions);
    if (dc.stepGraph && !dc.validate && !this.epTimer && !this.kernelSpans) {
      const body = (): void => this.graphBody(walk, t, trs, dc, profiler);
      // The attention's P is part of the graph: a step past the one-kernel bound needs the other.
      const shape = this.pieces.attendPositions < this.cfg.maxPos ? `p<${this.pieces.attendPositions}` : '';
      await this.stepGraphs.run(t, shape, trs, body, profiler, this.joins?.token ?? 0);
    } else {
      walk.embed(t);
      for (let l = 0; l < this.cfg.layers; l++) {
        const pending = walk.layer(l, t, trs[l], dc);
        if (pending) await pending;
      }
      this.tail(t, walk);
      profiler?.flush();
    }
    if (profiler) profiler.copyStamps();
    const refusals = this.barriers && waitsOnDevice(trs) ? this.barriers.copy(this.pieces.ops) : undefined;
    root.toMailbox(b0.tokOut, 0, 4 * t);
    if (wantHidden) root.toMailbox(b0.hAndPositions, HIDDEN_AT, 4 * t * H);
    this.stepSpans?.end('step');
    const seq = ++this.stepSeq;
    root.rank.signal(STEP_SLOT, seq);
    this.last = { t, walk };
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
    if (profiler) out.joins = profiler.endStep();
    if (refusals !== undefined) {
      // The profile's read of this step settles on its own; nobody will await it if this throws.
      await this.barriers!.check(refusals, timeoutMs).catch((e: unknown) => {
        out.joins?.catch(() => undefined);
        throw e;
      });
    }
    if (dc.validate) out.routes = this.checkRoutes(t);
    return out;
  }

  /** The step from the embedding to the greedy pick, as a step graph captures it: no layer may defer. */
  private graphBody(
    walk: LayerWalk,
    t: number,
    trs: ReadonlyArray<Transport | undefined>,
    dc: DecodeConfig,
    profiler: JoinProfiler | undefined,
  ): void {
    walk.embed(t);
    for (let l = 0; l < this.cfg.layers; l++) {
      // The config keeps epGraph off with stepGraph, and a timed EP step runs eagerly.
      if (walk.layer(l, t, trs[l], dc))
        throw new Error(`step graph: layer ${l} deferred its EP step, which a capture cannot hold`);
    }
    this.tail(t, walk);
    profiler?.flush();
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

  /** The final norm (unless the walk's last merge made it), the logits and the greedy pick, into tokOut (root's). */
  private tail(t: number, walk: LayerWalk): void {
    const { hidden: H, vocab: V } = this.cfg;
    const b0 = this.bufs[0]!,
      w0 = this.weights[0]!,
      root = this.pieces.ops[0]!;
    if (!walk.finalNormInMerge) root.rmsnorm(b0.fin, b0.hAndPositions, w0.gf, t, H);
    root.gemv(b0.logitsV, V, b0.fin, H, w0.wvocab, V, H, V, t);
    root.argmax(b0.tokOut, b0.logitsV, t, V);
  }

  /**
   * Each rank's h after the last step (t × H), for the ranks whose walk keeps it: rank 0, and in
   * the replicated walk rank 1 too, which must hold the same bits. Between steps (it drains).
   */
  async residuals(): Promise<Float32Array[]> {
    if (!this.last) throw new Error('residuals: no step has run yet');
    const { t, walk } = this.last;
    const ranks = Array.from({ length: walk.holders }, (_, r) => r);
    return Promise.all(
      ranks.map((r) => this.rt.ranks[r]!.downloadF32(this.bufs[r]!.hAndPositions, t * this.cfg.hidden)),
    );
  }

  /** The step graphs' counters and each batch size's refusal (for the profile and the CLI). */
  stepGraphStats(): { launches: number; captures: number; refused: Array<{ t: number; reason: string }> } {
    return this.stepGraphs.stats();
  }

  /** Time every layer's EP step on the device from now on (the `ep` benchmark), or stop. */
  async timeEpSteps(on: boolean): Promise<void> {
    if (on && !this.epTimer) this.epTimer = await EpStepTimer.create(this.rt, this.cfg.layers);
    if (!on && this.epTimer) {
      await this.epTimer.close();
      this.epTimer = undefined;
    }
    if (this.seed) this.seed.epTimer = this.epTimer;
    if (this.replicated) this.replicated.epTimer = this.epTimer;
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
    this.pieces.ops[0]!.spans = this.kernelSpans;
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
          this.rt.ranks[r]!.fill(ptrAdd(this.bufs[r]!.cache, (s * L + l) * P * R * 4), upTo * R, value);
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

  /** The EP graph slots' counters and each refused layer's reason (the seed walk's; none unsharded). */
  epGraphStats(): { dispatches: number; captures: number; refused: Array<{ layer: number; reason: string }> } {
    return this.seed?.epGraphStats() ?? { dispatches: 0, captures: 0, refused: [] };
  }

  /** Weight bytes per rank. */
  weightBytes(): number[] {
    return this.weights.map((w) => w.bytes);
  }

  /** Drain, then free the weights, buffers and caches. */
  async close(): Promise<void> {
    await this.seed?.resetEpGraphs();
    await this.stepGraphs.drop();
    await this.joins?.profiler?.close();
    await this.epTimer?.close();
    await this.timeSteps(false);
    await this.timeKernels(false);
    await DeviceWalk.release(this.rt, this.weights, this.bufs);
  }
}
