/**
 * The decode config file (JSON): the walk, which transport each layer's joins use, the `wo`
 * variant, the EP graph gate, the step graph, route validation, profiling, the LL server and the
 * spin bounds. Validation is total and names the JSON path of anything wrong and what is allowed
 * there, because a config is written by hand.
 *
 * ```json
 * {
 *   "walk": "seed",
 *   "transport": { "default": "ll", "layers": [{ "from": 0, "to": 9, "transport": "oneshot" }] },
 *   "wo": "concat",
 *   "epGraph": false,
 *   "stepGraph": false,
 *   "validate": false,
 *   "profile": false,
 *   "llServeMicros": 0,
 *   "spin": { "hostMicros": 200, "deviceTicks": 2000000000, "handshakeTimeoutMs": 5000 }
 * }
 * ```
 * Every field is optional; ranges are inclusive, later ranges win where they overlap. A config
 * (file or object) is a patch: its fields are laid over a base, the defaults when a session opens
 * and the config in force when `setConfig` changes it. Objects merge field by field (`spin`,
 * `transport`); a list (`transport.layers`) is replaced whole.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { TRANSPORTS, type TransportName } from '../runtime/transports/transport.js';
import { describe } from '../api/check.js';
import { MemraError } from '../api/errors.js';
import { packageRoot } from '../package-root.js';

export type WoVariant = 'concat' | 'allreduce';
export const WO_VARIANTS: readonly WoVariant[] = ['concat', 'allreduce'];

/** The sharded layout's two walks (seed-walk.ts, replicated-walk.ts). */
export type WalkName = 'seed' | 'replicated';
export const WALKS: readonly WalkName[] = ['seed', 'replicated'];

export interface LayerRange {
  from: number;
  to: number;
  transport: TransportName;
}

export interface DecodeConfig {
  /**
   * The sharded layout's walk: `seed`, root-centred (rank 0 adds the residual, routes and fans
   * out; five joins a layer), or `replicated` (both ranks hold h and route themselves; three
   * joins a layer). Both are bit-identical to the unsharded walk. Unsharded, there is one walk.
   */
  walk: WalkName;
  transport: { default: TransportName; layers: LayerRange[] };
  /** `concat`: column-parallel Wo parts gathered onto root (bit-identical); `allreduce`: partial sums reduced. */
  wo: WoVariant;
  /** Use the seed walk's EP step's multi-device graph where its guards allow it. */
  epGraph: boolean;
  /**
   * Capture each batch size's whole step (embedding to argmax, every layer and join) once, per
   * rank where the transports allow it, and replay it: one ring record per rank a step instead of
   * hundreds. Steps that profile or validate run eagerly. Exclusive with `epGraph`, whose graph
   * would sit inside this one.
   */
  stepGraph: boolean;
  /**
   * Route validation: every MoE layer's routed expert ids and weights come back with the step's
   * tokens and are checked on the host (ids distinct and in range, weights a descending softmax).
   * It reads state the EP graph keeps inside, so the graph's guard refuses while it is on.
   */
  validate: boolean;
  profile: boolean;
  /**
   * Eager `ll` joins of up to 32 KB through each rank's LL server, its grid stopping after this
   * many microseconds idle; 0 launches every join. It halves the host's cost of a join but costs
   * the stream ~6 us per join that other work follows, which this walk does after every join:
   * off by default (src/runtime/link.ts, `llServeIdleMicros`, has the figures).
   */
  llServeMicros: number;
  spin: { hostMicros: number; deviceTicks: number; handshakeTimeoutMs: number };
}

export const DEFAULT_CONFIG: DecodeConfig = {
  walk: 'seed',
  transport: { default: 'll', layers: [] },
  wo: 'concat',
  epGraph: false,
  stepGraph: false,
  validate: false,
  profile: false,
  llServeMicros: 0,
  spin: { hostMicros: 200, deviceTicks: 2_000_000_000, handshakeTimeoutMs: 5000 },
};

/** A config's fields, each optional at every depth; lists are given whole. */
export type DeepPartial<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { [K in keyof T]?: DeepPartial<T[K]> }
    : T;

/** What `Session.open` and `setConfig` take: any part of a config, laid over a base. */
export type DecodeConfigPatch = DeepPartial<DecodeConfig>;

