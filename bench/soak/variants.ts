/**
 * The ways a soak loop opens its session: one GPU (the unsharded walk on device 0, one worker),
 * or loopback (the sharded walk, both ranks on device 0) through one transport, eager or from the
 * step graph. Every variant here is bit-identical to the unsharded walk (`wo: concat`), so one
 * reference window checks them all, except `oneshot`, whose all-reduce needs `wo: allreduce`.
 */
import { Session } from '../../src/decode/session.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../../src/decode/decode-config.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { TransportName } from '../../src/runtime/transports/transport.js';
import type { PresetName } from '../../src/decode/model-config.js';
import type { RuntimeOptions } from '../../src/runtime/runtime.js';

export interface Variant {
  loopback: boolean;
  /** Loopback only; the unsharded walk has no joins. */
  transport?: TransportName;
  stepGraph?: boolean;
  /** Device barriers' spin bound, SM ticks (config spin.deviceTicks); default the config's. */
  spinTicks?: number;
}

/** `unsharded`, `ll+graph`, `oneshot`, ... as the results file and the README name it. */
export function variantName(v: Variant): string {
  return `${v.loopback ? v.transport! : 'unsharded'}${v.stepGraph ? '+graph' : ''}`;
}

export function variantConfig(v: Variant): DecodeConfig {
  return {
    ...DEFAULT_CONFIG,
    transport: { default: v.transport ?? DEFAULT_CONFIG.transport.default, layers: [] },
    wo: v.transport === 'oneshot' ? 'allreduce' : 'concat',
    stepGraph: v.stepGraph ?? false,
    spin: { ...DEFAULT_CONFIG.spin, deviceTicks: v.spinTicks ?? DEFAULT_CONFIG.spin.deviceTicks },
  };
}

/** One row a step (slot 0): the soak decodes one sequence. */
export function openVariant(
  backend: BackendKind,
  preset: string,
  v: Variant,
  runtime: RuntimeOptions = {},
): Promise<Session> {
  return Session.open({
    backend,
    model: preset as PresetName,
    maxBatch: 1,
    config: variantConfig(v),
    ...(v.loopback
      ? { layout: 'sharded', runtime: { ...runtime, devices: [0, 0], loopback: true } }
      : { layout: 'unsharded', runtime: { ...runtime, devices: [0] } }),
  });
}
