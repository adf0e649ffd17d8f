/**
 * Random invalid input, each case with the name its refusal must carry: step arguments (tokens
 * out of the vocabulary or not integers, batches too short or too long, no array at all), slots
 * out of range, decode configs with one field wrong (the JSON path must be named), config files
 * that do not exist, a transport the machine cannot open, and `Session.open` options that must
 * be refused before a worker starts. Values are drawn fresh every time (node:crypto).
 */
import { randomInt } from 'node:crypto';
import { Session, type SessionOptions } from '../../src/decode/session.js';
import { DEFAULT_CONFIG } from '../../src/decode/decode-config.js';
import type { ModelConfig, PresetName } from '../../src/decode/model-config.js';
import type { BackendKind } from '../../src/runtime/device-api.js';

export interface InvalidCase {
  /** What is wrong, for the notes when a case is not refused as it should be. */
  what: string;
  /** The refusal must match this: it names the argument, field or path at fault. */
  names: RegExp;
  run(s: Session): unknown;
  /** Session.open cases: nothing may be opened (no worker started). */
  opens?: true;
}

const pick = <T>(xs: readonly T[]): T => xs[randomInt(0, xs.length)]!;
const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const show = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? String(v);
const junkName = (): string => `x${randomInt(0, 1 << 30).toString(36)}`;

function badToken(V: number): unknown {
  return pick<() => unknown>([
    () => V + randomInt(0, 1_000_000),
    () => -randomInt(1, 1_000_000),
    () => randomInt(0, V) + 0.5,
    () => Number.NaN,
    () => Number.POSITIVE_INFINITY,
    () => String(randomInt(0, V)),
    () => null,
    () => undefined,
    () => ({}),
    () => [randomInt(0, V)],
    () => true,
    () => 2 ** 53,
  ])();
}

function badSlot(maxBatch: number): unknown {
  return pick<() => unknown>([
    () => -randomInt(1, 100),
    () => maxBatch + randomInt(0, 100),
    () => 0.5,
    () => Number.NaN,
    () => '0',
    () => null,
  ])();
}

/** A config with one field wrong, and the path its refusal must name. */
function badConfig(layers: number): { config: unknown; path: string } {
  const L = layers;
  const c = structuredClone(DEFAULT_CONFIG) as unknown as Record<string, unknown>;
  const range = { from: randomInt(0, L), to: L - 1, transport: 'push' };
  return pick<() => { config: unknown; path: string }>([
    () => ({ config: { ...c, transport: { default: junkName(), layers: [] } }, path: '$.transport.default' }),
    () => ({
      config: { ...c, transport: { default: 'll', layers: [{ ...range, from: L + randomInt(0, 100) }] } },
      path: '$.transport.layers[0].from',
    }),
    () => ({
      config: { ...c, transport: { default: 'll', layers: [{ ...range, to: -randomInt(1, 100) }] } },
      path: '$.transport.layers[0].to',
    }),
    () => ({
      config: { ...c, transport: { default: 'll', layers: [range, { ...range, transport: junkName() }] } },
      path: '$.transport.layers[1].transport',
    }),
    () => ({ config: { ...c, transport: { default: 'll', layers: 'all' } }, path: '$.transport.layers' }),
    () => {
      const k = junkName();
      return { config: { ...c, [k]: 1 }, path: `$.${k}` };
    },
    () => ({ config: { ...c, wo: junkName() }, path: '$.wo' }),
    () => {
      const k = pick(['epGraph', 'stepGraph', 'validate', 'profile']);
      return { config: { ...c, [k]: pick([1, 'true', null, []]) }, path: `$.${k}` };
    },
    () => ({ config: { ...c, stepGraph: true, epGraph: true }, path: '$.stepGraph' }),
    () => ({ config: { ...c, llServeMicros: pick([-1, 1.5, 60_000_001, '5']) }, path: '$.llServeMicros' }),
    () => {
      const k = pick(['hostMicros', 'deviceTicks', 'handshakeTimeoutMs']);
      return {
        config: { ...c, spin: { ...(c.spin as object), [k]: pick([-5, 0.25, 'fast', 1e300]) } },
        path: `$.spin.${k}`,
      };
    },
  ])();
}

