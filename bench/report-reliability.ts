/**
 * The reliability tables `npm run bench:report` writes, from the newest soak results file
 * (`npm run soak`, bench/soak/) of each machine: in the README what was run, how many times and
 * what held; in docs/reliability.md every check with its figure and its bound. A loop that ran in
 * loopback says so in its machine label.
 */
import { byMachine, newestFile } from './report-tables.js';
import type { LoopResult } from './soak/loop-result.js';
import type { NamedResults } from './results-types.js';

const stem = (file: string): string => file.replace(/\.json$/, '');
const cell = (s: string): string => s.replace(/\|/g, '\\|');

const NONE =
  'No soak results yet: `npm run soak` on a GPU writes `bench/results/soak-<machine>-<date>.json`, and `npm run bench:report` fills this table from it.';

/** Each machine's newest soak file with its loops. */
function newestSoaks(files: NamedResults[]): Array<{ file: string; loops: LoopResult[] }> {
  return byMachine(files.filter((f) => f.data.suite === 'soak'))
    .map(([, mine]) => newestFile(mine)!)
    .map((f) => ({ file: f.file, loops: f.data.loops ?? [] }));
}

function what(l: LoopResult): string {
  return `${l.loop}, \`${l.preset}\` ${l.variant}`;
}

function times(l: LoopResult): string {
  return l.ran === l.asked ? `${l.ran} ${l.unit}` : `${l.ran} of ${l.asked} ${l.unit} (time limit)`;
}

/** How many checks held; the ones that did not by name (docs/reliability.md has every figure). */
function held(l: LoopResult): string {
  const not = l.checks.filter((c) => !c.pass).map((c) => c.name);
  const parts = [
    not.length === 0
      ? `all ${l.checks.length}`
      : `${l.checks.length - not.length} of ${l.checks.length}; **not:** ${not.join(', ')}`,
  ];
  if (l.error) parts.push(`**error:** ${l.error}`);
  return parts.join('; ');
}

/** The README's: one line per loop, from each machine's newest file (named above the table). */
export function reliabilityTable(files: NamedResults[]): string {
  const soaks = newestSoaks(files);
  if (soaks.length === 0) return NONE;
  return soaks
    .map(({ file, loops }) => {
      const out = [
        `From \`${stem(file)}\`.`,
        '',
        '| machine | what was run | times | checks that held |',
        '| --- | --- | ---: | --- |',
      ];
      for (const l of loops) out.push(`| ${l.machine} | ${cell(what(l))} | ${cell(times(l))} | ${cell(held(l))} |`);
      return out.join('\n');
    })
    .join('\n\n');
}

/** docs/reliability.md's: every check of every loop, its figure and its bound. */
export function reliabilityChecksTable(files: NamedResults[]): string {
  const soaks = newestSoaks(files);
  if (soaks.length === 0) return NONE;
  return soaks
    .map(({ file, loops }) => {
      const out = [
        `From \`${file}\`.`,
        '',
        '| machine | loop | check | figure | bound | held |',
        '| --- | --- | --- | --- | --- | --- |',
      ];
      for (const l of loops)
        for (const c of l.checks)
          out.push(
            `| ${l.machine} | ${cell(what(l))} | ${cell(c.name)} | ${cell(c.value)} | ${cell(c.limit)} | ${c.pass ? 'yes' : '**no**'} |`,
          );
      return out.join('\n');
    })
    .join('\n\n');
}
