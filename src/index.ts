/** memra's public API. */
export { Runtime, detectBackend, type RuntimeOptions } from './runtime/runtime.js';
export { Rank, type DeviceEvent } from './runtime/rank.js';
export type { PeerStatus } from './runtime/peer.js';
export type { BackendKind } from './runtime/device-api.js';
export { OrderingError } from './runtime/cpu-device.js';
export { RingError } from './workers/ring.js';
export { ControlError } from './workers/worker-handle.js';
export { loadBinding, type NativeBinding, type DeviceProps } from './runtime/binding.js';
