/**
 * The README's and docs/performance.md's generated tables, on made-up results files of two
 * machines: each machine's figures come from its own newest files and are labelled with it, a
 * machine without a suite simply has fewer lines, and the stored results regenerate the
 * documents in the tree byte for byte.
 */
import { strict as assert } from 'node:assert';
import { regenerate } from '../../bench/report.js';
import { joinsTable, summaryTable, variantsTable } from '../../bench/report-tables.js';
import type { Machine, NamedResults, Row } from '../../bench/results-types.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const machine = (label: string): Machine => ({ label, node: 'v20.20.2' }) as unknown as Machine;
const row = (suite: string, op: string, transport: string, median: number, more: Partial<Row> = {}): Row =>
  ({
    suite,
    op,
    transport,
    bytes: 0,
    preset: null,
    unit: 'ms',
    median,
    p90: median,
    p99: median + 1,
    n: 48,
    min: median,
    max: median,
    mean: median,
    method: 'made up',
    samples: [],
    ...more,
  }) as Row;
const file = (name: string, suite: string, date: string, label: string, rows: Row[]): NamedResults => ({
  file: name,
  data: { suite, date, machine: machine(label), rows },
});

describe('bench report: generated tables', () => {
  const two = [
    file('decode-2xH200-a-run1.json', 'decode', '2026-11-30T01:00:00Z', '2xH200', [
      row('decode', 'step', 'unsharded', 9),
      row('decode', 'step', 'll', 8),
    ]),
    file('decode-2xH200-a-run2.json', 'decode', '2026-11-30T02:00:00Z', '2xH200', [
      row('decode', 'step', 'unsharded', 6.39),
      row('decode', 'step', 'll', 5.62),
    ]),
    file('joins-2xH200-a-run1.json', 'joins', '2026-11-30T02:00:00Z', '2xH200', [
      row('joins', 'allReduce', 'll', 2.004, { bytes: 8192, metric: 'device', unit: 'us' }),
    ]),
  ];
  const one = [
    file('decode-1xH200-b-run1.json', 'decode', '2026-12-01T01:00:00Z', '1xH200', [
      row('decode', 'step', 'unsharded', 6.41),
      row('decode', 'step', 'unsharded+graph', 5.8),
    ]),
  ];

  it("labels every summary line with its machine, from that machine's newest file", () => {
    const t = summaryTable([...two, ...one]).split('\n');
    // One GPU's decode rows are the roofline table's (bench/report-roofline.ts), not the summary's.
    assert.deepEqual(t.slice(2), [
      '| 2xH200 | decode step, `bench` at t = 1, `ll` | 5.62 ms | 6.62 ms | `decode-2xH200-a-run2` |',
      '| 2xH200 | 8 KB all-reduce in a graph, `ll` | 2.00 µs | 3.00 µs | `joins-2xH200-a-run1` |',
    ]);
  });

  it('gives each machine its own table of its newest file', () => {
    const t = variantsTable([...two.slice(0, 2), ...one]);
    assert.match(t, /^From `decode-1xH200-b-run1.json` \(1xH200, 2026-12-01, node v20.20.2\)\./);
    assert.match(t, /\n\nFrom `decode-2xH200-a-run2.json` \(2xH200, 2026-11-30, node v20.20.2\)\./);
    assert.doesNotMatch(t, /decode-2xH200-a-run1/);
    assert.match(
      joinsTable([two[2]!]),
      /^2xH200: median \(p99\), µs;[\s\S]*\| ll \| allReduce \| device \| 2.00 \(3.00\) \| `joins-2xH200-a-run1` \|/,
    );
  });

  it('regenerates README.md, docs/performance.md and the results page from bench/results/ byte for byte', function () {
    this.timeout(60_000);
    const root = new URL('../../../', import.meta.url).pathname;
    for (const [doc, text] of regenerate(root))
      assert.ok(
        readFileSync(join(root, doc), 'utf8') === text,
        `${doc} is not what bench/results/ regenerates: run npm run bench:report`,
      );
  });
});
