/**
 * The decode walk itself (ring records, hops, transports, the mailbox read-back) on the CPU
 * reference's two devices, against the in-process model: bit-identical with every CPU transport,
 * sharded or not, at t = 1 and t = 3, and with a per-layer mix; the allreduce variant within
 * rounding; the unsharded walk on one worker, and the sharded one in loopback (both ranks on one
 * emulated device). The CPU devices also check every cross-rank access is ordered.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { Session } from '../../src/decode/session.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { ArLink } from '../../src/runtime/link.js';
import { DeviceWalk } from '../../src/decode/device-walk.js';
import { presetByName } from '../../src/decode/model-config.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../../src/decode/decode-config.js';
import type { TransportName } from '../../src/runtime/transports/transport.js';
import { oracleRun, relL2, runSession, sameBits, type Run } from '../support/decode-run.js';

const CPU_TRANSPORTS: TransportName[] = ['host', 'peer', 'push', 'oneshot', 'll'];
const STEPS = 12;

const withTransport = (t: TransportName, wo: 'concat' | 'allreduce' = 'concat'): DecodeConfig => ({
  ...DEFAULT_CONFIG,
  transport: { default: t, layers: [] },
  wo,
});

type Ref = Run;

const reference = (t: number, start: number[]): Ref => {
  assert.equal(start.length, t);
  return oracleRun(presetByName('tiny'), start, STEPS);
};

const walk = (s: Session, start: number[], force?: number[][]): Promise<Ref> => runSession(s, start, STEPS, force);

describe('the decode walk on the CPU reference devices', function () {
  this.timeout(300_000);

  for (const t of [1, 3]) {
    it(`t=${t}: unsharded, and sharded with every transport and a per-layer mix, equal the in-process model bit for bit`, async () => {
      const start = Array.from({ length: t }, () => randomInt(0, 256));
      const ref = reference(t, start);
      const check = (got: Ref, what: string): void => {
        for (let i = 0; i < STEPS; i++) {
          assert.deepEqual(got.next[i], ref.next[i], `${what} step ${i}: tokens`);
          assert.ok(sameBits(got.hidden[i]!, ref.hidden[i]!), `${what} step ${i}: hidden state differs`);
        }
      };
      const un = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: t, layout: 'unsharded' });
      try {
        assert.equal(un.runtime.ranks.length, 1, 'the unsharded walk runs on one worker');
        check(await walk(un, start), 'unsharded');
      } finally {
        await un.close();
      }
      const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: t });
      try {
        for (const tr of CPU_TRANSPORTS) {
          await s.setConfig(withTransport(tr));
          check(await walk(s, start), tr);
        }
        await s.setConfig({
          ...DEFAULT_CONFIG,
          transport: { default: 'push', layers: [{ from: 1, to: 1, transport: 'll' }] },
        });
        check(await walk(s, start), 'push then ll');
      } finally {
        await s.close();
      }
    });
  }

  it('t=1, loopback (both ranks on one emulated device): the sharded walk with every CPU transport and through the EP graph equals the model bit for bit', async () => {
    const t = 1;
    const start = Array.from({ length: t }, () => randomInt(0, 256));
    const ref = reference(t, start);
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: t, runtime: { loopback: true } });
    try {
      assert.deepEqual([s.layout, s.plan.devices, s.runtime.loopback], ['sharded', [0, 0], true]);
      for (const [name, dc] of [
        ...CPU_TRANSPORTS.map((tr) => [tr, withTransport(tr)] as const),
        ['ep graph', { ...withTransport('ll'), epGraph: true }] as const,
      ]) {
        await s.setConfig(dc);
        const got = await walk(s, start);
        for (let i = 0; i < STEPS; i++) {
          assert.deepEqual(got.next[i], ref.next[i], `loopback ${name} step ${i}: tokens`);
          assert.ok(sameBits(got.hidden[i]!, ref.hidden[i]!), `loopback ${name} step ${i}: hidden state differs`);
        }
      }
      assert.equal(
        s.epGraph().dispatches,
        STEPS * presetByName('tiny').layers,
        'every layer of every step went through the EP graph',
      );
      await assert.rejects(s.setConfig(withTransport('nccl')), /the nccl transport cannot run in loopback/);
    } finally {
      await s.close();
    }
  });

  // The two partial sums round differently from the model's one sum (relative L2 ~1.5e-7 a step).
  // Now and then an element of the MoE input lies within that rounding of a midpoint between two
  // e4m3 codes (docs/model.md), and the two round it to neighbouring codes: the step moves by up to
  // ~1e-4 (a scan of 256 start pairs: median 1.5e-7, four pairs past 1e-5, the worst 7.2e-5). So,
  // as in the replicated walk's test: every step within 1e-3 (a wrong sum, a lost half of `wo`, is
  // O(1)), and the median step within 1e-5 (a systematic loss lands near 1e-3 on every step).
  it('wo allreduce stays within rounding of the model under teacher forcing: every step within relative L2 1e-3, the median within 1e-5', async () => {
    const t = 2;
    const start = Array.from({ length: t }, () => randomInt(0, 256));
    const ref = reference(t, start);
    const s = await Session.open({
      backend: 'cpu',
      model: 'tiny',
      maxBatch: t,
      config: withTransport('ll', 'allreduce'),
    });
    try {
      const got = await walk(s, start, [start, ...ref.next.slice(0, -1)]);
      const errs = ref.hidden.map((h, i) => relL2(got.hidden[i]!, h));
      for (const [i, e] of errs.entries()) assert.ok(e <= 1e-3, `start ${start}, step ${i}: relative L2 ${e}`);
      const median = [...errs].sort((x, y) => x - y)[STEPS >> 1]!;
      assert.ok(median <= 1e-5, `start ${start}: median relative L2 ${median} (by step: ${errs.join(' ')})`);
    } finally {
      await s.close();
    }
  });

  it('a model that does not fit fails by name and leaves every byte it took freed', async () => {
    // small's shards: rank 0 ~71 MiB of bf16, rank 1 ~55 MiB. In 64 MiB devices rank 1's load
    // succeeds and rank 0's fails, so the failure must also free what the other rank finished.
    const arena = 64 * 2 ** 20;
    const rt = await Runtime.open({ backend: 'cpu', cpuArenaBytes: arena });
    const link = await ArLink.open(rt);
    try {
      await assert.rejects(
        DeviceWalk.load(rt, link, presetByName('small'), 'sharded', 1),
        /cudaMalloc\(bytes=\d+\) on device 0: out of memory/,
      );
      // Everything the failed load took is back: most of each arena can be taken again.
      for (const r of rt.ranks) await r.free(await r.alloc(arena - 4 * 2 ** 20));
    } finally {
      await link.close();
      await rt.close();
    }
  });
});
