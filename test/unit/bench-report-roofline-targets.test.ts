/**
 * The one-GPU decode targets, on made-up results files: each case's figure is its `rooflinePct`
 * from the newest one-GPU file of the target card that measured it (a decode bench run before a
 * roofline suite run), judged against its goal; two-GPU, loopback and other cards' files never
 * stand in, and a case no file measured says so.
 */
import { strict as assert } from 'node:assert';
import { ROOFLINE_CASES, rooflineTargetLines } from '../../bench/report-roofline-targets.js';
import { isOneGpuResults, TARGET_CARD } from '../../bench/results-machine.js';
import type { Row } from '../../bench/results-types.js';

type Step = { transport: string; t: number; positions: string; median: number; floorMs: number; metric?: string };
const step = (s: Step): Row =>
  ({ op: 'step', metric: 'device', rooflinePct: (100 * s.floorMs) / s.median, ...s }) as unknown as Row;
const file = (name: string, date: string, label: string, rows: Row[], loopback = false) => ({
  file: `${name}.json`,
  data: { suite: 'decode', date, machine: { label, loopback }, rows },
});

describe('bench report: the one-GPU decode targets', () => {
  it('says "not measured yet" for every case with no one-GPU file', () => {
    const two = file('decode-2x', '2026-12-01', '2xH200', [
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 3.2, floorMs: 3.15 }),
    ]);
    // Loopback by its flag, and by its label alone.
    const loop = file('decode-lb', '2026-12-01', '1xH200', two.data.rows, true);
    const labelled = file('decode-lb2', '2026-12-01', '1xH200-loopback', two.data.rows);
    assert.ok(![two, loop, labelled].some(isOneGpuResults));
    assert.ok(isOneGpuResults(file('decode-1x', '2026-12-01', '1xH200', [])));
    const lines = rooflineTargetLines([two, loop, labelled]);
    assert.equal(lines.length, ROOFLINE_CASES.length);
    for (const l of lines) assert.deepEqual([l.measured, l.met], ['not measured yet', undefined]);
  });

  it('takes each case from the newest one-GPU file holding it, and judges its goal', () => {
    const old = file('decode-1x-a', '2026-11-01', '1xH200', [
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 3.4, floorMs: 3.15 }),
      step({ transport: 'unsharded+graph', t: 8, positions: '0-15', median: 9.0, floorMs: 8.2 }),
    ]);
    const young = file('decode-1x-b', '2026-12-01', '1xH200', [
      // The host row first: the device row must still be the one taken.
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 3.3, floorMs: 3.15, metric: 'host' }),
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 4.43, floorMs: 3.15 }),
      step({ transport: 'unsharded+graph', t: 1, positions: '4000', median: 3.5, floorMs: 3.2 }),
      step({ transport: 'unsharded', t: 1, positions: '4000', median: 3.3, floorMs: 3.2 }),
      step({ transport: 'unsharded', t: 1, positions: '0-63', median: 3.9, floorMs: 3.15 }),
    ]);
    const [t1, p4000, t8, eager] = rooflineTargetLines([young, old]);
    assert.deepEqual([t1!.met, t1!.from], [false, '`decode-1x-b`'], 'the newer file, though slower');
    assert.equal(t1!.measured, '71.1% (4.43 ms against 3.15 ms)');
    assert.deepEqual([p4000!.met, t8!.met, eager!.met], [true, true, true]);
    assert.equal(t8!.from, '`decode-1x-a`', 'a case only the older file measured');
    assert.match(eager!.measured, /^80\.8% /);
  });

  it("never takes another card's file, however new (the goals are the target card's)", () => {
    const h200 = file('decode-1x-h200', '2026-12-01', `1x${TARGET_CARD}`, [
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 4.06, floorMs: 3.15 }),
    ]);
    const h100 = file('decode-1x-h100', '2026-12-05', '1xH10080GBHBM3', [
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 5.52, floorMs: 4.75 }),
      step({ transport: 'unsharded+graph', t: 8, positions: '0-15', median: 14.39, floorMs: 12.37 }),
    ]);
    assert.ok(isOneGpuResults(h100), 'a one-GPU file all the same');
    const [t1, , t8] = rooflineTargetLines([h200, h100]);
    assert.deepEqual([t1!.from, t1!.met], ['`decode-1x-h200`', false]);
    assert.equal(t8!.measured, 'not measured yet');
  });

  it("takes a decode bench's run over a newer roofline suite run (ab-roofline's rounds of other builds)", () => {
    const bench = file('decode-1x-c', '2026-12-01', '1xH200', [
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 4.0, floorMs: 3.2 }),
    ]);
    const round = file('roofline-1x-d', '2026-12-02', '1xH200', [
      step({ transport: 'unsharded+graph', t: 1, positions: '0-63', median: 4.1, floorMs: 3.2 }),
      step({ transport: 'unsharded+graph', t: 8, positions: '0-15', median: 9.0, floorMs: 8.2 }),
    ]);
    round.data.suite = 'roofline';
    const [t1, , t8] = rooflineTargetLines([round, bench]);
    assert.equal(t1!.from, '`decode-1x-c`');
    assert.equal(t8!.from, '`roofline-1x-d`', 'a case no decode run measured');
  });
});
