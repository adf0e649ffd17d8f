/**
 * The HDR histogram against exact answers: percentiles of the sorted samples (nearest rank),
 * on distributions that stress different parts of the bucket layout.
 */
import { strict as assert } from 'node:assert';
import { HdrHistogram } from '../../src/profile/hdr-histogram.js';
import { seededRandom } from '../support/seeded-random.js';

const PS = [0, 0.1, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100];

/** Nearest rank, written from the definition: the smallest sample with at least p% of samples at or below it. */
function exactPercentile(sorted: number[], p: number): number {
  const n = sorted.length;
  for (let i = 0; i < n; i++) if ((i + 1) * 100 >= p * n - 1e-9) return sorted[i]!;
  return sorted[n - 1]!;
}

const DISTRIBUTIONS: Record<string, (r: () => number) => number> = {
  'uniform 0..1000 µs': (r) => 1000 * r(),
  'exponential, mean 20 µs': (r) => -20 * Math.log(1 - r()),
  'log-normal (σ = 2)': (r) => 30 * Math.exp(2 * gaussian(r)),
  'pareto tail (α = 1.1)': (r) => Math.min(9e6, 5 * (1 - r()) ** (-1 / 1.1)),
  'constant 12.345 µs': () => 12.345,
  'bimodal 3 µs / 3 ms': (r) => (r() < 0.9 ? 3 + 0.01 * r() : 3000 + 50 * r()),
  'below lowest (0..0.05 µs)': (r) => 0.05 * r(),
  'integers with ties (0..20 µs)': (r) => Math.floor(21 * r()),
  'powers of two in units': (r) => 2 ** Math.floor(40 * r()) * 1e-5,
};

