/**
 * Peer access, proven rather than assumed. The driver's `canAccessPeer` and a successful
 * `cudaDeviceEnablePeerAccess` say a kernel MAY store into the peer's memory; seed 000 records a
 * store that "read correctly at some sizes and returned the local partial at others". So each
 * direction is kept enabled only after a kernel on one device has written a pattern into the
 * other's memory and the owner has read every word of it back.
 *
 * In loopback both ranks are on one device, and peer access from a device to itself is neither
 * needed nor allowed (CUDA refuses it): the ranks share the device's one context. What is left
 * to prove is what the ranks rely on instead, that each reaches the memory the other allocated:
 * the same write-and-read-back, from each rank's worker into the other's allocation.
 */
import { probePattern } from './binding.js';
import type { Rank } from './rank.js';

export interface PeerStatus {
  /** `enabled[a][b]`: device of rank a may dereference rank b's pointers in kernels. */
  enabled: [[boolean, boolean], [boolean, boolean]];
  /** Why a direction is off, when it is. */
  reason: string[];
  /** Both ranks on one device: nothing was enabled, and each direction was checked as above. */
  loopback: boolean;
}

const PROBE_WORDS = 64 * 1024 + 3; // 256 KiB and an odd tail: more than one block, not a round size

export async function probePeerAccess(ranks: readonly [Rank, Rank], loopback = false): Promise<PeerStatus> {
  const status: PeerStatus = {
    enabled: [
      [true, false],
      [false, true],
    ],
    reason: [],
    loopback,
  };
  for (const [src, dst] of [
    [0, 1],
    [1, 0],
  ] as const) {
    const from = ranks[src],
      to = ranks[dst];
    if (!loopback) {
      if (!(await from.control.call('canAccessPeer', to.ordinal))) {
        status.reason.push(
          `rank ${src} -> ${dst}: the driver reports no peer access from device ${from.ordinal} to ${to.ordinal}`,
        );
        continue;
      }
      await from.control.call('enablePeer', to.ordinal);
    }
    const wrong = await writeAndReadBack(from, to);
    if (wrong === undefined) {
      status.enabled[src][dst] = true;
      continue;
    }
    if (!loopback) await from.control.call('disablePeer', to.ordinal);
    const what = loopback
      ? `in loopback (both ranks on device ${from.ordinal}), a kernel of rank ${src} wrote ${PROBE_WORDS} words into memory rank ${dst} allocated`
      : `peer access ${from.ordinal} -> ${to.ordinal} is claimed by the driver and enabling it succeeded, but a kernel on device ${from.ordinal} wrote ${PROBE_WORDS} words into device ${to.ordinal}`;
    throw new Error(
      `${what} and ${wrong}. ${loopback ? 'The ranks do not share memory on this machine.' : 'Peer stores are not safe on this machine.'}`,
    );
  }
  return status;
}

/** A kernel of `from` writes a fresh pattern into memory `to` owns; what came back wrong, or undefined. */
async function writeAndReadBack(from: Rank, to: Rank): Promise<string | undefined> {
  const buf = await to.alloc(PROBE_WORDS * 4);
  try {
    await to.upload(buf, new Uint32Array(PROBE_WORDS).fill(0xdeadbeef));
    const seed = (Math.random() * 2 ** 32) >>> 0;
    from.probeWrite(buf, PROBE_WORDS, seed);
    await from.drain();
    const got = new Uint32Array((await to.download(buf, PROBE_WORDS * 4)).buffer);
    let bad = -1,
      wrong = 0;
    for (let i = 0; i < PROBE_WORDS; i++) {
      if (got[i] !== probePattern(seed, i)) {
        wrong++;
        if (bad < 0) bad = i;
      }
    }
    if (wrong === 0) return undefined;
    return `${wrong} came back wrong (first at word ${bad}: got 0x${got[bad]!.toString(16)}, wanted 0x${probePattern(seed, bad).toString(16)})`;
  } finally {
    await to.free(buf);
  }
}
