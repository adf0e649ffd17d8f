/**
 * The README's targets table comes from stored results only: the newest file wins, a target
 * without results says so, and "met" follows the goal.
 */
import { strict as assert } from 'node:assert';
import { row } from '../../bench/results-file.js';
import { targetLines, targetsTable, type StoredResults } from '../../bench/report-targets.js';

const file = (name: string, suite: string, date: string, rows: ReturnType<typeof row>[]): StoredResults => ({
  file: `${name}.json`,
  data: { suite, date, rows },
});
const r = (
  op: string,
  transport: string,
  samples: number[],
  extra: Partial<{ metric: string; bytes: number; unit: string }> = {},
): ReturnType<typeof row> =>
  row(
    {
      suite: 'x',
      op,
      transport,
      bytes: extra.bytes ?? 8192,
      preset: null,
      unit: extra.unit ?? 'us',
      metric: extra.metric ?? 'device',
      method: 'test',
    },
    samples,
  );

describe('bench report: targets table', () => {
  it('says "not measured yet" for every target when there are no results', () => {
    const lines = targetLines([]);
    assert.ok(lines.length >= 10);
    for (const l of lines) {
      assert.equal(l.measured, 'not measured yet');
      assert.equal(l.met, undefined);
    }
  });

  it('takes the newest file per transport, the best transport per op, and judges each goal', () => {
    const files = [
      file('joins-old', 'joins', '2026-11-01', [r('allReduce', 'll', [9, 9, 9])]),
      file('joins-new', 'joins', '2026-11-30', [
        r('allReduce', 'll', [2.1, 2.0, 2.2]),
        r('allReduce', 'nccl', [6.4, 6.5, 6.6]),
        r('broadcast', 'll', [1.4, 1.5, 1.6]),
        r('allGather', 'll', [2.1, 2.2, 2.3]),
        ...['broadcast', 'allGather', 'gather', 'allReduce'].map((op) => r(op, 'll', [4, 5, 5.5], { metric: 'host' })),
      ]),
      file('ring-a', 'ring', '2026-11-30', [r('join-kernel', 'ring', [6, 7, 8])]),
      file('decode-a', 'decode', '2026-11-30', [
        r('step', 'unsharded', [9, 10, 11], { unit: 'ms', metric: 'host' }),
        r('step', 'push', [6, 7, 8], { unit: 'ms', metric: 'host' }),
        r('joins', 'push', [0.5, 0.6, 0.7], { unit: 'ms', metric: 'host' }),
        r('step', 'unsharded+graph', [5, 5, 5], { unit: 'ms', metric: 'host' }),
        r('step', 'll+graph', [3, 3, 3], { unit: 'ms', metric: 'host' }),
        r('step', 'push+graph', [4, 4, 4], { unit: 'ms', metric: 'host' }),
        r('joins', 'push+graph', [0.8, 0.8, 0.8], { unit: 'ms', metric: 'host' }),
        r('memory', 'sharded', [20.5], { bytes: 0, unit: 'GiB' }),
        r('memory', 'sharded', [19.0], { bytes: 1, unit: 'GiB' }),
        r('profile overhead', 'll', [4, 5, 6], { unit: '%', metric: 'host' }),
        r('profile overhead', 'll+graph', [0.5, 1, 1.5], { unit: '%', metric: 'host' }),
      ]),
      file('ep-a', 'ep', '2026-11-30', [
        r('moe step', 'graph', [10, 11, 12]),
        r('moe step', 'eager ll', [14, 15, 16]),
        r('step', 'graph', [4, 4, 4], { unit: 'ms', metric: 'host' }),
        r('step', 'eager ll', [5, 5, 5], { unit: 'ms', metric: 'host' }),
      ]),
    ];
    const byTarget = new Map(targetLines(files).map((l) => [l.target, l]));
    const get = (prefix: string) => [...byTarget.values()].find((l) => l.target.startsWith(prefix))!;
    assert.match(get('all-reduce').measured, /^2\.10 µs \(`ll`\)/, 'the newest ll row (2.1), not the old 9');
    assert.equal(get('all-reduce').met, true);
    assert.match(get('all-reduce').from, /joins-new/);
    assert.equal(get('broadcast').met, true);
    assert.equal(get('allGather').met, false, '2.2 > 2');
    assert.equal(get('eager join').met, true, 'medians 5 <= 6');
    assert.equal(get('main-thread').met, false, '7 > 5');
    assert.equal(get('decode step').met, true, '7 ms on two < 10 ms on one');
    assert.match(
      get('decode step').measured,
      /eager: one GPU 10\.00 ms, two 7\.00 ms \(`push`\); step graph: one GPU 5\.00 ms, two 3\.00 ms \(`ll\+graph`\)/,
    );
    assert.match(
      get("joins' share").measured,
      /^eager: push 8\.6%; step graph: push\+graph 20\.0%$/,
      '0.6 / 7 and 0.8 / 4',
    );
    assert.equal(get("joins' share").met, false, "met only where both paths are: the step graph's 20% is not");
    // 20.5 GiB = 22.01 GB: within 24 GB.
    assert.match(get('device memory').measured, /GPU 0: 22\.01 GB, GPU 1: 20\.40 GB/);
    assert.equal(get('device memory').met, true);
    assert.match(get('MoE step').measured, /1\.36×/, '15 / 11');
    assert.match(get('MoE step').measured, /tokens\/s 200\.0 → 250\.0 \(25\.0%\)/, '1000/5 -> 1000/4');
    assert.equal(get('MoE step').met, false);
    assert.equal(get('profiling').measured, 'eager 5.00%; step graph 1.00%');
    assert.equal(get('profiling').met, false, 'eager 5% > 3%, whatever the step graph costs');
    const table = targetsTable(files);
    assert.equal(table.split('\n').length, 2 + byTarget.size);
  });

  it('judges a device target by the back-to-back row and shows the drained one beside it', () => {
    const lines = targetLines([
      file('joins-b', 'joins', '2026-11-30', [
        r('allGather', 'll', [1.9, 1.92, 1.95]),
        r('allGather', 'll', [2.0, 2.02, 2.05], { metric: 'device-drained' }),
        r('allGather', 'll', [2.5, 2.6, 2.7], { metric: 'device-drained', bytes: 4096 }),
      ]),
    ]);
    const ag = lines.find((l) => l.target.startsWith('allGather'))!;
    assert.equal(
      ag.measured,
      '1.92 µs (`ll`, drained between replays 2.02 µs)',
      'the 8 KB drained row, not the 4 KB one',
    );
    assert.equal(ag.met, true);
  });

  it("meets the joins' share only when both paths are within 10%, each by either transport", () => {
    const ms = { unit: 'ms', metric: 'host' };
    const share = (graphJoins: number): boolean | undefined =>
      targetLines([
        file('decode-b', 'decode', '2026-11-30', [
          r('step', 'push', [5, 5, 5], ms),
          r('joins', 'push', [0.9, 1, 1.1], ms),
          r('step', 'oneshot', [5, 5, 5], ms),
          r('joins', 'oneshot', [0.4, 0.45, 0.5], ms),
          r('step', 'push+graph', [4, 4, 4], ms),
          r('joins', 'push+graph', [graphJoins, graphJoins, graphJoins], ms),
        ]),
      ]).find((l) => l.target.startsWith("joins' share"))!.met;
    assert.equal(share(0.4), true, 'eager oneshot 9%, step graph push 10%');
    assert.equal(share(0.44), false, 'step graph push 11%');
  });
});
