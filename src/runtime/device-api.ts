/**
 * What a pinned worker needs from a backend: the per-thread part of the native binding. The CUDA
 * backend is the addon itself; the CPU reference (cpu-device.ts) implements the same calls over
 * SharedArrayBuffers and turns the seeds' ordering hazards into errors.
 */
import type { EventHandle, NativeBinding, StreamHandle } from './binding.js';

export type BackendKind = 'cuda' | 'cpu';

export type DeviceApi = Pick<
  NativeBinding,
  | 'bindDevice'
  | 'boundDevice'
  | 'releaseDevice'
  | 'memGetInfo'
  | 'enablePeerAccess'
  | 'disablePeerAccess'
  | 'streamCreate'
  | 'streamDestroy'
  | 'streamQuery'
  | 'streamSynchronize'
  | 'eventCreate'
  | 'eventDestroy'
  | 'eventRecord'
  | 'eventRecordMark'
  | 'eventQuery'
  | 'eventElapsedMs'
  | 'malloc'
  | 'free'
  | 'memsetAsync'
  | 'memcpyAsync'
  | 'memcpyPeerAsync'
  | 'upload'
  | 'download'
  | 'hostRegister'
  | 'hostUnregister'
  | 'launchFillF32'
  | 'launchAxpyF32'
  | 'launchSignal'
  | 'launchStampNow'
  | 'launchProbeWrite'
  | 'launchSpin'
  | 'launchReadFloor'
  | 'hostAlloc'
  | 'hostFree'
  | 'arSignalBytes'
  | 'arMaxBlocks'
  | 'refusalWords'
  | 'llStateBytes'
  | 'llDepth'
  | 'llMaxValues'
  | 'llConfigure'
  | 'llServeStats'
  | 'launchLl'
  | 'launchPush'
  | 'launchPush2d'
  | 'launchFold'
  | 'launchOneShot'
  | 'modelMaxRows'
  | 'launchGenWeights'
  | 'launchSetI32'
  | 'launchEmbed'
  | 'launchRmsnorm'
  | 'launchGemv'
  | 'launchNormGemv'
  | 'launchCacheWrite'
  | 'launchLatentQuery'
  | 'launchMlaAttention'
  | 'mlaWorkspaceBytes'
  | 'mlaShortPositions'
  | 'launchRouter'
  | 'launchQuantize'
  | 'launchDequantize'
  | 'launchRouteQuant'
  | 'launchExpertUp'
  | 'launchExpertDown'
  | 'launchMoeCombine'
  | 'launchMoeCombineNorm'
  | 'launchArgmax'
  | 'streamBeginCapture'
  | 'streamEndCapture'
  | 'graphLaunch'
  | 'graphDestroy'
  | 'streamEndCaptureChild'
  | 'childGraphDestroy'
  | 'parentGraphBuild'
  | 'ncclLoad'
  | 'ncclGetUniqueId'
  | 'ncclCommInitRank'
  | 'ncclCommDestroy'
  | 'ncclAllReduceF32'
  | 'ncclBroadcastF32'
  | 'ncclAllGatherF32'
  | 'ncclSendRecvF32'
> & {
  /**
   * `expectedRecords` is the number of times the event must have been recorded for this wait to
   * mean what its issuer meant. CUDA cannot check it (the ring handshake guarantees it there);
   * the CPU reference does, and refuses a wait enqueued before its record.
   */
  streamWaitEvent(stream: StreamHandle, event: EventHandle, expectedRecords?: number): void;
  /** Devices this backend sees. */
  deviceCount(): number;
  canAccessPeer(device: number, peer: number): boolean;
};
