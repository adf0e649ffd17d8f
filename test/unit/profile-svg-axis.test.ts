/**
 * The plots' axes: log axes end on whole powers of their base, place values log-linearly between
 * them and label their ticks; a linear axis runs from round tick to round tick.
 */
import { strict as assert } from 'node:assert';
import { LinearAxis, LogAxis, niceTicks } from '../../src/profile/svg-axis.js';

describe('SVG axes', () => {
  it('log axis, base 10: whole decades around the values, positions by log10', () => {
    const a = LogAxis.covering([3, 450], 100, 400);
    assert.deepEqual([a.lo, a.hi], [1, 1000]);
    assert.equal(a.at(1), 100);
    assert.equal(a.at(1000), 400);
    // 10 is a third of the way from 1 to 1000 on a log scale.
    assert.ok(Math.abs(a.at(10) - 200) < 1e-9);
    // A power of ten is not rounded up to the next decade.
    assert.deepEqual([LogAxis.covering([1000], 0, 1).lo, LogAxis.covering([1000], 0, 1).hi], [1000, 10000]);
    const labelled = a
      .ticks((v) => `${v}`)
      .filter((t) => t.label !== null)
      .map((t) => t.label);
    assert.deepEqual(labelled, ['1', '10', '100', '1000']);
  });

  it('log axis, base 2: powers of two, every one labelled up to ten of them, and a y axis runs upwards', () => {
    const a = LogAxis.covering([4096, 1048576], 300, 20, 2);
    assert.deepEqual([a.lo, a.hi], [4096, 1048576]);
    const ticks = a.ticks((v) => `${v / 1024}K`);
    assert.deepEqual(
      ticks.map((t) => t.label),
      ['4K', '8K', '16K', '32K', '64K', '128K', '256K', '512K', '1024K'],
    );
    assert.equal(ticks[0]!.at, 300);
    assert.equal(ticks[8]!.at, 20);
    // 8 powers span 280 px: 35 px each, downwards on the page.
    assert.ok(Math.abs(ticks[1]!.at - 265) < 1e-9);
    // 2^0 .. 2^30: 31 powers, labels thinned to every 4th (at most ten).
    const wide = LogAxis.covering([1, 2 ** 30], 0, 1, 2).ticks(String);
    assert.equal(wide.length, 31);
    assert.deepEqual(
      wide.filter((t) => t.label).map((t) => t.value),
      [1, 16, 256, 4096, 65536, 2 ** 20, 2 ** 24, 2 ** 28],
    );
  });

  it('log axis puts zeros and negatives at its low end', () => {
    const a = LogAxis.covering([0, -5, 20], 0, 100);
    assert.deepEqual([a.lo, a.hi], [10, 100]);
    assert.equal(a.at(0), 0);
    assert.equal(a.at(-5), 0);
  });

  it('linear axis: round ticks covering the range, negatives included', () => {
    assert.deepEqual(niceTicks(0, 9.3), [0, 2, 4, 6, 8, 10]);
    // A fifth of 1.55 is 0.31: the next of 0.1, 0.2, 0.5 is 0.5.
    assert.deepEqual(niceTicks(-0.35, 1.2), [-0.5, 0, 0.5, 1, 1.5]);
    const a = LinearAxis.covering(-3, 7, 0, 150);
    assert.deepEqual([a.lo, a.hi], [-4, 8]);
    assert.equal(a.at(0), 50);
    assert.deepEqual(
      a.ticks(String).map((t) => t.label),
      ['-4', '-2', '0', '2', '4', '6', '8'],
    );
  });
});
