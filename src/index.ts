/** memra's public API: every value and type a caller meets, from the package root. */
export { Runtime, detectBackend, type RuntimeOptions, type Ranks } from './runtime/runtime.js';
export { Rank, type DeviceEvent } from './runtime/rank.js';
export type { PeerStatus } from './runtime/peer.js';
export type { BackendKind } from './runtime/device-api.js';
export {
  loadBinding,
  asDevicePtr,
  ptrAdd,
  NO_PTR,
  type NativeBinding,
  type DeviceProps,
  type DevicePtr,
  type HostPtr,
} from './runtime/binding.js';
export {
  Session,
  type SessionOptions,
  type SessionModel,
  type StepOptions,
  type StepOutput,
  type StepTiming,
} from './decode/session.js';
export type { Layout, Progress } from './decode/device-weights.js';
export { HOPS, type Hop, type JoinTiming } from './decode/join-profile.js';
export type { JoinSample } from './profile/profile-data.js';
export {
  PRESETS,
  presetByName,
  validateConfig,
  modelConfigJson,
  type ModelConfig,
  type ModelConfigJson,
  type PresetName,
} from './decode/model-config.js';
export { planRun, type RunAsk, type RunPlan } from './decode/run-plan.js';
export {
  DEFAULT_CONFIG,
  ConfigError,
  parseDecodeConfig,
  loadDecodeConfig,
  resolveConfigPath,
  WALKS,
  type DecodeConfig,
  type DecodeConfigPatch,
  type DeepPartial,
  type LayerRange,
  type ConfigModel,
  type ParseOptions,
  type WalkName,
  type WoVariant,
} from './decode/decode-config.js';
export {
  InvalidArgTypeError,
  InvalidArgValueError,
  UnknownOptionError,
  ModelTooLargeError,
  SessionStateError,
  MemraError,
  ADDON_ERROR_CODES,
  type AddonErrorCode,
  type ErrorCode,
  type InputErrorCode,
  type SessionErrorCode,
  type FaultCode,
  type Remedy,
} from './api/errors.js';
export { OrderingError } from './runtime/cpu-device.js';
export { RingError } from './workers/ring.js';
export { ControlError } from './workers/worker-handle.js';
export { CpuModel } from './decode/cpu-model.js';
export { ArLink } from './runtime/link.js';
export { openTransport } from './runtime/transports/open.js';
export { TRANSPORTS, type Transport, type TransportName } from './runtime/transports/transport.js';
