/**
 * A device-side wait whose partner never comes must refuse within its spin bound (40043 on the
 * rank that waited, 0 on the other), and the link must work again after `resetBarrier`.
 */
import { strict as assert } from 'node:assert';
import type { Runtime } from '../../src/runtime/runtime.js';
import type { ArLink, PerRank } from '../../src/runtime/link.js';
import { openTransport } from '../../src/runtime/transports/open.js';
import type { TransportName } from '../../src/runtime/transports/transport.js';

export async function refusalThenRecovery(
  rt: Runtime,
  link: ArLink,
  transport: TransportName,
  n: number,
  launchOnRank0Only: (x: PerRank) => void,
): Promise<void> {
  const [a, b] = rt.pair('the refusal check');
  const x = [await a.alloc(n * 4), await b.alloc(n * 4)] as const;
  await link.setSpinLimit(2e7); // ~10 ms of SM clock
  const t0 = performance.now();
  launchOnRank0Only(x);
  assert.deepEqual(await link.barrierErrors(), [40043, 0]);
  const waited = performance.now() - t0;
  assert.ok(waited < 2000, `refused within its bound (${waited.toFixed(1)} ms), no hang`);
  await link.resetBarrier();
  await link.setSpinLimit(2e9);
  const t = await openTransport(transport, link);
  a.fill(x[0], n, 5);
  b.fill(x[1], n, 6);
  t.allReduce(x, n);
  await rt.drain();
  for (const r of [0, 1])
    assert.ok(
      (await [a, b][r]!.downloadF32(x[r]!, n)).every((v) => v === 11),
      `rank ${r} after the reset`,
    );
  assert.deepEqual(await link.barrierErrors(), [0, 0]);
  await a.free(x[0]);
  await b.free(x[1]);
}
