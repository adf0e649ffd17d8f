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
 * Every field is optional; ranges are inclusive, later ranges win where they overlap.
 */
import { readFileSync } from 'node:fs';
import { TRANSPORTS, type TransportName } from '../runtime/transports/transport.js';

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

export class ConfigError extends Error {
  constructor(
    readonly source: string,
    readonly path: string,
    message: string,
  ) {
    super(`${source}: ${path}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Json = unknown;

function isObject(v: Json): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const show = (v: Json): string => JSON.stringify(v) ?? String(v);

class Reader {
  constructor(private readonly source: string) {}

  fail(path: string, message: string): never {
    throw new ConfigError(this.source, path, message);
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

/**
 * Validate a parsed config. `layers`, when known, bounds the layer ranges (a range outside the
 * model is an error, not silently ignored).
 */
export function parseDecodeConfig(json: Json, source = 'config', layers?: number): DecodeConfig {
  const r = new Reader(source);
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
  const cfg: DecodeConfig = structuredClone(DEFAULT_CONFIG);
  if (top.transport !== undefined) {
    const t = r.object(top.transport, '$.transport', ['default', 'layers']);
    if (t.default !== undefined) cfg.transport.default = r.choice(t.default, '$.transport.default', TRANSPORTS);
    if (t.layers !== undefined) {
      const list = t.layers;
      if (!Array.isArray(list))
        r.fail('$.transport.layers', `must be an array of { from, to, transport }, got ${show(list)}`);
      const maxLayer = layers === undefined ? Number.MAX_SAFE_INTEGER : layers - 1;
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
  if (cfg.stepGraph && cfg.epGraph)
    r.fail(
      '$.stepGraph',
      'cannot be on with $.epGraph: the step graph captures the EP step with the rest of the step; choose one',
    );
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

/** Read and validate a config file; a JSON syntax error names the file. */
export function loadDecodeConfig(path: string, layers?: number): DecodeConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(path, '$', `cannot be read: ${(e as Error).message}`);
  }
  let json: Json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(path, '$', `is not valid JSON: ${(e as Error).message}`);
  }
  return parseDecodeConfig(json, path, layers);
}

/** The transport layer `l` uses: the last range that covers it, else the default. */
export function transportForLayer(cfg: DecodeConfig, l: number): TransportName {
  for (let i = cfg.transport.layers.length - 1; i >= 0; i--) {
    const r = cfg.transport.layers[i]!;
    if (l >= r.from && l <= r.to) return r.transport;
  }
  return cfg.transport.default;
}