/** The model a config is checked against: its layers bound the layer ranges. */
export interface ConfigModel {
  name: string;
  layers: number;
}

export class ConfigError extends MemraError<'ERR_CONFIG'> {
  constructor(
    /** The file, or the call the config object was given to. */
    readonly source: string,
    /** The JSON path of the field at fault (`$` for the whole config). */
    readonly path: string,
    message: string,
    readonly model?: ConfigModel,
  ) {
    super(
      `${source}${model ? ` (checked against model ${model.name}, ${model.layers} layers)` : ''}: ${path}: ${message}`,
      'ERR_CONFIG',
    );
  }
}

type Json = unknown;

function isObject(v: Json): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// JSON where the value is JSON (so "2" shows it is a string); a bigint or a function as such.
const show = (v: Json): string =>
  typeof v === 'bigint' || typeof v === 'function' || typeof v === 'symbol'
    ? describe(v)
    : (JSON.stringify(v) ?? String(v));

class Reader {
  constructor(
    private readonly source: string,
    private readonly model: ConfigModel | undefined,
  ) {}

  fail(path: string, message: string): never {
    throw new ConfigError(this.source, path, message, this.model);
  }

  object(v: Json, path: string, keys: readonly string[]): Record<string, Json> {
    if (!isObject(v)) this.fail(path, `must be an object, got ${show(v)}`);
    for (const k of Object.keys(v)) {
      if (!keys.includes(k)) this.fail(`${path}.${k}`, `unknown field; allowed: ${keys.join(', ')}`);
    }
    return v;
  }

  choice<T extends string>(v: Json, path: string, allowed: readonly T[]): T {
    if (typeof v !== 'string' || !allowed.includes(v as T))
      this.fail(path, `must be one of ${allowed.join(', ')}, got ${show(v)}`);
    return v as T;
  }

  bool(v: Json, path: string): boolean {
    if (typeof v !== 'boolean') this.fail(path, `must be true or false, got ${show(v)}`);
    return v;
  }

  int(v: Json, path: string, lo: number, hi: number): number {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi)
      this.fail(path, `must be an integer in [${lo}, ${hi}], got ${show(v)}`);
    return v;
  }
}

export interface ParseOptions {
  /** The file or call the config came from, for messages. Default `config`. */
  source?: string;
  /** The model it is for: a layer range outside the model is an error, not silently ignored. */
  model?: ConfigModel;
  /** What the config's fields are laid over. Default DEFAULT_CONFIG. */
  base?: DecodeConfig;
}

