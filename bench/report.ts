/**
 * `npm run bench:report`: rewrite the performance tables of README.md and docs/performance.md
 * from bench/results/, so no figure in them is typed by hand, and write bench/results/index.html
 * (the results as one self-contained page, report-html.ts). Each table sits between
 * `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`. `--check` writes nothing and fails, naming
 * the file, where a document is not what the stored results regenerate.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderBenchReport } from './report-html.js';
import { joinsTable, rowsTable, summaryTable, variantsTable } from './report-tables.js';
import { targetsTable } from './report-targets.js';
import { rooflineTargetsTable } from './report-roofline-targets.js';
import { kernelTable, rooflineTable } from './report-roofline.js';
import { reliabilityChecksTable, reliabilityTable } from './report-reliability.js';
import type { NamedResults } from './results-types.js';
import { readStoredResults } from './stored-results.js';
import { isTargetCardResults, isTwoGpuResults } from './results-machine.js';

/** A generated table: the document it lives in, its marker, and what it renders from the results. */
export interface Section {
  doc: string;
  name: string;
  render: (files: NamedResults[]) => string;
}

const ofSuite =
  (suite: string) =>
  (files: NamedResults[]): NamedResults[] =>
    files.filter((f) => f.data.suite === suite);
/** The targets are two-GPU goals: only two-GPU machines' files count (loopback runs share one card). */
const twoGpu = (files: NamedResults[]): NamedResults[] => files.filter(isTwoGpuResults);

export const SECTIONS: Section[] = [
  { doc: 'README.md', name: 'summary', render: (f) => summaryTable(f) },
  { doc: 'README.md', name: 'roofline', render: (f) => rooflineTable(f.filter(isTargetCardResults)) },
  { doc: 'README.md', name: 'kernels', render: (f) => kernelTable(f.filter(isTargetCardResults)) },
  { doc: 'README.md', name: 'reliability', render: (f) => reliabilityTable(f) },
  { doc: 'docs/reliability.md', name: 'reliability-checks', render: (f) => reliabilityChecksTable(f) },
  { doc: 'docs/performance.md', name: 'targets', render: (f) => targetsTable(twoGpu(f)) },
  { doc: 'docs/performance.md', name: 'roofline-targets', render: (f) => rooflineTargetsTable(f) },
  { doc: 'docs/performance.md', name: 'roofline-cards', render: (f) => rooflineTable(f) },
  { doc: 'docs/performance.md', name: 'kernels-cards', render: (f) => kernelTable(f) },
  { doc: 'docs/performance.md', name: 'decode', render: (f) => variantsTable(ofSuite('decode')(f)) },
  { doc: 'docs/performance.md', name: 'ep', render: (f) => variantsTable(ofSuite('ep')(f)) },
  { doc: 'docs/performance.md', name: 'joins', render: (f) => joinsTable(ofSuite('joins')(f)) },
  { doc: 'docs/performance.md', name: 'ring', render: (f) => rowsTable(ofSuite('ring')(f)) },
];

/** Every generated file's text as the stored results make it: the documents and the page. */
export function regenerate(root: string): Map<string, string> {
  const files = readStoredResults(join(root, 'bench', 'results'));
  const out = new Map<string, string>();
  for (const s of SECTIONS) {
    let text = out.get(s.doc) ?? readFileSync(join(root, s.doc), 'utf8');
    const re = new RegExp(`(<!-- bench:${s.name} -->\\n)[\\s\\S]*?(<!-- /bench:${s.name} -->)`);
    if (!re.test(text))
      throw new Error(`bench:report: ${s.doc} has no <!-- bench:${s.name} --> ... <!-- /bench:${s.name} --> section`);
    text = text.replace(re, (_all, open: string, close: string) => `${open}${s.render(files)}\n${close}`);
    out.set(s.doc, text);
  }
  out.set(join('bench', 'results', 'index.html'), renderBenchReport(files));
  return out;
}

const main = process.argv[1] && new URL(import.meta.url).pathname === process.argv[1];
if (main) {
  const root = new URL('../../', import.meta.url).pathname;
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [file, text] of regenerate(root)) {
    const path = join(root, file);
    if (existsSync(path) && readFileSync(path, 'utf8') === text) continue;
    if (check) {
      console.error(`bench:report --check: ${file} is not what bench/results/ regenerates; run npm run bench:report`);
      stale++;
    } else {
      writeFileSync(path, text);
      console.log(`bench:report: wrote ${file}`);
    }
  }
  process.exitCode = stale ? 1 : 0;
}
