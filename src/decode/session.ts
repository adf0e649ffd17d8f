/**
 * The session: the API a user's own token loop holds. Open it (runtime, link, weights), call
 * `step(tokens)` for each batch of next tokens, change the config between steps, close it.
 *
 * Row s of a step is sequence slot s; the session tracks each slot's position, so a step carries
 * only tokens. Every argument is checked before anything is enqueued: a refused step leaves the
 * session as it was. A device barrier that refused (one rank's half of a join never ran) fails
 * its step by name, and the session drains both ranks, resets the barrier and stays usable: the
 * step may be retried. Any other failure on a device (a worker's refusal or death) closes the
 * session, and every later call says why. close() waits for a call in flight, then frees.
 */
import { Runtime, type RuntimeOptions } from '../runtime/runtime.js';
import { ArLink } from '../runtime/link.js';
import type { BackendKind } from '../runtime/device-api.js';
import { DeviceWalk, mailboxBytesFor, type StepResult } from './device-walk.js';
import { WeightLoader, type Layout, type Progress } from './device-weights.js';
import { presetByName, validateConfig, type ModelConfig } from './model-config.js';
import type { JoinTiming } from './join-profile.js';
import { DEFAULT_CONFIG, loadDecodeConfig, parseDecodeConfig, type DecodeConfig } from './decode-config.js';
import { planRun, type RunPlan } from './run-plan.js';
import { BarrierRefusal } from './barrier-watch.js';

export interface SessionOptions {
  /** A preset name (`tiny`, `small`, `bench`) or a full config. Default: `small` on CUDA, `tiny` on the CPU. */
  model?: string | ModelConfig;
  /** Default `auto`: CUDA when a device is visible, else the CPU reference. */
  backend?: 'auto' | BackendKind;
  /**
   * `sharded` over two ranks or `unsharded` on rank 0 alone (the oracle, and one GPU's layout).
   * Default: sharded where two devices are visible (or `runtime.devices` names two, or
   * `runtime.loopback`), unsharded on one GPU (run-plan.ts).
   */
  layout?: Layout;
  /** The most rows (sequences) a step may carry. Default 4, at most 8. */
  maxBatch?: number;
  /** A decode config (parsed) or the path of a JSON config file. */
  config?: DecodeConfig | string;
  /** Called while weights are generated. */
  onProgress?: Progress;
  /** Passed to Runtime.open; `devices` and `loopback` also decide the default layout. */
  runtime?: RuntimeOptions;
}

export interface StepOutput {
  /** The greedy next token of each row. */
  next: number[];
  /** t × H, the final hidden state before the final norm; only when asked for. */
  hidden?: Float32Array;
  /** Main-thread wall time of the step, ms. */
  ms: number;
  /**
   * Every join's identity and costs, when the config has `profile: true` (sharded). Settles once
   * the step's device events are read, which overlaps the next step; await it whenever convenient.
   */
  joins?: Promise<JoinTiming[]>;
  /** Host: when the step began (performance.now(), ms), enqueueing it, and until its tokens were read (µs). */
  timing: StepResult['timing'];
}

const MAX_BATCH = 8;

/** A value as an error message shows it: JSON where it has one, else its type. */
function describe(v: unknown): string {
  try {
    return JSON.stringify(v) ?? typeof v;
  } catch {
    return typeof v;
  }
}
/** Room in each CPU reference device beyond weights and activations (link buffers, staging). */
const CPU_ARENA_SLACK = 64 * 2 ** 20;

export class Session {
  private closed: Error | undefined;
  /** Set by close(), which first waits for the call in flight. */
  private closing: Promise<void> | undefined;
  /** The call that holds the devices (a step, a config change), settled or not. */
  private inflight: Promise<unknown> | undefined;
  private readonly lengths: number[];

  private constructor(
    /** The backend, layout and devices this session runs on, and why. */
    readonly plan: RunPlan,
    readonly model: ModelConfig,
    readonly maxBatch: number,
    private config: DecodeConfig,
    private readonly dev: { rt: Runtime; link: ArLink | undefined; walk: DeviceWalk },
  ) {
    this.lengths = new Array<number>(maxBatch).fill(0);
  }

