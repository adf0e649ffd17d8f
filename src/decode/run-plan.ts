/**
 * What a decode run gets where its caller does not say, with the reason (`memra decode` prints
 * it): the backend, the layout and the devices.
 *
 * - One CUDA device: CUDA, unsharded on it, one worker.
 * - Two or more: CUDA, sharded over devices 0 and 1.
 * - None: the CPU reference, sharded over its two emulated devices.
 * - Loopback: sharded, both ranks on device 0.
 * - `unsharded` asked for: one worker, on device 0 unless devices are given.
 *
 * Everything here is checked before a worker exists, so a refused plan leaves nothing behind.
 */
import type { BackendKind } from '../runtime/device-api.js';
import { checkDevices, defaultDevices, detectBackend, visibleDevices } from '../runtime/device-choice.js';
import type { Layout } from './device-weights.js';

export interface RunAsk {
  backend?: BackendKind | 'auto';
  layout?: Layout;
  /** RuntimeOptions.devices. */
  devices?: readonly number[];
  /** RuntimeOptions.loopback. */
  loopback?: boolean;
}

export interface RunPlan {
  backend: BackendKind;
  layout: Layout;
  /** One ordinal per rank, for Runtime.open. */
  devices: number[];
  loopback: boolean;
  /** Why this backend, layout and these devices, in a sentence. */
  why: string;
}

const where = (devices: readonly number[], loopback: boolean): string =>
  loopback
    ? `device ${devices[0]}, both ranks`
    : devices.length === 2
      ? `devices ${devices[0]} and ${devices[1]}`
      : `device ${devices[0]}`;

/** `visible`: the devices the backend sees (default: ask it; tests pass a count). */
export function planRun(ask: RunAsk = {}, visible?: number): RunPlan {
  const asked = ask.backend ?? 'auto';
  if (asked !== 'auto' && asked !== 'cuda' && asked !== 'cpu')
    throw new RangeError(`backend must be 'auto', 'cuda' or 'cpu', got '${String(asked)}'`);
  if (ask.layout !== undefined && ask.layout !== 'sharded' && ask.layout !== 'unsharded')
    throw new RangeError(`layout must be 'sharded' or 'unsharded', got '${String(ask.layout)}'`);
  const loopback = ask.loopback ?? false;
  if (ask.devices !== undefined) checkDevices(ask.devices, loopback);
  const detected = asked === 'auto' ? detectBackend() : undefined;
  const backend = detected?.backend ?? (asked as BackendKind);
  visible ??= visibleDevices(backend);
  const seen =
    backend === 'cuda'
      ? `${visible} CUDA device${visible === 1 ? '' : 's'} visible`
      : `the CPU reference's ${visible} emulated devices`;
  const layout: Layout =
    ask.layout ??
    (ask.devices
      ? ask.devices.length === 2
        ? 'sharded'
        : 'unsharded'
      : loopback || visible >= 2
        ? 'sharded'
        : 'unsharded');
  const devices = [...(ask.devices ?? (layout === 'unsharded' && !loopback ? [0] : defaultDevices(visible, loopback)))];
  if (layout === 'sharded' && devices.length === 1) {
    throw new RangeError(
      `layout 'sharded' needs two ranks, and devices [${devices.join(', ')}] is one (${seen}): use layout 'unsharded', or ` +
        `devices [${devices[0]}, ${devices[0]}] with loopback: true (CLI --loopback) to put both ranks on one device`,
    );
  }
  const because = !detected
    ? `backend ${backend} as asked`
    : backend === 'cuda'
      ? detected.why
      : `${detected.why}, so the CPU reference`;
  const how = ask.layout
    ? `${layout} as asked`
    : ask.devices
      ? `${layout} (${devices.length === 2 ? 'two ranks' : 'one rank'} asked for)`
      : loopback
        ? 'sharded in loopback, as asked'
        : layout === 'sharded'
          ? 'sharded'
          : 'unsharded (sharding needs two devices, or loopback)';
  return { backend, layout, devices, loopback, why: `${because}; ${how}, on ${where(devices, loopback)}` };
}
