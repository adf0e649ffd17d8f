/**
 * The session: the API a user's own token loop holds. Open it (runtime, link, weights), call
 * `step(tokens)` for each batch of next tokens, change the config between steps, close it.
 *
 * Row s of a step is sequence slot s; the session tracks each slot's position, so a step carries
 * only tokens. Every argument is checked, by type and then by range (src/api/check.ts), before
 * anything is enqueued: a refused call leaves the session as it was and usable. A device barrier
 * that refused (one rank's half of a join never ran) fails its step by name, and the session
 * drains both ranks, resets the barrier and stays usable: the step may be retried. Any other
 * failure on a device (a worker's refusal or death) closes the session, and every later call
 * says why. close() waits for a call in flight, then frees.
 */
import { Runtime, RUNTIME_OPTIONS, type RuntimeOptions } from '../runtime/runtime.js';
import { ArLink } from '../runtime/link.js';
import type { BackendKind } from '../runtime/device-api.js';
import { holdOpen } from '../runtime/exit-guard.js';
import {
  boolean,
  describe,
  func,
  integer,
  isPlainObject,
  oneOf,
  options,
  tokenRows,
  type Check,
} from '../api/check.js';
import { InvalidArgTypeError, InvalidArgValueError, SessionStateError } from '../api/errors.js';
import { DeviceWalk, mailboxBytesFor, type StepResult } from './device-walk.js';
import { LAYOUTS, type Layout, type Progress } from './device-weights.js';
import {
  modelConfigJson,
  modelName,
  modelOption,
  presetByName,
  type ModelConfig,
  type ModelConfigJson,
  type PresetName,
} from './model-config.js';
import type { JoinTiming } from './join-profile.js';
import {
  DEFAULT_CONFIG,
  loadDecodeConfig,
  parseDecodeConfig,
  type ConfigModel,
  type DecodeConfig,
  type DecodeConfigPatch,
} from './decode-config.js';
import { bytesPerDevice, checkFits } from './device-fit.js';
import { planRun, type RunPlan } from './run-plan.js';
import { BarrierRefusal } from './barrier-watch.js';

export interface SessionOptions {
  /** A preset name (`tiny`, `small`, `bench`) or a whole config. Default: `small` on CUDA, `tiny` on the CPU. */
  model?: PresetName | ModelConfig;
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
  /**
   * A decode config, whole or in part (laid over the defaults), or the path of a JSON config
   * file: found against the working directory, then among memra's own bench/configs/.
   */
  config?: DecodeConfigPatch | string;
  /** Called while weights are generated. */
  onProgress?: Progress;
  /** Passed to Runtime.open; `devices` and `loopback` also decide the default layout. */
  runtime?: RuntimeOptions;
}

export interface StepOptions {
  /** Also return the final hidden state (`StepOutput.hidden`). Default false. */
  hidden?: boolean;
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
  timing: StepTiming;
}

export type StepTiming = StepResult['timing'];

/** The session's model: a ModelConfig whose JSON form carries the u64 seed as a decimal string. */
export type SessionModel = ModelConfig & { toJSON(): ModelConfigJson };

const MAX_BATCH = 8;

/** A config option: a file's path or a config object (its fields are checked when parsed). */
const configOption: Check<DecodeConfigPatch | string> = (v, at) => {
  if (typeof v !== 'string' && !isPlainObject(v))
    throw new InvalidArgTypeError(
      `${at} must be a config object or the path of a JSON config file, got ${describe(v)}`,
    );
  return v as DecodeConfigPatch | string;
};

const SESSION_OPTIONS = options<SessionOptions>({
  model: modelOption,
  backend: oneOf(['auto', 'cuda', 'cpu']),
  layout: oneOf(LAYOUTS),
  maxBatch: integer(1, MAX_BATCH),
  config: configOption,
  onProgress: func<Progress>(),
  runtime: RUNTIME_OPTIONS,
});

