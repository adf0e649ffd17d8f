/**
 * A sharded decode walk on its own runtime and link, for tests that drive steps by hand (the
 * join profile's, on the CPU reference and on the GPU): opened with the mailbox a profiled step
 * of one token needs, on the ranks `pair` names (two devices, or loopback), and closed walk,
 * link, runtime in that order, whatever the body threw.
 */
import { Runtime, type RuntimeOptions } from '../../src/runtime/runtime.js';
import { ArLink } from '../../src/runtime/link.js';
import { DeviceWalk, mailboxBytesFor } from '../../src/decode/device-walk.js';
import type { ModelConfig } from '../../src/decode/model-config.js';
import type { BackendKind } from '../../src/runtime/device-api.js';

export async function withShardedWalk(
  backend: BackendKind,
  cfg: ModelConfig,
  body: (walk: DeviceWalk) => Promise<void>,
  pair: Pick<RuntimeOptions, 'devices' | 'loopback'> = {},
): Promise<void> {
  const rt = await Runtime.open({ backend, ...pair, mailboxBytes: mailboxBytesFor(cfg, 1) });
  const link = await ArLink.open(rt);
  try {
    const walk = await DeviceWalk.load(rt, link, cfg, 'sharded', 1);
    try {
      await body(walk);
    } finally {
      await walk.close();
    }
  } finally {
    await link.close();
    await rt.close();
  }
}