function gaussian(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

function sample(name: string, n: number, seed: number): number[] {
  const r = seededRandom(seed),
    draw = DISTRIBUTIONS[name]!;
  return Array.from({ length: n }, () => draw(r));
}

describe('HDR histogram', () => {
  for (const digits of [2, 3, 4]) {
    for (const name of Object.keys(DISTRIBUTIONS)) {
      it(`${digits} digits, ${name}: percentiles within 10^-${digits} of the exact ones, inside [min, max]`, () => {
        const values = sample(name, 20_000, digits * 101 + name.length);
        const h = new HdrHistogram({ digits });
        for (const v of values) h.record(v);
        const sorted = [...values].sort((a, b) => a - b);
        assert.equal(h.count, values.length);
        assert.equal(h.min, sorted[0]);
        assert.equal(h.max, sorted[sorted.length - 1]);
        const mean = values.reduce((s, v) => s + v, 0) / values.length;
        assert.ok(Math.abs(h.mean - mean) <= 1e-9 * Math.abs(mean), `mean ${h.mean} vs ${mean}`);
        // Relative bound above `lowest`; below it the bound is absolute (lowest·10^-digits).
        const rel = 10 ** -digits,
          abs = h.lowest * rel;
        for (const p of PS) {
          const want = exactPercentile(sorted, p),
            got = h.percentile(p);
          assert.ok(
            Math.abs(got - want) <= want * rel + abs,
            `p${p}: ${got} vs exact ${want} (error ${Math.abs(got - want) / want})`,
          );
          assert.ok(got >= h.min && got <= h.max, `p${p}: ${got} outside [${h.min}, ${h.max}]`);
        }
      });
    }
  }

  it('tells apart values 10^-digits apart that a coarser layout would merge', () => {
    const h = new HdrHistogram({ digits: 3 });
    // 100 samples at 1000 µs, 100 at 1002 µs: p50 must read the first, p51 the second.
    for (let i = 0; i < 100; i++) {
      h.record(1000);
      h.record(1002);
    }
    assert.ok(Math.abs(h.percentile(50) - 1000) <= 1, `p50 ${h.percentile(50)}`);
    assert.ok(Math.abs(h.percentile(51) - 1002) <= 1, `p51 ${h.percentile(51)}`);
    assert.ok(h.percentile(51) > h.percentile(50));
  });

  it('merging equals recording everything into one', () => {
    const values = sample('log-normal (σ = 2)', 30_000, 7);
    const whole = new HdrHistogram(),
      parts = [new HdrHistogram(), new HdrHistogram(), new HdrHistogram()];
    const r = seededRandom(8);
    for (const v of values) {
      whole.record(v);
      parts[Math.floor(3 * r())]!.record(v);
    }
    const merged = new HdrHistogram().merge(parts[0]!).merge(parts[1]!).merge(parts[2]!);
    assert.equal(merged.count, whole.count);
    assert.equal(merged.min, whole.min);
    assert.equal(merged.max, whole.max);
    // Bucket for bucket: every step of a fine percentile grid reads the same value.
    for (let p = 0; p <= 100; p += 0.25) assert.equal(merged.percentile(p), whole.percentile(p), `p${p}`);
    assert.ok(Math.abs(merged.mean - whole.mean) <= 1e-12 * whole.mean);
    for (const p of PS) assert.equal(merged.percentile(p), whole.percentile(p), `p${p}`);
    // An empty histogram merges as nothing.
    merged.merge(new HdrHistogram());
    assert.equal(merged.count, whole.count);
    assert.equal(merged.min, whole.min);
  });

  it('round-trips through JSON, compactly', () => {
    const values = sample('bimodal 3 µs / 3 ms', 10_000, 11);
    const h = new HdrHistogram({ digits: 2, lowest: 0.1, highest: 1e6 });
    for (const v of values) h.record(v);
    const text = JSON.stringify(h);
    const back = HdrHistogram.fromJSON(JSON.parse(text));
    const { hdr: _hdr, ...fields } = h.toJSON();
    assert.deepEqual({ ...back.toJSON(), hdr: undefined }, { ...fields, hdr: undefined });
    for (let p = 0; p <= 100; p += 0.25) assert.equal(back.percentile(p), h.percentile(p), `p${p}`);
    assert.equal(back.count, h.count);
    assert.equal(back.mean, h.mean);
    for (const p of PS) assert.equal(back.percentile(p), h.percentile(p), `p${p}`);
    // Two narrow modes at 2 digits fill a few dozen buckets, whatever the sample count; one value, one.
    assert.ok(h.toJSON().hdr.length < 600, `${h.toJSON().hdr.length} characters of encoded counts`);
    const c = new HdrHistogram();
    for (let i = 0; i < 1000; i++) c.record(42);
    assert.ok(c.toJSON().hdr.length < 100, `${c.toJSON().hdr.length} characters for one value`);
    assert.equal(HdrHistogram.fromJSON(c.toJSON()).percentile(50), 42);
    // And the empty one.
    const e = HdrHistogram.fromJSON(JSON.parse(JSON.stringify(new HdrHistogram())));
    assert.equal(e.count, 0);
    assert.ok(Number.isNaN(e.percentile(50)) && Number.isNaN(e.min) && Number.isNaN(e.max) && Number.isNaN(e.mean));
  });

  it('accepts the range ends: 0 and the highest value', () => {
    const h = new HdrHistogram({ highest: 1e7 });
    h.record(0);
    h.record(1e7);
    assert.equal(h.percentile(0), 0);
    // Rank 1 reads the bucket holding 0, one unit (lowest·10^-3) wide.
    assert.ok(h.percentile(50) >= 0 && h.percentile(50) <= h.lowest * 1e-3, `p50 ${h.percentile(50)}`);
    assert.equal(h.percentile(100), 1e7);
    assert.ok(Math.abs(h.percentile(99) - 1e7) <= 1e7 * 1e-3);
  });

  it('refuses bad values, options, percentiles, merges and JSON by name', () => {
    const h = new HdrHistogram();
    assert.throws(() => h.record(NaN), /cannot record NaN: values must be finite numbers ≥ 0/);
    assert.throws(() => h.record(-1), /cannot record -1/);
    assert.throws(() => h.record(Infinity), /cannot record Infinity/);
    assert.throws(() => h.record('3' as unknown as number), /cannot record 3/);
    assert.throws(() => h.record(2e7), /20000000 µs is above the highest trackable value, 10000000 µs/);
    assert.equal(h.count, 0, 'a refused value is not counted');
    assert.throws(() => new HdrHistogram({ digits: 0 }), /digits must be an integer from 1 to 5, got 0/);
    assert.throws(() => new HdrHistogram({ digits: 2.5 }), /digits must be an integer/);
    assert.throws(() => new HdrHistogram({ lowest: 0 }), /lowest must be a finite value > 0 µs, got 0/);
    assert.throws(() => new HdrHistogram({ lowest: 1, highest: 1 }), /highest must be finite and above lowest/);
    assert.throws(() => new HdrHistogram({ digits: 5, lowest: 1e-9, highest: 1e9 }), /more than 2\^53 units/);
    assert.throws(() => h.percentile(101), /percentile must be in \[0, 100\], got 101/);
    assert.throws(() => h.percentile(NaN), /percentile must be in \[0, 100\], got NaN/);
    assert.throws(() => h.merge(new HdrHistogram({ digits: 2 })), /cannot merge a histogram of 2 digits/);
    const good = (() => {
      const g = new HdrHistogram();
      g.record(5);
      return g.toJSON();
    })();
    assert.throws(() => HdrHistogram.fromJSON(null), /expected an object, got null/);
    assert.throws(() => HdrHistogram.fromJSON({ ...good, digits: undefined }), /digits must be a number/);
    assert.throws(
      () => HdrHistogram.fromJSON({ ...good, hdr: 42 }),
      /hdr must be a string \(HdrHistogram's compressed base64 encoding\), got number/,
    );
    assert.throws(
      () => HdrHistogram.fromJSON({ ...good, hdr: 'bm90IGEgaGlzdG9ncmFt' }),
      /hdr is not a compressed base64 HdrHistogram/,
    );
    assert.throws(() => HdrHistogram.fromJSON({ ...good, count: 2 }), /hdr holds 1 values, but count is 2/);
    const coarse = (() => {
      const g = new HdrHistogram({ digits: 2 });
      g.record(5);
      return g.toJSON();
    })();
    assert.throws(() => HdrHistogram.fromJSON({ ...good, hdr: coarse.hdr }), /hdr keeps 2 digits, but digits is 3/);
    assert.throws(() => HdrHistogram.fromJSON({ ...good, min: 9, max: 5 }), /min 9 and max 5 must satisfy/);
  });
});