const STEP_OPTIONS = options<StepOptions>({ hidden: boolean });

function sessionModel(cfg: ModelConfig): SessionModel {
  const m = { ...cfg };
  Object.defineProperty(m, 'toJSON', { value: () => modelConfigJson(cfg), enumerable: false });
  return Object.freeze(m) as SessionModel;
}

export class Session {
  private closed: Error | undefined;
  /** Set by close(), which first waits for the call in flight. */
  private closing: Promise<void> | undefined;
  /** The call that holds the devices (a step, a config change, a read-back), settled or not. */
  private inflight: Promise<unknown> | undefined;
  private readonly lengths: number[];
  private readonly slotCheck: Check<number>;
  readonly model: SessionModel;
  /** Ends the exit guard's hold (runtime/exit-guard.ts), once closed. */
  private release: () => void = () => undefined;

  private constructor(
    /** The backend, layout and devices the session runs on, and why. */
    readonly plan: RunPlan,
    model: ModelConfig,
    readonly maxBatch: number,
    private config: DecodeConfig,
    private readonly dev: { rt: Runtime; link: ArLink | undefined; walk: DeviceWalk },
  ) {
    this.model = sessionModel(model);
    this.lengths = new Array<number>(maxBatch).fill(0);
    this.slotCheck = integer(0, maxBatch - 1);
  }

