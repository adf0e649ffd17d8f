/**
 * The aggregation on synthetic profiles whose answers are known by construction: constant costs
 * (every percentile is the constant), a ramp 1..100 (nearest-rank percentiles are the ranks),
 * transports split by layer, bytes that vary on one hop, and steps of two known lengths.
 */
import { strict as assert } from 'node:assert';
import { aggregate, type LatencySummary } from '../../src/profile/aggregate.js';
import { SEED_HOPS, type Hop } from '../../src/profile/profile-data.js';
import { syntheticProfile } from '../support/synthetic-profile.js';

const h = (hop: Hop) => SEED_HOPS.indexOf(hop);

function near(got: number, want: number, what: string, rel = 1e-3): void {
  assert.ok(Math.abs(got - want) <= rel * Math.abs(want), `${what}: ${got}, want ${want} (±${rel * 100}%)`);
}

function all(s: LatencySummary): number[] {
  return [s.min, s.median, s.p90, s.p99, s.max];
}

describe('profile aggregation', () => {
  it('one row per (layer, hop, transport): constant costs give that constant at every percentile', () => {
    // device = 10·(layer+1) + hop index, host = 1 + layer/2; transports: ll on layers 0-1, nccl on 2-3.
    const p = syntheticProfile({
      layers: 4,
      steps: 8,
      transport: ({ layer }) => (layer < 2 ? 'll' : 'nccl'),
      deviceUs: ({ layer, hop }) => 10 * (layer + 1) + h(hop),
      hostEnqueueUs: ({ layer }) => 1 + layer / 2,
    });
    const a = aggregate(p);
    assert.equal(a.joins, 4 * SEED_HOPS.length * 8);
    assert.equal(a.rows.length, 4 * SEED_HOPS.length);
    for (const r of a.rows) {
      assert.equal(r.n, 8);
      assert.equal(r.transport, r.layer < 2 ? 'll' : 'nccl');
      for (const v of all(r.device)) assert.equal(v, 10 * (r.layer + 1) + h(r.hop), `layer ${r.layer} ${r.hop} device`);
      for (const v of all(r.host)) assert.equal(v, 1 + r.layer / 2, `layer ${r.layer} ${r.hop} host`);
      assert.deepEqual(r.bytes, { min: 4096, max: 4096 });
    }
    // Rows come in walk order: layer, then hop.
    assert.deepEqual(
      a.rows.slice(0, SEED_HOPS.length).map((r) => [r.layer, r.hop]),
      SEED_HOPS.map((hop) => [0, hop]),
    );

    // Per (hop, transport) over the two layers each transport serves: 16 samples, 8 per layer.
    assert.equal(a.byHop.length, 2 * SEED_HOPS.length);
    for (const u of a.byHop) {
      const first = u.transport === 'll' ? 0 : 2;
      const lowV = 10 * (first + 1) + h(u.hop),
        highV = 10 * (first + 2) + h(u.hop);
      assert.equal(u.n, 16);
      assert.equal(u.layers, 2);
      // Rank 8 of 16 is the last sample of the lower layer; p90 (rank 15) is the upper layer.
      assert.equal(u.device.min, lowV);
      near(u.device.median, lowV, `${u.hop} ${u.transport} median`);
      near(u.device.p90, highV, `${u.hop} ${u.transport} p90`);
      assert.equal(u.device.max, highV);
    }
    // Per transport over all hops: ll holds layers 0-1, values 10..24 (hop indices 0..4 added).
    const ll = a.byTransport.find((t) => t.transport === 'll')!;
    assert.deepEqual(
      a.byTransport.map((t) => t.transport),
      ['ll', 'nccl'],
    );
    assert.equal(ll.n, 2 * SEED_HOPS.length * 8);
    assert.deepEqual(ll.hops, [...SEED_HOPS]);
    assert.equal(ll.device.min, 10);
    assert.equal(ll.device.max, 20 + SEED_HOPS.length - 1);
    assert.equal(ll.host.max, 1.5);
    // The heat map's cells: one per (layer, hop), here one transport each.
    assert.equal(a.byLayerHop.length, 4 * SEED_HOPS.length);
    const cell = a.byLayerHop.find((c) => c.layer === 3 && c.hop === 'wo')!;
    assert.deepEqual(cell.transports, ['nccl']);
    assert.equal(cell.device.median, 40 + h('wo'));
  });

  it('a ramp 1..100 µs reads median 50, p90 90, p99 99, max 100 (nearest rank, within 10^-3)', () => {
    const p = syntheticProfile({
      layers: 1,
      steps: 100,
      hops: ['wo'],
      deviceUs: ({ step }) => 100 - step,
      hostEnqueueUs: ({ step }) => 0.5 * (step + 1),
    });
    const [r] = aggregate(p).rows;
    assert.equal(r!.n, 100);
    near(r!.device.median, 50, 'median');
    near(r!.device.p90, 90, 'p90');
    near(r!.device.p99, 99, 'p99');
    assert.equal(r!.device.max, 100);
    assert.equal(r!.device.min, 1);
    near(r!.host.median, 25, 'host median');
    near(r!.host.p99, 49.5, 'host p99');
    assert.equal(r!.host.max, 50);
  });

  it("says when a join's bytes vary, and splits a (layer, hop) whose transport changed mid-run", () => {
    const p = syntheticProfile({
      layers: 2,
      steps: 6,
      bytes: ({ hop, step }) => (hop === 'ep fan-out' ? 1024 * (1 + (step % 3)) : 4096),
      transport: ({ layer, hop, step }) => (layer === 0 && hop === 'wo' && step >= 4 ? 'nccl' : 'll'),
    });
    const a = aggregate(p);
    for (const r of a.rows.filter((r) => r.hop === 'ep fan-out')) assert.deepEqual(r.bytes, { min: 1024, max: 3072 });
    for (const r of a.rows.filter((r) => r.hop === 'fan-out')) assert.deepEqual(r.bytes, { min: 4096, max: 4096 });
    const wo0 = a.rows.filter((r) => r.layer === 0 && r.hop === 'wo');
    assert.deepEqual(
      wo0.map((r) => [r.transport, r.n]),
      [
        ['ll', 4],
        ['nccl', 2],
      ],
    );
    const cell = a.byLayerHop.find((c) => c.layer === 0 && c.hop === 'wo')!;
    assert.deepEqual(cell.transports, ['ll', 'nccl']);
    assert.equal(cell.n, 6);
    assert.deepEqual(a.byTransport.find((t) => t.transport === 'nccl')!.hops, ['wo']);
  });

  it('tokens/s per step, over a moving window, and for the run', () => {
    // 4 rows a step; even steps take 2 ms (2000 tok/s), odd ones 4 ms (1000 tok/s).
    const p = syntheticProfile({ steps: 8, rows: () => 4, wallUs: (s) => (s % 2 === 0 ? 2000 : 4000) });
    const t = aggregate(p, { window: 2 }).throughput;
    assert.equal(t.window, 2);
    assert.deepEqual(
      t.points.map((x) => x.tokensPerS),
      [2000, 1000, 2000, 1000, 2000, 1000, 2000, 1000],
    );
    // Step 0 alone: 4 tokens in 2 ms; later, any two neighbours: 8 tokens in 6 ms.
    assert.equal(t.points[0]!.movingTokensPerS, 2000);
    for (const x of t.points.slice(1)) near(x.movingTokensPerS, 8 / 0.006, `step ${x.step} moving`, 1e-12);
    // The builder starts each step 0.05 ms after the last one's wall time.
    assert.equal(t.points[0]!.tMs, 0);
    near(t.points[1]!.tMs, 2.05, 'step 1 start', 1e-9);
    near(t.points[2]!.tMs, 2.05 + 4.05, 'step 2 start', 1e-9);
    const s = t.summary!;
    assert.equal(s.steps, 8);
    assert.equal(s.tokens, 32);
    assert.equal(s.wallUs, 24_000);
    near(s.overallTokensPerS, 32 / 0.024, 'overall', 1e-12);
    // Nearest rank 4 of 8 sorted rates [1000 ×4, 2000 ×4].
    assert.equal(s.medianTokensPerS, 1000);
    assert.equal(s.minTokensPerS, 1000);
    assert.equal(s.maxTokensPerS, 2000);
  });

  it('an empty profile aggregates to nothing, not to NaN', () => {
    const a = aggregate({ ...syntheticProfile({ steps: 0 }) });
    assert.equal(a.joins, 0);
    assert.deepEqual([a.rows, a.byHop, a.byTransport, a.byLayerHop, a.throughput.points], [[], [], [], [], []]);
    assert.equal(a.throughput.summary, null);
  });

  it('refuses a malformed join or step by naming it', () => {
    const bad = (edit: (p: ReturnType<typeof syntheticProfile>) => void) => {
      const p = syntheticProfile({ layers: 2, steps: 3 });
      edit(p);
      return () => aggregate(p);
    };
    assert.throws(
      bad((p) => {
        (p.joins[3] as { hop: string }).hop = 'bogus';
      }),
      /join 3 \(step 0, layer 0, hop "bogus"\): hop must be one of "fan-out"/,
    );
    assert.throws(
      bad((p) => {
        p.joins[2]!.deviceUs = -1;
      }),
      /join 2 .*: deviceUs must be a finite number ≥ 0, got -1/,
    );
    assert.throws(
      bad((p) => {
        p.joins[0]!.hostEnqueueUs = NaN;
      }),
      /join 0 .*: hostEnqueueUs must be a finite number ≥ 0, got NaN/,
    );
    assert.throws(
      bad((p) => {
        p.joins[1]!.deviceUs = 5e9;
      }),
      /join 1 .*: deviceUs 5000000000 µs is beyond/,
    );
    assert.throws(
      bad((p) => {
        p.joins[7]!.layer = 2;
      }),
      /join 7 \(step 0, layer 2, .*layer must be a whole number in \[0, 2\)/,
    );
    assert.throws(
      bad((p) => {
        p.steps[1]!.wallUs = 0;
      }),
      /step 1: wallUs must be a finite number > 0, got 0/,
    );
    assert.throws(
      bad((p) => {
        p.steps[2]!.rows = 0;
      }),
      /step 2: rows must be a whole number ≥ 1, got 0/,
    );
    assert.throws(
      bad((p) => {
        p.steps[2]!.step = 1;
      }),
      /step 1 appears twice/,
    );
    assert.throws(
      () => aggregate(syntheticProfile(), { window: 0 }),
      /window must be a whole number of steps ≥ 1, got 0/,
    );
  });
});
