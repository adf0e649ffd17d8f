/**
 * The reliability tables, on made-up soak results files: each machine's newest file, every loop
 * a line labelled with the machine it ran as (loopback said so), a loop cut short saying what it
 * ran of what was asked, what did not hold named with its figure; and a soak file on the results
 * page as a suite of its own.
 */
import { strict as assert } from 'node:assert';
import { reliabilityChecksTable, reliabilityTable } from '../../bench/report-reliability.js';
import { renderBenchReport } from '../../bench/report-html.js';
import type { LoopResult } from '../../bench/soak/loop-result.js';
import type { Machine, NamedResults } from '../../bench/results-types.js';

const loop = (over: Partial<LoopResult>): LoopResult => ({
  loop: 'long decode',
  variant: 'unsharded',
  machine: '1xH200',
  loopback: false,
  preset: 'small',
  unit: 'steps',
  asked: 100_000,
  ran: 100_000,
  seconds: 60,
  checks: [
    { name: 'tokens', value: '0 of 100000 steps wrong', limit: 'none', pass: true },
    { name: 'fds', value: '31 → 31', limit: 'unchanged', pass: true },
  ],
  pass: true,
  notes: [],
  ...over,
});

const soak = (file: string, date: string, label: string, loops: LoopResult[]): NamedResults => ({
  file,
  data: {
    suite: 'soak',
    date,
    machine: { label, node: 'v20.20.2' } as unknown as Machine,
    rows: [],
    loops,
  },
});

describe('bench report: reliability tables', () => {
  it('says there is nothing yet, and how to make it, without a soak file', () => {
    assert.match(reliabilityTable([]), /^No soak results yet: `npm run soak` on a GPU writes/);
    assert.match(reliabilityChecksTable([]), /^No soak results yet/);
  });

  it("takes each machine's newest soak file and gives every loop a line under the machine it ran as", () => {
    const older = soak('soak-1xH200-2026-12-01.json', '2026-12-01T00:00:00Z', '1xH200', [loop({ ran: 5 })]);
    const newer = soak('soak-1xH200-2026-12-02.json', '2026-12-02T00:00:00Z', '1xH200', [
      loop({}),
      loop({
        variant: 'll+graph',
        machine: '1xH200-loopback',
        loopback: true,
        asked: 10_000,
        ran: 4_321,
        cut: 'its share of the time limit (12 s) ran out',
        checks: [
          { name: 'tokens', value: '0 of 4321 steps wrong', limit: 'none', pass: true },
          { name: 'RSS', value: 'Δ +12.0 MiB (+3%) | odd', limit: 'within 1%', pass: false },
        ],
        pass: false,
      }),
    ]);
    const t = reliabilityTable([newer, older]).split('\n');
    assert.equal(t.length, 6);
    assert.equal(t[0], 'From `soak-1xH200-2026-12-02`.');
    assert.equal(t[4], '| 1xH200 | long decode, `small` unsharded | 100000 steps | all 2 |');
    assert.equal(
      t[5],
      '| 1xH200-loopback | long decode, `small` ll+graph | 4321 of 10000 steps (time limit) | 1 of 2; **not:** RSS |',
    );
    const checks = reliabilityChecksTable([newer, older]);
    assert.match(checks, /^From `soak-1xH200-2026-12-02\.json`\./);
    assert.match(
      checks,
      /\| 1xH200-loopback \| long decode, `small` ll\+graph \| RSS \| .* \| within 1% \| \*\*no\*\* \|/,
    );
  });

  it('shows a soak file on the results page as a suite of its own', () => {
    const html = renderBenchReport([soak('soak-1xH200-2026-12-02.json', '2026-12-02T00:00:00Z', '1xH200', [loop({})])]);
    assert.match(html, /<h2>soak on 1xH200<\/h2>/);
    assert.match(html, /soak-1xH200-2026-12-02\.json/);
  });
});