/** Session.open options that must be refused before anything opens, and what the refusal names. */
function badOpen(model: ModelConfig): { options: SessionOptions; names: RegExp } {
  return pick<() => { options: SessionOptions; names: RegExp }>([
    () => {
      const name = junkName();
      return { options: { model: name as PresetName }, names: new RegExp(`'${name}'`) };
    },
    () => ({
      options: { model: { ...model, hidden: 256 * randomInt(1, 8) + randomInt(1, 256) } },
      names: /\bhidden\b/,
    }),
    () => ({ options: { model: { ...model, heads: 2 * randomInt(1, 8) + 1 } }, names: /\bheads\b/ }),
    () => ({ options: { model: { ...model, seed: -1n } }, names: /\bseed\b/ }),
    () => ({ options: { maxBatch: pick([0, 9, 1.5, -2]) }, names: /\bmaxBatch\b/ }),
    () => ({ options: { layout: junkName() as never }, names: /\blayout\b/ }),
    () => ({ options: { backend: junkName() as never }, names: /\bbackend\b/ }),
    () => {
      const d = 7 + randomInt(0, 100);
      return { options: { layout: 'unsharded', runtime: { devices: [d] } }, names: new RegExp(`ordinal ${d}\\b`) };
    },
    () => ({ options: { runtime: { devices: [0, 0] } }, names: /both ranks are on device 0.*loopback/ }),
    () => {
      const k = pick(['spinMicros', 'handshakeTimeoutMs', 'callTimeoutMs', 'completionSlots', 'ringCapacity']);
      return { options: { runtime: { [k]: pick([-1, 0.5]) } }, names: new RegExp(`\\.${k}\\b`) };
    },
    () => ({ options: { config: { wo: junkName() } as never }, names: /\$\.wo\b/ }),
  ])();
}

/** One case for a session of `preset` (whose config is `model`) with `maxBatch` rows, on `backend`. */
export function invalidCase(backend: BackendKind, preset: string, model: ModelConfig, maxBatch: number): InvalidCase {
  const V = model.vocab;
  return pick<() => InvalidCase>([
    () => {
      const x = badToken(V);
      return { what: `step([${show(x)}])`, names: /\brow 0\b/, run: (s) => s.step([x as number]) };
    },
    () => {
      const n = pick([0, maxBatch + randomInt(1, 9)]);
      return {
        what: `a step of ${n} tokens`,
        names: new RegExp(`step: a step carries 1 to maxBatch \\(${maxBatch}\\) tokens, got ${n}`),
        run: (s) => s.step(Array.from({ length: n }, () => randomInt(0, V))),
      };
    },
    () => {
      const x = pick<unknown>([randomInt(0, V), 'abc', null, undefined, { 0: 1, length: 1 }, new Int32Array(1)]);
      return {
        what: `step(${show(x)})`,
        names: /step: tokens must be an array of token ids/,
        run: (s) => s.step(x as number[]),
      };
    },
    () => {
      const slot = badSlot(maxBatch);
      const call = pick(['reset', 'position'] as const);
      return {
        what: `${call}(${show(slot)})`,
        names: new RegExp(`${call}: slot must be an integer`),
        run: (s) => s[call](slot as number),
      };
    },
    () => {
      const { config, path } = badConfig(model.layers);
      return {
        what: `setConfig(${show(config)})`,
        names: new RegExp(`: ${esc(path)}: `),
        run: (s) => s.setConfig(config as never),
      };
    },
    () => {
      const c = pick<unknown>([[], 5, null, true]);
      return {
        what: `setConfig(${show(c)})`,
        names: /setConfig: config must be a config object or the path of a JSON config file/,
        run: (s) => s.setConfig(c as never),
      };
    },
    () => {
      const file = `/nonexistent/soak-${junkName()}.json`;
      return {
        what: `setConfig('${file}')`,
        names: new RegExp(`^${esc(file)}\\b`),
        run: (s) => s.setConfig(file),
      };
    },
    () => ({
      what: 'setConfig with nccl, which loopback and the CPU reference cannot open',
      names: /the nccl transport (cannot run in loopback|needs the CUDA backend)/,
      run: (s) => s.setConfig({ ...DEFAULT_CONFIG, transport: { default: 'nccl', layers: [] } }),
    }),
    () => {
      const { options, names } = badOpen(model);
      return {
        what: `Session.open(${show(options)})`,
        names,
        opens: true,
        run: () =>
          Session.open({ backend, model: preset as PresetName, maxBatch: 1, ...options }).then(async (opened) => {
            await opened.close();
            throw new Error('Session.open opened a session it should have refused');
          }),
      };
    },
  ])();
}
