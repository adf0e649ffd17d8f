/**
 * Which devices a runtime's ranks get: what the backend sees, the default when the caller names
 * none, and the checks that need no device (how many ordinals, and when two may be one). The
 * runtime applies them before it spawns a worker, so a refused choice leaves nothing behind.
 *
 * One ordinal opens one worker (the unsharded layout on one GPU); two open two ranks, on two
 * devices, or on one device in loopback.
 */
import { loadBinding } from './binding.js';
import type { BackendKind } from './device-api.js';
import { InvalidArgTypeError, InvalidArgValueError } from '../api/errors.js';

/** The CPU reference emulates two devices, so every two-rank path runs on it. */
export const CPU_REFERENCE_DEVICES = 2;

/** Devices `backend` sees: the addon's count (0 with no driver or no device), or the reference's. */
export function visibleDevices(backend: BackendKind): number {
  return backend === 'cuda' ? loadBinding().deviceCount() : CPU_REFERENCE_DEVICES;
}

/** Pick the backend for `auto`: CUDA wherever the addon sees a device, else the CPU reference. */
export function detectBackend(): { backend: BackendKind; devices: number; why: string } {
  let devices = 0;
  try {
    devices = loadBinding().deviceCount();
  } catch (e) {
    return { backend: 'cpu', devices: 0, why: `addon unavailable: ${(e as Error).message}` };
  }
  if (devices >= 1)
    return { backend: 'cuda', devices, why: devices === 1 ? '1 CUDA device' : `${devices} CUDA devices` };
  return { backend: 'cpu', devices, why: 'no CUDA device visible' };
}

/** Two ranks where two devices are visible, one where one is; loopback: both on device 0. */
export function defaultDevices(visible: number, loopback: boolean): number[] {
  if (loopback) return [0, 0];
  return visible >= 2 ? [0, 1] : [0];
}

const show = (devices: readonly number[]): string => `[${devices.join(', ')}]`;

/**
 * The shape of `devices` and the loopback rules: one or two ordinals; two equal ones only with
 * `loopback`, which needs exactly that. Throws naming what was asked and what is allowed.
 */
export function checkDevices(devices: unknown, loopback: unknown): readonly number[] {
  if (typeof loopback !== 'boolean')
    throw new InvalidArgTypeError(
      `RuntimeOptions.loopback must be true or false, got ${JSON.stringify(loopback) ?? String(loopback)}`,
    );
  if (!Array.isArray(devices) || devices.length < 1 || devices.length > 2) {
    throw new InvalidArgValueError(
      `RuntimeOptions.devices must be one device ordinal (one worker) or two (one per rank), got ${JSON.stringify(devices) ?? String(devices)}`,
    );
  }
  devices.forEach((d: unknown, i) => {
    if (typeof d !== 'number' || !Number.isInteger(d))
      throw new InvalidArgTypeError(
        `RuntimeOptions.devices[${i}] must be a device ordinal (an integer), got ${JSON.stringify(d) ?? String(d)}`,
      );
  });
  const ds = devices as number[];
  if (loopback && ds.length === 1) {
    throw new InvalidArgValueError(
      `RuntimeOptions.loopback puts two ranks on one device and needs devices [d, d]; got devices ${show(ds)}, one rank (drop loopback to run it)`,
    );
  }
  if (loopback && ds[0] !== ds[1]) {
    throw new InvalidArgValueError(
      `RuntimeOptions.loopback puts both ranks on one device, but devices ${show(ds)} are two devices: pass [${ds[0]}, ${ds[0]}], or drop loopback to run on both`,
    );
  }
  if (!loopback && ds.length === 2 && ds[0] === ds[1]) {
    throw new InvalidArgValueError(
      `RuntimeOptions.devices: both ranks are on device ${ds[0]}. Two ranks need two devices: a kernel's store into a peer ` +
        'pointer across two contexts on one card is undefined (it reads right at some sizes and wrong at others). ' +
        `To run both ranks on device ${ds[0]} in this process anyway (one context, one address space: for tests and for ` +
        'developing two-rank code on one card; its timings are not two-GPU figures), pass loopback: true.',
    );
  }
  return ds;
}

/** Every ordinal within what the backend sees; throws naming the ordinal and the count. */
export function checkInRange(devices: readonly number[], visible: number, backend: BackendKind): void {
  for (const d of devices) {
    if (d >= 0 && d < visible) continue;
    const what = backend === 'cuda' ? (visible === 1 ? 'CUDA device' : 'CUDA devices') : 'CPU reference devices';
    const which =
      visible === 1 ? ' (ordinal 0)' : visible > 1 ? ` (ordinals 0..${visible - 1})` : ' (no CUDA device or driver)';
    throw new InvalidArgValueError(`device ordinal ${d} is out of range: ${visible} ${what} visible${which}`, {
      code: 'ERR_NO_DEVICE',
      remedies: visible > 0 ? [] : [{ option: 'backend', value: 'cpu' }],
    });
  }
}