  /**
   * Checks every option (by type, then range, unknown keys refused), that the model fits the
   * backend's devices and the config fits the model, before anything is started; then opens the
   * runtime, the link and the weights. `await using session = await Session.open(...)` closes it
   * at the end of the block.
   */
  static async open(opts: SessionOptions = {}): Promise<Session> {
    SESSION_OPTIONS(opts, 'SessionOptions');
    const plan = planRun({
      backend: opts.backend,
      layout: opts.layout,
      devices: opts.runtime?.devices,
      loopback: opts.runtime?.loopback,
    });
    const { backend, layout } = plan;
    const model =
      opts.model === undefined
        ? presetByName(backend === 'cuda' ? 'small' : 'tiny')
        : modelOption(opts.model, 'SessionOptions.model');
    const maxBatch = opts.maxBatch ?? 4;
    const config = Session.readConfig(opts.config, 'SessionOptions.config', Session.against(model), DEFAULT_CONFIG);
    checkFits(model, layout, maxBatch, backend, plan.devices, plan.loopback);
    const rt = await Runtime.open({
      ...opts.runtime,
      backend,
      devices: plan.devices,
      loopback: plan.loopback,
      mailboxBytes: Math.max(opts.runtime?.mailboxBytes ?? 0, mailboxBytesFor(model, maxBatch)),
      // The CPU reference's emulated devices hold the weights too: size their arenas for them.
      ...(backend === 'cpu'
        ? { cpuArenaBytes: Math.max(opts.runtime?.cpuArenaBytes ?? 0, bytesPerDevice(model, layout, maxBatch, 'cpu')) }
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
      s.release = holdOpen(
        `a session (${backend}, model ${modelName(model)}, ${layout}${plan.loopback ? ', loopback' : ''})`,
        () => s.close(),
      );
      return s;
    } catch (e) {
      await link?.close().catch(() => undefined);
      await rt.close().catch(() => undefined);
      throw e;
    }
  }

  private static against(model: ModelConfig): ConfigModel {
    return { name: modelName(model), layers: model.layers };
  }

  /** A config option (a file's path or a patch) laid over `base`. */
  private static readConfig(
    c: DecodeConfigPatch | string | undefined,
    at: string,
    model: ConfigModel,
    base: DecodeConfig,
  ): DecodeConfig {
    if (c === undefined) return base;
    if (typeof c === 'string') return loadDecodeConfig(c, { model, base });
    return parseDecodeConfig(c, { source: at, model, base });
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

  /**
   * Change the decode config from the next step: `c`'s fields (an object, or a JSON file's) are
   * laid over the config in force, so `setConfig({ profile: true })` changes `profile` alone; a
   * list (`transport.layers`) is replaced whole. Opens the transports it names. A config that is
   * refused (a bad field, a transport this backend cannot open) leaves the old one in force.
   */
  async setConfig(c: DecodeConfigPatch | string): Promise<void> {
    this.usable('setConfig');
    configOption(c, 'setConfig: config');
    const next = Session.readConfig(c, 'setConfig: config', Session.against(this.model), this.config);
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

  private slot(call: string, slot: unknown): number {
    return this.slotCheck(slot, `${call}: slot`);
  }

  /** The position slot s's next token will take. */
  position(slot: number): number {
    return this.lengths[this.slot('position', slot)]!;
  }

  /** Start slot s (every slot without an argument) over at position 0. */
  reset(slot?: number): void {
    this.usable('reset');
    if (slot === undefined) this.lengths.fill(0);
    else this.lengths[this.slot('reset', slot)] = 0;
  }

  /** One step: row s carries slot s's next token; returns each row's greedy next token. */
  async step(tokens: readonly number[]): Promise<number[]> {
    return (await this.run('step', tokens, {})).next;
  }

  /** One step, with its timing, the joins' profile (config `profile`) and, if asked, the hidden state. */
  async stepDetailed(tokens: readonly number[], opts: StepOptions = {}): Promise<StepOutput> {
    return this.run('stepDetailed', tokens, opts);
  }

  private async run(call: string, tokens: unknown, opts: StepOptions): Promise<StepOutput> {
    this.usable(call);
    const rows = tokenRows(call, tokens, this.maxBatch, this.model.vocab);
    STEP_OPTIONS(opts, `${call}: options`);
    const P = this.model.maxPos;
    const positions: number[] = [];
    for (let s = 0; s < rows.length; s++) {
      const p = this.lengths[s]!;
      if (p >= P)
        throw new InvalidArgValueError(
          `${call}: row ${s}: slot ${s} is full: position ${p} is past the KV cache (maxPos ${P}); reset(${s}) to start it over`,
          { code: 'ERR_SLOT_FULL' },
        );
      positions.push(p);
    }
    const t0 = performance.now();
    return this.exclusive(async () => {
      try {
        const { next, hidden, joins, timing } = await this.dev.walk.step(
          rows,
          positions,
          this.config,
          opts.hidden === true,
        );
        for (let s = 0; s < rows.length; s++) this.lengths[s]!++;
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
      e.halves,
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
    if (this.closed)
      throw new SessionStateError(`${call}: the session is closed (${this.closed.message})`, 'ERR_SESSION_CLOSED');
    if (this.closing)
      throw new SessionStateError(`${call}: the session is closing (close() was called)`, 'ERR_SESSION_CLOSED');
    if (this.inflight)
      throw new SessionStateError(
        `${call}: the previous call has not finished; await it first (one step at a time)`,
        'ERR_SESSION_BUSY',
      );
  }

  private async fail(e: Error): Promise<void> {
    if (this.closed) return;
    await this.shutdown(e);
  }

  private async shutdown(why: Error): Promise<void> {
    this.closed = why;
    this.release();
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

  /** `await using session = await Session.open(...)` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * The EP graph slots (config `epGraph: true`): graph launches so far (layers × tokens when every
   * layer runs its graph), capture attempts, and each latched refusal with its reason.
   */
  epGraph(): { dispatches: number; captures: number; refused: Array<{ layer: number; reason: string }> } {
    return this.dev.walk.epGraphStats();
  }

  /**
   * Each rank's copy of the residual stream h after the last step (t × H floats each), for the
   * ranks that keep one: rank 0, and in the replicated walk rank 1 too, which must hold the same
   * bits. It drains the devices: for checks, not the token loop.
   */
  async residuals(): Promise<Float32Array[]> {
    this.usable('residuals');
    return this.exclusive(() => this.dev.walk.residuals());
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
