/** What the main thread hands a pinned device worker at spawn (`workerData`). */
import type { MessagePort } from 'node:worker_threads';
import type { BackendKind } from '../runtime/device-api.js';
import type { CpuWorldInit } from '../runtime/cpu-world.js';

export interface WorkerInit {
  rank: number;
  ordinal: number;
  /** Bind the device in loopback: the runtime's other rank shares it (RuntimeOptions.loopback). */
  loopback: boolean;
  backend: BackendKind;
  /** Present for the CPU backend: the shared emulated devices. */
  cpuWorld?: CpuWorldInit;
  /** This worker's command ring (it is the consumer). */
  ring: SharedArrayBuffer;
  /** The peer's ring, read-only here: its tail is the peer's "enqueued up to N". Absent with one rank. */
  peerRing?: SharedArrayBuffer;
  /** Where this worker logs when it enqueued each join that waits on the device (join-log.ts). */
  joinLog: SharedArrayBuffer;
  /** Completion counters the GPU writes and the main thread reads: a spare page plus the slots. */
  completion: SharedArrayBuffer;
  completionSlots: number;
  /** The mailbox (ToMailbox's target) starts this many bytes after the counters' start. */
  mailboxOffset: number;
  mailboxBytes: number;
  /** The comlink control-plane port. */
  control: MessagePort;
  /** Spin this long for a record (or a peer's record) before sleeping. */
  spinMicros: number;
  /** A handshake (afterPeer) that waits longer than this refuses its record. */
  handshakeTimeoutMs: number;
  /** Load the fault hooks (`hang`, `crash`, `failStream`) into the control plane (RuntimeOptions.faultHooks). */
  faultHooks: boolean;
  /** The CPU core to pin this worker's thread to (runtime/cpu-placement.ts); unset: not pinned. */
  cpu?: number;
}

/** A fault the worker reports to the main thread on `parentPort`. */
export interface WorkerFault {
  type: 'fault';
  rank: number;
  seq: number;
  op: number;
  message: string;
  code: string;
}
