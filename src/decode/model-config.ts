/**
 * The shape of the synthetic decode model (docs/model.md, "Configuration"). The constraints are
 * not taste: each one is what a sharded or blocked kernel relies on (N/2 heads per TP rank, E/2
 * experts per EP rank, 128-wide fp8 quantization blocks, 32-wide tiles), so a config that breaks
 * one is refused here, by name, before any weight is generated.
 */
import { describe, knownKeys, type Check } from '../api/check.js';
import { InvalidArgTypeError, InvalidArgValueError } from '../api/errors.js';

export interface ModelConfig {
  /** H: model width. */
  readonly hidden: number;
  /** N: attention heads. */
  readonly heads: number;
  /** R: MLA latent width; the KV cache holds R floats per position. */
  readonly latent: number;
  /** Dv: value width per head. */
  readonly headDim: number;
  /** E: routed experts. */
  readonly experts: number;
  /** K: experts per token. */
  readonly topk: number;
  /** F: expert inner width. */
  readonly ffn: number;
  /** V: vocabulary. */
  readonly vocab: number;
  /** L: layers. */
  readonly layers: number;
  /** P: KV cache length (positions 0 .. P-1). */
  readonly maxPos: number;
  /** S: weight seed, a u64. */
  readonly seed: bigint;
}

const U64_MAX = (1n << 64n) - 1n;

export const PRESETS = {
  tiny: {
    hidden: 256,
    heads: 4,
    latent: 32,
    headDim: 32,
    experts: 4,
    topk: 2,
    ffn: 128,
    vocab: 256,
    layers: 2,
    maxPos: 64,
    seed: 0n,
  },
  small: {
    hidden: 1024,
    heads: 8,
    latent: 128,
    headDim: 64,
    experts: 8,
    topk: 2,
    ffn: 512,
    vocab: 4096,
    layers: 4,
    maxPos: 256,
    seed: 0n,
  },
  bench: {
    hidden: 4096,
    heads: 32,
    latent: 512,
    headDim: 128,
    experts: 32,
    topk: 8,
    ffn: 1536,
    vocab: 32768,
    layers: 30,
    maxPos: 4096,
    seed: 0n,
  },
} as const satisfies Record<string, ModelConfig>;

export type PresetName = keyof typeof PRESETS;

export const tiny: ModelConfig = PRESETS.tiny;
export const small: ModelConfig = PRESETS.small;
export const bench: ModelConfig = PRESETS.bench;

/** A preset by name, optionally with another seed. */
export function presetByName(name: string, seed?: bigint, at = 'model'): ModelConfig {
  if (typeof name !== 'string')
    throw new InvalidArgTypeError(
      `${at} must be a preset name (${Object.keys(PRESETS).join(', ')}) or a ModelConfig, got ${describe(name)}`,
    );
  if (!Object.hasOwn(PRESETS, name)) {
    throw new InvalidArgValueError(
      `unknown model preset '${name}': the presets are ${Object.keys(PRESETS).join(', ')}`,
    );
  }
  const cfg: ModelConfig = PRESETS[name as PresetName];
  return seed === undefined ? cfg : validateConfig({ ...cfg, seed });
}

/** What a model option takes: a preset's name or a whole config. */
export const modelOption: Check<ModelConfig> = (v, at) =>
  typeof v === 'string' ? presetByName(v, undefined, at) : validateConfig(v as ModelConfig, at);

/** The preset a config is, by name, else a description of it: for messages. */
export function modelName(cfg: ModelConfig): string {
  const preset = (Object.keys(PRESETS) as PresetName[]).find((k) => FIELDS.every((f) => PRESETS[k][f] === cfg[f]));
  return preset ? `'${preset}'` : `a custom model (hidden ${cfg.hidden}, ${cfg.layers} layers)`;
}

/** A ModelConfig as JSON holds it: the u64 seed as a decimal string (a JSON number would round it). */
export type ModelConfigJson = Omit<ModelConfig, 'seed'> & { readonly seed: string };

