/**
 * The decode step against its floor, and the step kernel by kernel, as `npm run bench:report`
 * writes them into the README: from the newest results file of each machine that holds the one-GPU
 * decode rows (bench/decode-roofline.ts, suite `decode`, or `roofline` where no decode run has
 * them: newest-results.ts's byDecodeRecord).
 */
import { groupBy } from './group-by.js';
import { byDecodeRecord } from './newest-results.js';
import { byMachine, fmt } from './report-tables.js';
import type { NamedResults, Row } from './results-types.js';

const stem = (file: string): string => file.replace(/\.json$/, '');
const isStep = (r: Row): boolean => r.op === 'step' && r.metric === 'device' && r.floorMs !== undefined;

/** Each machine's newest file with rows that `pick` takes, and those rows. */
function newestWith(
  files: NamedResults[],
  pick: (r: Row) => boolean,
): Array<{ label: string; file: string; rows: Row[] }> {
  const out: Array<{ label: string; file: string; rows: Row[] }> = [];
  for (const [label, mine] of byMachine(files)) {
    const newest = byDecodeRecord(mine).find((f) => f.data.rows.some(pick));
    if (newest) out.push({ label, file: newest.file, rows: newest.data.rows.filter(pick) });
  }
  return out;
}

export function rooflineTable(files: NamedResults[]): string {
  const blocks = newestWith(files, isStep).map(({ label, file, rows }) => {
    const floor = files.find((f) => f.file === file)!.data.rows.find((r) => r.op === 'read floor');
    const lines = [
      `From \`${stem(file)}\` (${label}; read floor ${floor ? `${fmt(floor.median / 1000)} TB/s` : 'not measured'}).`,
      '',
      '| step | rows | positions | device time | floor | of the floor | tokens/s |',
      '| --- | ---: | --- | ---: | ---: | ---: | ---: |',
    ];
    for (const r of rows) {
      const how = r.transport.endsWith('+graph') ? 'step graph' : 'eager';
      lines.push(
        `| ${how} | ${r.t} | ${r.positions} | ${fmt(r.median)} ms | ${fmt(r.floorMs!)} ms | ${r.rooflinePct!.toFixed(0)}% | ${r.tokensPerS!.toFixed(0)} |`,
      );
    }
    return lines.join('\n');
  });
  return blocks.join('\n\n') || '(no one-GPU decode results stored yet)';
}

/** Kernel rows of one batch size: launches, time, share of the kernels' time and rate. */
function kernelBlock(label: string, file: string, t: string, rows: Row[]): string {
  const total = rows.reduce((a, r) => a + r.median, 0);
  const lines = [
    `From \`${stem(file)}\` (${label}; t = ${t}, eager, each kernel alone between an event pair: a few µs each of their own).`,
    '',
    '| kernel | launches a step | µs a step | share | GB/s |',
    '| --- | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.transport} | ${r.launches} | ${fmt(r.median)} | ${((100 * r.median) / total).toFixed(0)}% | ${fmt(r.gbps!)} |`,
    );
  }
  return lines.join('\n');
}

/** One table a batch size (t = 1, then 8 where the run timed it), each kernel alone, from the newest file. */
export function kernelTable(files: NamedResults[]): string {
  const blocks = newestWith(files, (r) => r.op === 'kernel').flatMap(({ label, file, rows }) =>
    [...groupBy(rows, (r) => String(r.t ?? 1))]
      .sort(([a], [b]) => Number(a) - Number(b))
      .map(([t, mine]) => kernelBlock(label, file, t, mine)),
  );
  return blocks.join('\n\n') || '(no one-GPU kernel table stored yet)';
}
