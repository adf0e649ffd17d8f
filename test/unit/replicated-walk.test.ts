/**
 * The replicated walk (config `walk: "replicated"`) on the CPU reference's two devices and in
 * loopback, against the in-process model: tokens and hidden states bit for bit with every CPU
 * transport and a per-layer mix, at t = 1 and t = 3, and rank 1's copy of h the same bits as
 * rank 0's after every step; three joins a layer, named; the step graph; `wo: "allreduce"` within
 * rounding yet the same bits on both ranks; the walk switched between steps; route validation and
 * the EP step timer. The CPU devices also check every cross-rank access is ordered.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { Session } from '../../src/decode/session.js';
import { presetByName } from '../../src/decode/model-config.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../../src/decode/decode-config.js';
import type { TransportName } from '../../src/runtime/transports/transport.js';
import { REPLICATED_HOPS, SEED_HOPS, type Hop } from '../../src/profile/profile-data.js';
import { expectRun, oracleRun, relL2, runSession, sameBits } from '../support/decode-run.js';
import { withShardedWalk } from '../support/sharded-walk.js';
import { LOOPBACK, TWO_DEVICES } from '../support/pair-modes.js';

const CPU_TRANSPORTS: TransportName[] = ['host', 'peer', 'push', 'oneshot', 'll'];
const STEPS = 8;
const tiny = presetByName('tiny');

const replicated = (transport: TransportName, extra: Partial<DecodeConfig> = {}): DecodeConfig => ({
  ...DEFAULT_CONFIG,
  walk: 'replicated',
  transport: { default: transport, layers: [] },
  ...extra,
});

const randomStart = (t: number): number[] => Array.from({ length: t }, () => randomInt(0, tiny.vocab));

describe('the replicated walk on the CPU reference devices', function () {
  this.timeout(300_000);

  for (const t of [1, 3]) {
    it(`t=${t}: every CPU transport and a per-layer mix equal the in-process model bit for bit, rank 1's h too`, async () => {
      const start = randomStart(t);
      const ref = oracleRun(tiny, start, STEPS);
      const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: t, runtime: TWO_DEVICES.options });
      try {
        for (const tr of CPU_TRANSPORTS) {
          await s.setConfig(replicated(tr));
          await expectRun(s, ref, start, tr);
        }
        await s.setConfig({
          ...replicated('push'),
          transport: { default: 'push', layers: [{ from: 1, to: 1, transport: 'll' }] },
        });
        await expectRun(s, ref, start, 'push then ll');
      } finally {
        await s.close();
      }
    });
  }

  it('t=2, loopback (both ranks on one emulated device): every CPU transport equals the model bit for bit', async () => {
    const start = randomStart(2);
    const ref = oracleRun(tiny, start, STEPS);
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2, runtime: LOOPBACK.options });
    try {
      assert.deepEqual([s.layout, s.plan.devices, s.runtime.loopback], ['sharded', [0, 0], true]);
      for (const tr of CPU_TRANSPORTS) {
        await s.setConfig(replicated(tr));
        await expectRun(s, ref, start, `loopback ${tr}`);
      }
    } finally {
      await s.close();
    }
  });

  it('has three joins a layer, named and sized, each received on rank 0; with wo allreduce two; eager and from the step graph', async () => {
    const t = 2;
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: t });
    try {
      const { hidden: H, heads: N, headDim: Dv, topk: K, layers: L } = s.model;
      const bytes: Partial<Record<Hop, number>> = {
        'head all-gather': t * (N / 2) * Dv * 4,
        'wo all-gather': t * (H / 2) * 4,
        wo: t * H * 4,
        'ep exchange': t * K * H * 4,
      };
      // The seed walk's sizes and receivers are join-profile.test.ts's: here only its count and order.
      const check = async (dc: DecodeConfig, hops: readonly Hop[], what: string): Promise<void> => {
        await s.setConfig(dc);
        let cur = randomStart(t);
        for (let step = 0; step < 3; step++) {
          const r = await s.stepDetailed(cur);
          const joins = await r.joins!;
          assert.equal(joins.length, hops.length * L, `${what} step ${step}: ${hops.length} joins a layer`);
          assert.deepEqual(
            joins.map((j) => [j.layer, j.hop]),
            Array.from({ length: L }, (_, l) => hops.map((h) => [l, h])).flat(),
            `${what} step ${step}: the hops in walk order`,
          );
          for (const j of dc.walk === 'replicated' ? joins : []) {
            const where = `${what} step ${step} layer ${j.layer} ${j.hop}`;
            assert.equal(j.bytes, bytes[j.hop], `${where}: bytes`);
            assert.equal(j.rank, 0, `${where}: timed on rank 0`);
            assert.equal(j.transport, dc.transport.default, `${where}: transport`);
            assert.ok(Number.isFinite(j.deviceUs) && j.deviceUs >= 0, `${where}: device ${j.deviceUs} µs`);
          }
          cur = r.next;
        }
      };
      const wo: readonly Hop[] = ['wo', 'ep exchange'];
      for (const tr of ['push', 'll'] as const) {
        await check(replicated(tr, { profile: true }), REPLICATED_HOPS, tr);
        await check(replicated(tr, { profile: true, stepGraph: true }), REPLICATED_HOPS, `${tr} step graph`);
        await check(replicated(tr, { profile: true, wo: 'allreduce' }), wo, `${tr} wo allreduce`);
      }
      assert.deepEqual(s.stepGraph().refused, []);
      // The same session back on the seed walk: its five again.
      await check({ ...replicated('ll', { profile: true }), walk: 'seed' }, SEED_HOPS, 'seed again');
    } finally {
      await s.close();
    }
  });

  it('from the step graph (ll: per-rank graphs; push: one multi-device graph): the model bit for bit, one capture per batch size', async () => {
    const start = randomStart(3);
    const ref = oracleRun(tiny, start, STEPS);
    const ref1 = oracleRun(tiny, [start[0]!], STEPS);
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 3 });
    try {
      for (const tr of ['ll', 'push'] as const) {
        await s.setConfig(replicated(tr, { stepGraph: true }));
        const before = s.stepGraph();
        await expectRun(s, ref, start, `${tr} step graph t=3`);
        await expectRun(s, ref1, [start[0]!], `${tr} step graph t=1`);
        const after = s.stepGraph();
        assert.deepEqual(after.refused, [], tr);
        assert.equal(after.captures - before.captures, 2, `${tr}: one capture per batch size`);
        assert.equal(after.launches - before.launches, 2 * STEPS, `${tr}: a launch per step`);
      }
    } finally {
      await s.close();
    }
  });

  // A sum of two partials rounds differently from the one sum, by ~1e-7; now and then an element
  // of the MoE input then sits across an e4m3 rounding boundary and the step moves by ~1e-4
  // (test/gpu/decode.test.ts has the figures). So: every step within 1e-3, the median within 1e-5.
  it("wo allreduce: within rounding of the model under teacher forcing, the same bits on both ranks and with every transport's all-reduce", async () => {
    const t = 2;
    const start = randomStart(t);
    const ref = oracleRun(tiny, start, STEPS);
    const force = [start, ...ref.next.slice(0, -1)];
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: t, config: replicated('ll') });
    try {
      let first: Float32Array[] | undefined;
      for (const tr of ['ll', 'oneshot', 'push', 'host'] as const) {
        await s.setConfig(replicated(tr, { wo: 'allreduce' }));
        s.reset();
        const hidden: Float32Array[] = [];
        for (let i = 0; i < STEPS; i++) {
          const r = await s.stepDetailed(force[i]!, { hidden: true });
          hidden.push(r.hidden!);
          const [h0, h1] = await s.residuals();
          assert.ok(
            sameBits(h1!, h0!),
            `${tr} step ${i}: the ranks' h differ (a rank-order sum gives both the same bits)`,
          );
        }
        const errs = hidden.map((h, i) => relL2(h, ref.hidden[i]!));
        for (const [i, e] of errs.entries()) assert.ok(e <= 1e-3, `${tr} step ${i}: relative L2 ${e}`);
        const median = [...errs].sort((x, y) => x - y)[errs.length >> 1]!;
        assert.ok(median <= 1e-5, `${tr}: median relative L2 ${median}`);
        first ??= hidden;
        for (let i = 0; i < STEPS; i++)
          assert.ok(sameBits(hidden[i]!, first[i]!), `${tr} step ${i}: not the bits of ll's all-reduce`);
      }
    } finally {
      await s.close();
    }
  });

  it('switching the walk between steps keeps the tokens right (eager and from the step graph)', async () => {
    const t = 3,
      steps = 12;
    const start = randomStart(t);
    const ref = oracleRun(tiny, start, steps);
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: t });
    try {
      // Every step a walk at random, but both walks and both paths are sure to run, each after the other.
      const plan = Array.from({ length: steps }, (_, i) => (i < 4 ? i : randomInt(0, 4)));
      await expectRun(s, ref, start, 'switched', async (i) => {
        const walk = plan[i]! % 2 === 0 ? 'seed' : 'replicated';
        const stepGraph = plan[i]! >= 2;
        await s.setConfig({ ...DEFAULT_CONFIG, walk, stepGraph });
        return `${walk}${stepGraph ? ' step graph' : ''}`;
      });
    } finally {
      await s.close();
    }
  });

  it("validates its routes (the seed walk's, bit for bit) and times its EP steps, layer by layer", async () => {
    await withShardedWalk('cpu', tiny, async (walk) => {
      const L = tiny.layers;
      const tok = [randomInt(0, tiny.vocab)];
      const routesOf = async (w: 'seed' | 'replicated'): Promise<{ next: number[]; routes: Int32Array[] }> => {
        const dc: DecodeConfig = { ...replicated('ll'), walk: w, validate: true };
        await walk.prepare(dc);
        const r = await walk.step(tok, [0], dc, false);
        return { next: r.next, routes: r.routes! };
      };
      const seed = await routesOf('seed'),
        rep = await routesOf('replicated');
      assert.deepEqual(rep.next, seed.next);
      assert.equal(rep.routes.length, L);
      for (let l = 0; l < L; l++) assert.deepEqual(rep.routes[l], seed.routes[l], `layer ${l}: routes`);
      const dc = replicated('push');
      await walk.prepare(dc);
      await walk.timeEpSteps(true);
      await walk.step(tok, [1], dc, false);
      const us = await walk.epStepTimes();
      assert.equal(us.length, L, 'one EP step a layer');
      for (const [l, x] of us.entries()) assert.ok(Number.isFinite(x) && x >= 0, `layer ${l}: ${x} µs`);
      await walk.timeEpSteps(false);
    });
  });
});

describe('the replicated walk, refused where it cannot run', function () {
  this.timeout(60_000);

  it('refuses the EP graph by name and keeps the config in force; an unsharded session takes the field and has no hops', async () => {
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 1, config: replicated('ll') });
    try {
      await assert.rejects(
        s.setConfig({ ...replicated('ll'), epGraph: true }),
        /\$\.epGraph: cannot be on with \$\.walk "replicated"/,
      );
      assert.equal(s.decodeConfig.walk, 'replicated');
      assert.equal(s.decodeConfig.epGraph, false);
      assert.equal((await s.step([1])).length, 1, 'the session is still usable');
    } finally {
      await s.close();
    }
    const start = randomStart(1);
    const un = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 1, layout: 'unsharded' });
    try {
      await un.setConfig(replicated('ll'));
      const got = await runSession(un, start, 4);
      assert.deepEqual(got.next, oracleRun(tiny, start, 4).next);
      assert.equal((await un.residuals()).length, 1, 'one rank holds h');
    } finally {
      await un.close();
    }
  });
});