export function modelConfigJson(cfg: ModelConfig): ModelConfigJson {
  return { ...cfg, seed: cfg.seed.toString() };
}

type IntField = Exclude<keyof ModelConfig, 'seed'>;

const FIELDS: ReadonlyArray<keyof ModelConfig> = [
  'hidden',
  'heads',
  'latent',
  'headDim',
  'experts',
  'topk',
  'ffn',
  'vocab',
  'layers',
  'maxPos',
  'seed',
];

/** Throws on the first field that breaks docs/model.md's table; returns cfg so calls can chain. */
export function validateConfig(cfg: ModelConfig, at = 'ModelConfig'): ModelConfig {
  if (typeof cfg !== 'object' || cfg === null || Array.isArray(cfg)) {
    throw new InvalidArgTypeError(
      `${at} must be a preset name (${Object.keys(PRESETS).join(', ')}) or a ModelConfig object, got ${describe(cfg)}`,
    );
  }
  knownKeys(cfg as unknown as Record<string, unknown>, at, FIELDS as string[]);
  const int = (f: IntField): number => {
    const v: unknown = cfg[f];
    // Integers only, and safe ones: sizes below multiply into flat indices.
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
      throw new InvalidArgTypeError(`${at}.${f} must be an integer, got ${describe(v)}`);
    }
    return v;
  };
  for (const f of FIELDS) if (f !== 'seed') int(f);
  const rule = (f: IntField, ok: (v: number) => boolean, text: string): void => {
    const v = int(f);
    if (!ok(v)) throw new InvalidArgValueError(`${at}.${f} must be ${text}, got ${v}`);
  };
  // docs/model.md is silent: whether a multiple-of rule admits 0 or negatives. A zero-width model has
  // no weights and no step, so every width must also be positive.
  const multiple = (f: IntField, m: number): void =>
    rule(f, (v) => v > 0 && v % m === 0, `a positive multiple of ${m}`);
  multiple('hidden', 256);
  rule('heads', (v) => v > 0 && v % 2 === 0, 'positive and even (N/2 heads per TP rank)');
  multiple('latent', 32);
  multiple('headDim', 32);
  rule('experts', (v) => v > 0 && v % 2 === 0, 'positive and even (E/2 experts per EP rank)');
  rule('topk', (v) => v >= 1 && v <= cfg.experts, `between 1 and experts (${cfg.experts})`);
  multiple('ffn', 128);
  rule('vocab', (v) => v >= 2, 'at least 2');
  rule('layers', (v) => v >= 1, 'at least 1');
  rule('maxPos', (v) => v >= 1, 'at least 1');
  // Tensor ids are 16l+1 .. 16L+2 and go through a u64 multiply; keep them exact as JS numbers
  // (see weights.ts): no real model comes near this bound.
  rule('layers', (v) => 16 * v + 2 <= 0xffffffff, 'small enough that tensor ids fit in 32 bits');
  // Flat element indices are JS numbers: the largest tensor must stay exact.
  const H = cfg.hidden,
    biggest = Math.max(
      cfg.vocab * H,
      cfg.experts * H * cfg.ffn,
      H * cfg.heads * cfg.latent,
      cfg.heads * cfg.headDim * H,
    );
  if (!Number.isSafeInteger(biggest))
    throw new InvalidArgValueError(`${at}: the largest tensor must have fewer than 2^53 elements, got ${biggest}`);
  const seed: unknown = cfg.seed;
  if (typeof seed !== 'bigint')
    throw new InvalidArgTypeError(`${at}.seed must be a u64 bigint in [0, 2^64), got ${describe(seed)}`);
  if (seed < 0n || seed > U64_MAX)
    throw new InvalidArgValueError(`${at}.seed must be a u64 bigint in [0, 2^64), got ${seed}`);
  return cfg;
}