  static async open(opts: SessionOptions = {}): Promise<Session> {
    const plan = planRun({
      backend: opts.backend,
      layout: opts.layout,
      devices: opts.runtime?.devices,
      loopback: opts.runtime?.loopback,
    });
    const { backend, layout } = plan;
    const model =
      typeof opts.model === 'string'
        ? presetByName(opts.model)
        : validateConfig(opts.model ?? presetByName(backend === 'cuda' ? 'small' : 'tiny'));
    const maxBatch = opts.maxBatch ?? 4;
    if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > MAX_BATCH)
      throw new RangeError(`maxBatch must be an integer in [1, ${MAX_BATCH}], got ${maxBatch}`);
    const config = Session.readConfig(opts.config, model.layers);
    const loader = new WeightLoader(model);
    const rt = await Runtime.open({
      ...opts.runtime,
      backend,
      devices: plan.devices,
      loopback: plan.loopback,
      mailboxBytes: Math.max(opts.runtime?.mailboxBytes ?? 0, mailboxBytesFor(model, maxBatch)),
      // The CPU reference's emulated devices hold the weights too: size their arenas for them.
      ...(backend === 'cpu'
        ? {
            cpuArenaBytes: Math.max(
              opts.runtime?.cpuArenaBytes ?? 0,
              loader.planBytes(layout, 0) + DeviceWalk.activationBytes(model, layout, maxBatch) + CPU_ARENA_SLACK,
            ),
          }
        : {}),
    });
    let link: ArLink | undefined;
    try {
      link = layout === 'sharded' ? await ArLink.open(rt) : undefined;
      const walk = await DeviceWalk.load(rt, link, model, layout, maxBatch, opts.onProgress);
      const s = new Session(plan, model, maxBatch, config, { rt, link, walk });
      try {
        await walk.prepare(config);
      } catch (e) {
        await s.close().catch(() => undefined);
        throw e;
      }
      return s;
    } catch (e) {
      await link?.close().catch(() => undefined);
      await rt.close().catch(() => undefined);
      throw e;
    }
  }

  private static readConfig(c: DecodeConfig | string | undefined, layers: number): DecodeConfig {
    if (c === undefined) return DEFAULT_CONFIG;
    if (typeof c === 'string') return loadDecodeConfig(c, layers);
    return parseDecodeConfig(c, 'config', layers);
  }

  get backend(): BackendKind {
    return this.plan.backend;
  }
  get layout(): Layout {
    return this.plan.layout;
  }

  /** The decode config in force. */
  get decodeConfig(): DecodeConfig {
    return this.config;
  }

  /** Replace the decode config; it applies from the next step (opens transports it names). */
  async setConfig(c: DecodeConfig | string): Promise<void> {
    this.usable('setConfig');
    const next = Session.readConfig(c, this.model.layers);
    await this.exclusive(async () => {
      try {
        await this.dev.walk.prepare(next);
        this.config = next;
      } catch (e) {
        // A transport that cannot open here (NCCL on the CPU reference, say) leaves the old config
        // in force and the session usable; only a failed device closes it.
        if (this.dev.rt.failure) await this.fail(e as Error);
        throw e;
      }
    });
  }

  /** The position slot s's next token will take. */
  position(slot: number): number {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxBatch)
      throw new RangeError(`slot must be in [0, ${this.maxBatch}), got ${slot}`);
    return this.lengths[slot]!;
  }

  /** Start slot s (every slot without an argument) over at position 0. */
  reset(slot?: number): void {
    this.usable('reset');
    if (slot === undefined) this.lengths.fill(0);
    else {
      this.position(slot);
      this.lengths[slot] = 0;
    }
  }

  /** One step: row s carries slot s's next token; returns each row's greedy next token. */
  async step(tokens: readonly number[]): Promise<number[]> {
    return (await this.stepDetailed(tokens)).next;
  }

  async stepDetailed(tokens: readonly number[], opts: { hidden?: boolean } = {}): Promise<StepOutput> {
    this.usable('step');
    const { vocab: V, maxPos: P } = this.model;
    if (!Array.isArray(tokens))
      throw new TypeError(`step: tokens must be an array of token ids, one per row, got ${describe(tokens)}`);
    const t = tokens.length;
    if (t < 1 || t > this.maxBatch)
      throw new RangeError(`step: a step carries 1 to maxBatch (${this.maxBatch}) tokens, got ${t}`);
    const positions: number[] = [];
    for (let s = 0; s < t; s++) {
      const x = tokens[s]!;
      if (!Number.isInteger(x) || x < 0 || x >= V)
        throw new RangeError(`step: row ${s}: token ${String(x)} is out of range [0, ${V})`);
      const p = this.lengths[s]!;
      if (p >= P)
        throw new RangeError(
          `step: row ${s}: slot ${s} is full: position ${p} is past the KV cache (maxPos ${P}); reset(${s}) to start it over`,
        );
      positions.push(p);
    }
    const t0 = performance.now();
    return this.exclusive(async () => {
      try {
        const { next, hidden, joins, timing } = await this.dev.walk.step(
          tokens,
          positions,
          this.config,
          opts.hidden === true,
        );
        for (let s = 0; s < t; s++) this.lengths[s]!++;
        const out: StepOutput = { next, ms: performance.now() - t0, timing };
        if (hidden) out.hidden = hidden;
        if (joins) out.joins = joins;
        return out;
      } catch (e) {
        if (e instanceof BarrierRefusal && !this.dev.rt.failure) throw await this.recover(e);
        await this.fail(e as Error);
        throw e;
      }
    });
  }

  /**
   * After a barrier refusal the ranks' barrier epochs disagree: drain both, zero every flag, epoch
   * and refusal word, and hand back the refusal saying so. The positions did not advance, so a
   * retried step rewrites the cache rows this one wrote. A reset that fails closes the session.
   */
  private async recover(e: BarrierRefusal): Promise<Error> {
    try {
      await this.dev.link!.resetBarrier();
    } catch (r) {
      await this.fail(r as Error);
      return new Error(
        `${e.message}; resetting the barrier failed, so the session is closed: ${(r as Error).message}`,
        {
          cause: e,
        },
      );
    }
    return new BarrierRefusal(
      e.words,
      e.spinTicks,
      'both ranks were drained and the barrier reset: the session is usable, and the step may be retried',
    );
  }

  /** Run a call that holds the devices; close() waits for it. */
  private async exclusive<T>(body: () => Promise<T>): Promise<T> {
    const run = body();
    this.inflight = run;
    try {
      return await run;
    } finally {
      this.inflight = undefined;
    }
  }

  private usable(call: string): void {
    if (this.closed) throw new Error(`${call}: the session is closed (${this.closed.message})`);
    if (this.closing) throw new Error(`${call}: the session is closing (close() was called)`);
    if (this.inflight)
      throw new Error(`${call}: the previous call has not finished; await it first (one step at a time)`);
  }

  private async fail(e: Error): Promise<void> {
    if (this.closed) return;
    await this.shutdown(e);
  }

  private async shutdown(why: Error): Promise<void> {
    this.closed = why;
    const { rt, link, walk } = this.dev;
    await walk.close().catch(() => undefined);
    await link?.close().catch(() => undefined);
    await rt.close().catch(() => undefined);
  }

  /**
   * Free everything; later calls say the session is closed. A step (or config change) in flight
   * runs to its end first, so nothing is freed under a kernel that still reads or writes it.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.inflight?.catch(() => undefined);
      if (!this.closed) await this.shutdown(new Error('closed by close()'));
    })();
    return this.closing;
  }

  /**
   * The EP graph slots (config `epGraph: true`): graph launches so far (layers × tokens when every
   * layer runs its graph), capture attempts, and each latched refusal with its reason.
   */
  epGraph(): { dispatches: number; captures: number; refused: Array<{ layer: number; reason: string }> } {
    return this.dev.walk.epGraphStats();
  }

  /** Device bytes of weights per rank, for reports. */
  weightBytes(): number[] {
    return this.dev.walk.weightBytes();
  }

  /** The step graphs (config `stepGraph`): launches, capture attempts, and each batch size's refusal. */
  stepGraph(): ReturnType<DeviceWalk['stepGraphStats']> {
    return this.dev.walk.stepGraphStats();
  }

  /** Per rank, the LL server's jobs and grid launches so far (config `llServeMicros`); none unsharded. */
  llServeStats(): Promise<Array<{ jobs: number; launches: number }>> {
    return this.dev.link ? this.dev.link.llServeStats() : Promise.resolve([]);
  }

  /** The runtime, for profiling and benchmarks. */
  get runtime(): Runtime {
    return this.dev.rt;
  }
}