/** Validate a parsed config (a patch) and lay it over `base`; returns a new, whole config. */
export function parseDecodeConfig(json: Json, opts: ParseOptions = {}): DecodeConfig {
  const { model } = opts;
  const r = new Reader(opts.source ?? 'config', model);
  const top = r.object(json, '$', [
    'walk',
    'transport',
    'wo',
    'epGraph',
    'stepGraph',
    'validate',
    'profile',
    'llServeMicros',
    'spin',
  ]);
  const cfg: DecodeConfig = structuredClone(opts.base ?? DEFAULT_CONFIG);
  if (top.transport !== undefined) {
    const t = r.object(top.transport, '$.transport', ['default', 'layers']);
    if (t.default !== undefined) cfg.transport.default = r.choice(t.default, '$.transport.default', TRANSPORTS);
    if (t.layers !== undefined) {
      const list = t.layers;
      if (!Array.isArray(list))
        r.fail('$.transport.layers', `must be an array of { from, to, transport }, got ${show(list)}`);
      const maxLayer = model === undefined ? Number.MAX_SAFE_INTEGER : model.layers - 1;
      cfg.transport.layers = (list as Json[]).map((item: Json, i: number) => {
        const path = `$.transport.layers[${i}]`;
        const o = r.object(item, path, ['from', 'to', 'transport']);
        const from = r.int(o.from, `${path}.from`, 0, maxLayer);
        const to = r.int(o.to, `${path}.to`, 0, maxLayer);
        if (to < from) r.fail(`${path}.to`, `must be >= from (${from}), got ${to}`);
        return { from, to, transport: r.choice(o.transport, `${path}.transport`, TRANSPORTS) };
      });
    }
  }
  if (top.walk !== undefined) cfg.walk = r.choice(top.walk, '$.walk', WALKS);
  if (top.wo !== undefined) cfg.wo = r.choice(top.wo, '$.wo', WO_VARIANTS);
  if (top.epGraph !== undefined) cfg.epGraph = r.bool(top.epGraph, '$.epGraph');
  if (cfg.epGraph && cfg.walk === 'replicated')
    r.fail(
      '$.epGraph',
      'cannot be on with $.walk "replicated": the EP graph is the seed walk\'s EP step (fan-out to merge), which the replicated walk does not have; use walk "seed", or epGraph false',
    );
  if (top.stepGraph !== undefined) cfg.stepGraph = r.bool(top.stepGraph, '$.stepGraph');
  if (cfg.stepGraph && cfg.epGraph) {
    // Name the field this config set; the other may be on in the base (the config in force).
    const [set, other] = top.stepGraph !== undefined ? ['$.stepGraph', '$.epGraph'] : ['$.epGraph', '$.stepGraph'];
    const inBase = (set === '$.stepGraph' ? top.epGraph : top.stepGraph) === undefined;
    r.fail(
      set,
      `cannot be on with ${other}${inBase ? ' (on in the config in force)' : ''}: the step graph captures the EP step with the rest of the step; choose one`,
    );
  }
  if (top.validate !== undefined) cfg.validate = r.bool(top.validate, '$.validate');
  if (top.profile !== undefined) cfg.profile = r.bool(top.profile, '$.profile');
  if (top.llServeMicros !== undefined) cfg.llServeMicros = r.int(top.llServeMicros, '$.llServeMicros', 0, 60_000_000);
  if (top.spin !== undefined) {
    const s = r.object(top.spin, '$.spin', ['hostMicros', 'deviceTicks', 'handshakeTimeoutMs']);
    if (s.hostMicros !== undefined) cfg.spin.hostMicros = r.int(s.hostMicros, '$.spin.hostMicros', 0, 1_000_000);
    if (s.deviceTicks !== undefined)
      cfg.spin.deviceTicks = r.int(s.deviceTicks, '$.spin.deviceTicks', 1, Number.MAX_SAFE_INTEGER);
    if (s.handshakeTimeoutMs !== undefined)
      cfg.spin.handshakeTimeoutMs = r.int(s.handshakeTimeoutMs, '$.spin.handshakeTimeoutMs', 1, 600_000);
  }
  return cfg;
}

/**
 * Where a config path points: against the working directory, then (for a relative path) the
 * package's own bench/configs/, where the shipped examples are, so `bench/configs/mixed.json` or
 * `mixed.json` finds them from a dependent project too. Throws naming every place tried.
 */
export function resolveConfigPath(path: string, model?: ConfigModel): string {
  const shipped = join(packageRoot(), 'bench', 'configs');
  const tried = [resolve(path)];
  if (!isAbsolute(path)) tried.push(join(packageRoot(), path), join(shipped, path));
  const found = tried.find((p) => existsSync(p));
  if (found) return found;
  const places = [...new Set(tried)];
  throw new ConfigError(
    path,
    '$',
    `no such file: tried ${places.join(', ')}${places.length > 1 ? " (the working directory, then memra's own files)" : ''}`,
    model,
  );
}

/** Read and validate a config file (see resolveConfigPath); an error names the file. */
export function loadDecodeConfig(path: string, opts: Omit<ParseOptions, 'source'> = {}): DecodeConfig {
  const file = resolveConfigPath(path, opts.model);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(file, '$', `cannot be read: ${(e as Error).message}`, opts.model);
  }
  let json: Json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(file, '$', `is not valid JSON: ${(e as Error).message}`, opts.model);
  }
  return parseDecodeConfig(json, { ...opts, source: file });
}

/** The transport layer `l` uses: the last range that covers it, else the default. */
export function transportForLayer(cfg: DecodeConfig, l: number): TransportName {
  for (let i = cfg.transport.layers.length - 1; i >= 0; i--) {
    const r = cfg.transport.layers[i]!;
    if (l >= r.from && l <= r.to) return r.transport;
  }
  return cfg.transport.default;
}
