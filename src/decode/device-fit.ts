/**
 * Whether a model fits the devices of the backend chosen for it, asked before anything is
 * allocated, and refused in the user's terms: the model's bytes on its fullest device against
 * what the backend gives a device, and what would fit instead.
 */
import { loadBinding } from '../runtime/binding.js';
import type { BackendKind } from '../runtime/device-api.js';
import { CPU_ARENA_MAX_BYTES } from '../runtime/cpu-world.js';
import { ModelTooLargeError, type Remedy } from '../api/errors.js';
import { activationBytes } from './walk-buffers.js';
import { WeightLoader, type Layout } from './device-weights.js';
import { PRESETS, modelName, type ModelConfig, type PresetName } from './model-config.js';

/** Room in each CPU reference device beyond weights and activations (link buffers, staging). */
const CPU_ARENA_SLACK = 64 * 2 ** 20;

/** Bytes of weights, and of activations and KV cache, on rank 0 (the root holds the most). */
function deviceBytes(model: ModelConfig, layout: Layout, maxBatch: number): { weights: number; activations: number } {
  return {
    weights: new WeightLoader(model).planBytes(layout, 0),
    activations: activationBytes(model, layout, maxBatch),
  };
}

/**
 * What the model takes on its fullest device under `backend`: its weights, activations and KV
 * cache, and on the CPU reference the room its emulated devices keep beside them (the size a
 * CPU reference device is made).
 */
export function bytesPerDevice(model: ModelConfig, layout: Layout, maxBatch: number, backend: BackendKind): number {
  const b = deviceBytes(model, layout, maxBatch);
  return b.weights + b.activations + (backend === 'cpu' ? CPU_ARENA_SLACK : 0);
}

const gb = (b: number): string =>
  `${(b / 1e9).toFixed(b < 1e9 ? 2 : 1)} GB (${(b / 2 ** 30).toFixed(b < 2 ** 30 ? 2 : 1)} GiB)`;

/** The smallest device memory among `devices`, or undefined where it cannot be read here. */
function cudaLimit(devices: readonly number[]): { bytes: number; text: string } | undefined {
  try {
    const b = loadBinding();
    const least = devices.map((d) => b.deviceProps(d)).reduce((a, p) => (p.totalMem < a.totalMem ? p : a));
    return { bytes: least.totalMem, text: `device ${least.ordinal} (${least.name}) has ${gb(least.totalMem)}` };
  } catch {
    // No addon, or an ordinal out of range: Runtime.open reports that, by name.
    return undefined;
  }
}

function cudaAvailable(): boolean {
  try {
    return loadBinding().deviceCount() >= 1;
  } catch {
    return false;
  }
}

/**
 * Throws ModelTooLargeError when the model does not fit a device of `backend` (the CPU
 * reference's emulated devices, or the smallest of the CUDA `devices`). In loopback one device
 * holds both ranks: twice the fuller rank's bytes (the CPU reference makes its device that size).
 */
export function checkFits(
  model: ModelConfig,
  layout: Layout,
  maxBatch: number,
  backend: BackendKind,
  devices: readonly number[],
  loopback: boolean,
): void {
  const ranksHere = loopback ? 2 : 1;
  const need = (m: ModelConfig, l: Layout): number => ranksHere * bytesPerDevice(m, l, maxBatch, backend);
  const limit =
    backend === 'cpu'
      ? { bytes: CPU_ARENA_MAX_BYTES, text: `the CPU reference holds at most ${gb(CPU_ARENA_MAX_BYTES)} a device` }
      : cudaLimit(devices);
  if (!limit) return;
  const bytes = need(model, layout);
  if (bytes <= limit.bytes) return;
  const { weights, activations } = deviceBytes(model, layout, maxBatch);
  const remedies: Remedy[] = [];
  if (layout === 'unsharded' && need(model, 'sharded') <= limit.bytes)
    remedies.push({ option: 'layout', value: 'sharded' });
  for (const p of Object.keys(PRESETS) as PresetName[])
    if (need(PRESETS[p], layout) <= limit.bytes) remedies.push({ option: 'model', value: p });
  if (backend === 'cpu' && cudaAvailable()) remedies.push({ option: 'backend', value: 'cuda' });
  const per = loopback ? ', both ranks on one device in loopback' : '';
  throw new ModelTooLargeError(
    `model ${modelName(model)} needs ${gb(bytes)} on a device (${layout}${per}, maxBatch ${maxBatch}: ${gb(ranksHere * weights)} of weights, ${gb(ranksHere * activations)} of activations and KV cache), and ${limit.text}`,
    bytes,
    limit.bytes,
    remedies,
  );
}
