/**
 * The soak's bookkeeping, without a device: how the time limit is shared out (budget.ts), that
 * the GPU plan's full counts fit its own default limit, and how RSS is judged (rss.ts).
 */
import { strict as assert } from 'node:assert';
import { Budget } from '../../bench/soak/budget.js';
import { CPU_PLAN, GPU_PLAN, plannedLoops, plannedSeconds } from '../../bench/soak/run-soak.js';
import { RssSeries, flatRss, rssTrend } from '../../bench/soak/rss.js';
import type { Snapshot } from '../../bench/soak/resources.js';

const MiB = 2 ** 20;
const snap = (rssBytes: number): Snapshot => ({
  rssBytes,
  heapUsedBytes: 0,
  fds: 0,
  threads: 0,
  deviceUsedBytes: 0,
  atS: 0,
});

describe('soak: the time limit, shared out', () => {
  it('gives each loop its part of what is left by what it is expected to take', () => {
    const b = new Budget(100, [10, 30, 60]);
    assert.ok(Math.abs(b.next().seconds - 10) < 0.1);
    assert.ok(Math.abs(b.next().seconds - (100 * 30) / 90) < 0.1, 'the first took none of its share: the rest have it');
    assert.ok(Math.abs(b.next().seconds - 100) < 0.1);
  });

  it('the GPU plan runs the full counts, and expects them to fit its default limit with time spare', () => {
    assert.deepEqual(
      [
        GPU_PLAN.steps,
        GPU_PLAN.loopbackSteps,
        GPU_PLAN.cycles,
        GPU_PLAN.loopbackCycles,
        GPU_PLAN.faults,
        GPU_PLAN.invalid,
      ],
      [100_000, 10_000, 500, 100, 20, 1000],
    );
    const s = plannedSeconds(GPU_PLAN);
    assert.ok(s < 0.85 * GPU_PLAN.timeLimitS, `${s.toFixed(0)} s expected, the limit ${GPU_PLAN.timeLimitS} s`);
    assert.ok(plannedSeconds(CPU_PLAN) < CPU_PLAN.timeLimitS);
    assert.equal(plannedLoops(GPU_PLAN).length, 15);
  });
});

describe('soak: RSS, judged', () => {
  const series = (rss: (i: number) => number, n = 1000, from = 10): RssSeries => {
    const s = new RssSeries(from, n);
    for (let i = from; i < n; i += s.every) s.add(i, rss(i));
    s.add(n, rss(n));
    return s;
  };
  const start = snap(300 * MiB);

  it('holds a flat series with noise and a step up and down, and a falling one', () => {
    const noisy = series((i) => 300 * MiB + ((i * 7919) % 5) * 0.3 * MiB + (i > 400 && i < 500 ? 2 * MiB : 0));
    assert.ok(rssTrend(noisy, start, 'steps').pass, rssTrend(noisy, start, 'steps').value);
    assert.ok(
      rssTrend(
        series((i) => 300 * MiB - i * 4096),
        start,
        'steps',
      ).pass,
    );
  });

  it('fails a slow climb whose last sample happens to land low', () => {
    const leak = series((i) => 300 * MiB + i * 4096 - (i === 1000 ? 3 * MiB : 0));
    const t = rssTrend(leak, start, 'steps');
    assert.ok(!t.pass, t.value);
    assert.match(t.value, /^\+3\.\d MiB over 990 steps \(\+3\.\d\d KiB a step, least squares through 22 samples\)$/);
    assert.ok(flatRss(start, snap(300 * MiB + 1000 * 4096 - 3 * MiB), '10 steps').pass, 'the endpoints alone miss it');
  });

  it('cannot draw a line through fewer than three samples, and does not pass then', () => {
    const s = new RssSeries(0, 10);
    s.add(0, 1);
    s.add(10, 1);
    assert.deepEqual(
      [rssTrend(s, start, 'cycles').pass, rssTrend(s, start, 'cycles').value],
      [false, '2 samples: too few for a line'],
    );
  });

  it("states the bound's warm-up, and 1% or 1 MiB, whichever is larger", () => {
    const c = flatRss(snap(50 * MiB), snap(51 * MiB), '3 cycles');
    assert.deepEqual([c.pass, c.limit], [true, 'within 1.0 MiB (1% or 1 MiB), from the end of a warm-up of 3 cycles']);
    assert.equal(flatRss(start, snap(303.5 * MiB), 'x').pass, false);
  });
});
