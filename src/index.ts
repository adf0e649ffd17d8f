/** memra's public API. */
export { Runtime, detectBackend, type RuntimeOptions, type Ranks } from './runtime/runtime.js';
export { Rank, type DeviceEvent } from './runtime/rank.js';
export type { PeerStatus } from './runtime/peer.js';
export type { BackendKind } from './runtime/device-api.js';
export { OrderingError } from './runtime/cpu-device.js';
export { RingError } from './workers/ring.js';
export { ControlError } from './workers/worker-handle.js';
export { loadBinding, type NativeBinding, type DeviceProps } from './runtime/binding.js';
export { Session, type SessionOptions, type StepOutput } from './decode/session.js';
export { planRun, type RunAsk, type RunPlan } from './decode/run-plan.js';
export { PRESETS, presetByName, validateConfig, type ModelConfig, type PresetName } from './decode/model-config.js';
export {
  DEFAULT_CONFIG,
  ConfigError,
  parseDecodeConfig,
  loadDecodeConfig,
  WALKS,
  type DecodeConfig,
  type WalkName,
  type WoVariant,
} from './decode/decode-config.js';
export { CpuModel } from './decode/cpu-model.js';
export { ArLink } from './runtime/link.js';
export { openTransport } from './runtime/transports/open.js';
export { TRANSPORTS, type Transport, type TransportName } from './runtime/transports/transport.js';
