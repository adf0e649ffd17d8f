/**
 * The two ways a two-rank runtime runs: on two devices, and in loopback (both ranks on device 0,
 * one context). The CPU suites run their two-rank cases both ways, so the loopback paths are
 * tested everywhere the two-device ones are.
 */
import type { PeerStatus } from '../../src/runtime/peer.js';
import type { RuntimeOptions } from '../../src/runtime/runtime.js';

export interface PairMode {
  name: string;
  loopback: boolean;
  options: Pick<RuntimeOptions, 'devices' | 'loopback'>;
}

export const TWO_DEVICES: PairMode = { name: 'two devices', loopback: false, options: { devices: [0, 1] } };
export const LOOPBACK: PairMode = { name: 'loopback', loopback: true, options: { devices: [0, 0], loopback: true } };
export const PAIR_MODES: readonly PairMode[] = [TWO_DEVICES, LOOPBACK];

/** A loopback runtime's peer status: nothing enabled, each direction checked by a write-and-read-back. */
export const LOOPBACK_PEER: PeerStatus = {
  enabled: [
    [true, true],
    [true, true],
  ],
  reason: [],
  loopback: true,
};
