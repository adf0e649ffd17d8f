/**
 * `memra selfcheck`: open the runtime on the best available backend, prove the rings, the
 * handshake and the completion counter with real work, and report what was found. On one GPU
 * the runtime has one rank, and the same joins run from it to itself (no handshake to prove).
 */
import { Runtime, detectBackend } from '../runtime/runtime.js';
import type { BackendKind } from '../runtime/device-api.js';
import { defineCommand } from './options.js';
import { BACKEND_OPTION, JSON_OPTION } from './shared-options.js';

export const selfcheckCommand = defineCommand(
  {
    name: 'selfcheck',
    summary: 'prove the rings, the peer handshake and the completion counter with real work',
    description:
      'Open the runtime on the best available backend (CUDA where a GPU is visible, else the CPU reference), run N ordered cross-device joins (one GPU: from its one rank to itself) and check the result.',
    options: {
      backend: BACKEND_OPTION,
      joins: { type: 'int', min: 1, max: 10_000_000, default: 2000, value: 'N', help: 'ordered joins to run' },
      json: JSON_OPTION,
    },
  },
  async (v) => {
    const r = await selfcheck(v.backend as BackendKind | 'auto', v.joins);
    if (v.json) {
      console.log(JSON.stringify(r));
      return;
    }
    console.log(`backend: ${r.backend} (${r.why})`);
    console.log(`peer access: ${r.peer}`);
    console.log(
      `${r.joins} ordered joins: ${r.hostMicrosPerJoin.toFixed(2)} us of main-thread time each; result checked`,
    );
  },
);

export interface SelfcheckResult {
  backend: BackendKind;
  why: string;
  peer: string;
  joins: number;
  hostMicrosPerJoin: number;
  checked: boolean;
}

export async function selfcheck(backendArg: BackendKind | 'auto', joins = 2000): Promise<SelfcheckResult> {
  const detected = detectBackend();
  const backend = backendArg === 'auto' ? detected.backend : backendArg;
  const rt = await Runtime.open({ backend });
  try {
    const [a, b] = rt.ranks.length === 2 ? rt.ranks : [rt.ranks[0], rt.ranks[0]];
    const n = 4096;
    const pa = await a.alloc(n * 4),
      pb = await b.alloc(n * 4);
    const ready = await b.createEvent(),
      pushed = await a.createEvent();
    const t0 = performance.now();
    for (let i = 1; i <= joins; i++) {
      // One push per join from rank 0 into rank 1 (or into itself), ordered both ways as seed 000 requires.
      a.fill(pa, n, i);
      b.record(ready);
      a.wait(ready);
      a.copy(pb, pa, n * 4);
      a.record(pushed);
      b.wait(pushed);
      b.signal(0, i);
    }
    const hostMicrosPerJoin = ((performance.now() - t0) * 1000) / joins;
    await rt.waitCompleted(b.rank, 0, joins);
    const got = await b.downloadF32(pb, n);
    const checked = got.every((v) => v === joins);
    if (!checked) throw new Error(`selfcheck: rank ${b.rank} holds ${got[0]} after ${joins} joins, wanted ${joins}`);
    const peer =
      rt.ranks.length === 1
        ? `one rank (device ${a.ordinal}): no peer to reach`
        : !rt.peer
          ? 'not probed'
          : !(rt.peer.enabled[0][1] && rt.peer.enabled[1][0])
            ? rt.peer.reason.join('; ')
            : rt.peer.loopback
              ? `loopback (both ranks on device ${a.ordinal}): each rank's memory written by the other and read back`
              : 'proven both ways';
    return { backend, why: detected.why, peer, joins, hostMicrosPerJoin, checked };
  } finally {
    await rt.close();
  }
}
