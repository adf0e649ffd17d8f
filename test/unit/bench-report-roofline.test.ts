/**
 * The README's one-GPU roofline and kernel tables, on made-up results files: each machine's rows
 * come from its newest file holding them (a decode bench run before a roofline suite run), the
 * floor column is the row's own, and the kernels' shares add up over the step's kernels.
 */
import { strict as assert } from 'node:assert';
import { kernelTable, rooflineTable } from '../../bench/report-roofline.js';
import type { Machine, NamedResults, Row } from '../../bench/results-types.js';

const machine = (label: string): Machine => ({ label, node: 'v20.20.2' }) as unknown as Machine;
const row = (op: string, transport: string, median: number, more: Partial<Row> = {}): Row =>
  ({
    suite: 'decode',
    op,
    transport,
    bytes: 0,
    preset: 'bench',
    unit: 'ms',
    median,
    p90: median,
    p99: median,
    n: 8,
    min: median,
    max: median,
    mean: median,
    method: 'made up',
    samples: [],
    ...more,
  }) as Row;
const file = (name: string, date: string, rows: Row[]): NamedResults => ({
  file: name,
  data: { suite: 'decode', date, machine: machine('1xH200'), rows },
});

describe('bench report: the one-GPU roofline and kernel tables', () => {
  const older = file('decode-1xH200-2026-11-01.json', '2026-11-01T00:00:00Z', [
    row('step', 'unsharded+graph', 9, {
      metric: 'device',
      t: 1,
      positions: '0-63',
      floorMs: 3,
      rooflinePct: 33,
      tokensPerS: 111,
    }),
  ]);
  const newer = file('decode-1xH200-2026-12-01.json', '2026-12-01T00:00:00Z', [
    row('read floor', 'read kernel', 4532, { unit: 'GB/s', metric: 'device' }),
    row('step', 'unsharded', 5.4, {
      metric: 'device',
      t: 1,
      positions: '0-63',
      floorMs: 3.15,
      rooflinePct: 58.3,
      tokensPerS: 185,
    }),
    row('step', 'unsharded', 5.5, {
      metric: 'host',
      t: 1,
      positions: '0-63',
      floorMs: 3.15,
      rooflinePct: 57.2,
      tokensPerS: 182,
    }),
    row('step', 'unsharded+graph', 16.5, {
      metric: 'device',
      t: 8,
      positions: '0-15',
      floorMs: 8.2,
      rooflinePct: 49.7,
      tokensPerS: 484,
    }),
    row('kernel', 'expert_up', 300, { unit: 'us', metric: 'device', launches: 30, gbps: 3700 }),
    row('kernel', 'rmsnorm', 100, { unit: 'us', metric: 'device', launches: 61, gbps: 5.4 }),
    row('kernel', 'expert_up', 900, { unit: 'us', metric: 'device', launches: 30, gbps: 3100, t: 8 }),
    row('kernel', 'rmsnorm', 300, { unit: 'us', metric: 'device', launches: 61, gbps: 14.5, t: 8 }),
  ]);

  it('takes the newest file, its device rows only, each with its own floor and share', () => {
    const t = rooflineTable([older, newer]).split('\n');
    assert.equal(t[0], 'From `decode-1xH200-2026-12-01` (1xH200; read floor 4.53 TB/s).');
    assert.deepEqual(t.slice(4), [
      '| eager | 1 | 0-63 | 5.40 ms | 3.15 ms | 58% | 185 |',
      '| step graph | 8 | 0-15 | 16.5 ms | 8.20 ms | 50% | 484 |',
    ]);
  });

  it('gives each kernel its launches, time, share of the kernels and rate, one table a batch', () => {
    const t = kernelTable([older, newer]).split('\n');
    const starts = t.flatMap((line, i) => (line.startsWith('From ') ? [i] : []));
    assert.deepEqual(starts, [0, 7]);
    assert.match(t[0]!, /^From `decode-1xH200-2026-12-01` \(1xH200; t = 1,/);
    assert.deepEqual(t.slice(4, 6), ['| expert_up | 30 | 300 | 75% | 3700 |', '| rmsnorm | 61 | 100 | 25% | 5.40 |']);
    assert.match(t[7]!, /^From `decode-1xH200-2026-12-01` \(1xH200; t = 8,/);
    assert.deepEqual(t.slice(11), ['| expert_up | 30 | 900 | 75% | 3100 |', '| rmsnorm | 61 | 300 | 25% | 14.5 |']);
  });

  it("takes a decode bench's run over a newer roofline suite run, and a roofline run where no decode run has the rows", () => {
    // ab-roofline writes roofline runs of the build it compares against too; the newest may be one.
    const abRound: NamedResults = {
      file: 'roofline-1xH200-2026-12-02.json',
      data: { ...newer.data, suite: 'roofline', date: '2026-12-02T00:00:00Z' },
    };
    assert.match(rooflineTable([older, newer, abRound]), /^From `decode-1xH200-2026-12-01` /);
    assert.match(kernelTable([newer, abRound]), /^From `decode-1xH200-2026-12-01` /);
    assert.match(rooflineTable([abRound]), /^From `roofline-1xH200-2026-12-02` /);
    // A decode run without the rows leaves them to the roofline run.
    const bare = file('decode-1xH200-2026-12-03.json', '2026-12-03T00:00:00Z', []);
    assert.match(rooflineTable([bare, abRound]), /^From `roofline-1xH200-2026-12-02` /);
  });

  it('says so where no file holds the rows', () => {
    assert.match(rooflineTable([]), /no one-GPU decode results/);
    assert.match(kernelTable([older]), /no one-GPU kernel table/);
  });
});
