/**
 * `npm run bench:report`: rewrite the README's performance tables from bench/results/*.json(.gz), so
 * no figure in the README is typed by hand. Each table sits between
 * `<!-- bench:<suite> -->` and `<!-- /bench:<suite> -->`; and write bench/results/index.html, the
 * results as one self-contained page (report-html.ts). The suites' tables and the targets read the
 * two-GPU machine's files alone; one GPU's and loopback's go to `<!-- bench:one-gpu -->`, each
 * under its machine label (results-machine.ts).
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { renderBenchReport } from './report-html.js';
import type { NamedResults, ResultsFile } from './results-types.js';
import { byDateThenName, newestLines } from './newest-results.js';
import { targetsTable } from './report-targets.js';
import { splitByMachine } from './results-machine.js';

const root = new URL('../../', import.meta.url).pathname;
const dir = join(root, 'bench', 'results');
/**
 * Results files by the name they were written under. Superseded runs are kept gzipped
 * (`NAME.json.gz`): the tree that travels to the GPU host is capped at 64 MiB (notes/perf.md),
 * and a joins run with its raw samples is over 1 MB. They read, and are named, as before.
 */
const stored = new Map<string, string>();
for (const f of readdirSync(dir).filter((f) => f.endsWith('.json') || f.endsWith('.json.gz'))) {
  const file = f.replace(/\.gz$/, '');
  if (stored.has(file)) throw new Error(`bench:report: both ${file} and ${file}.gz are in ${dir}; keep one`);
  stored.set(file, f);
}
const all: NamedResults[] = [...stored.keys()].sort().map((file) => {
  const f = stored.get(file)!;
  const raw = readFileSync(join(dir, f));
  return { file, data: JSON.parse((f.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8')) as ResultsFile };
});
const { twoGpu, others } = splitByMachine(all);
const bySuite = new Map<string, NamedResults[]>();
for (const f of twoGpu) {
  if (!bySuite.has(f.data.suite)) bySuite.set(f.data.suite, []);
  bySuite.get(f.data.suite)!.push(f);
}

const fmt = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

function table(entries: Array<{ file: string; data: ResultsFile }>): string {
  const lines = [
    '| results file | machine | op | bytes | median | p90 | p99 | n | unit |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const { file, data } of entries) {
    for (const r of data.rows) {
      lines.push(
        `| \`${file}\` | ${data.machine.label}, CUDA driver API ${data.machine.driverVersion}, node ${data.machine.node} | ${r.op} | ${r.bytes} | ${fmt(r.median)} | ${fmt(r.p90)} | ${fmt(r.p99)} | ${r.n} | ${r.unit} |`,
      );
    }
  }
  return lines.join('\n');
}

/**
 * Joins: one line per transport, op and metric, one column per size, median (p99); each line
 * from the newest results file that has it (a later run of one transport supersedes its rows).
 */
function pivot(entries: NamedResults[]): string {
  const lines = newestLines(entries);
  const sizes = [...new Set(lines.flatMap((l) => l.rows.map((r) => r.bytes)))].sort((x, y) => x - y);
  const label = (b: number): string => (b >= 1 << 20 ? `${b >> 20} MB` : `${b >> 10} KB`);
  const out = [
    'Median (p99), µs; each line from the newest results file holding it.',
    '',
    `| transport | op | metric | ${sizes.map(label).join(' | ')} | file |`,
    `| --- | --- | --- | ${sizes.map(() => '---:').join(' | ')} | --- |`,
  ];
  for (const l of lines) {
    const cells = sizes.map((b) => {
      const r = l.rows.find((x) => x.bytes === b);
      return r ? `${fmt(r.median)} (${fmt(r.p99)})` : '';
    });
    out.push(
      `| ${l.transport} | ${l.op} | ${l.metric} | ${cells.join(' | ')} | \`${l.file.replace(/\.json$/, '')}\` |`,
    );
  }
  return out.join('\n');
}

/**
 * Decode and EP: every row of the newest file, with its transport (the variant) and metric; the
 * older files stay in bench/results/ and on the HTML page.
 */
function newestFile(entries: Array<{ file: string; data: ResultsFile }>): string {
  const { file, data } = [...entries].sort(byDateThenName).at(-1)!;
  const out = [
    `From \`${file}\` (${data.machine.label}, ${data.date.slice(0, 10)}, node ${data.machine.node}).`,
    '',
    '| op | variant | metric | median | p90 | p99 | n | unit |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of data.rows) {
    const variant = r.op === 'memory' ? `${r.transport}, device ${r.bytes}` : r.transport;
    out.push(
      `| ${r.op} | ${variant} | ${r.metric ?? ''} | ${fmt(r.median)} | ${fmt(r.p90)} | ${fmt(r.p99)} | ${r.n} | ${r.unit} |`,
    );
  }
  return out.join('\n');
}

const RENDER: Record<string, (e: Array<{ file: string; data: ResultsFile }>) => string> = {
  joins: pivot,
  decode: newestFile,
  ep: newestFile,
};

/** One GPU's and loopback's results: per machine label and suite, as the two-GPU tables are drawn. */
function otherMachines(): string {
  if (others.size === 0) return 'No results from one GPU or from loopback yet.';
  const out: string[] = [];
  for (const [label, files] of [...others].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const suites = new Map<string, NamedResults[]>();
    for (const f of files) {
      if (!suites.has(f.data.suite)) suites.set(f.data.suite, []);
      suites.get(f.data.suite)!.push(f);
    }
    for (const [suite, entries] of [...suites].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      out.push(
        `**\`${suite}\` on ${label}**${files[0]!.data.machine.loopback ? ' (loopback: both ranks on one device; not two-GPU figures)' : ''}`,
        '',
        (RENDER[suite] ?? table)(entries),
        '',
      );
    }
  }
  return out.join('\n').trimEnd();
}

const readmePath = join(root, 'README.md');
let readme = readFileSync(readmePath, 'utf8');
for (const [suite, entries] of bySuite) {
  const re = new RegExp(`(<!-- bench:${suite} -->\\n)[\\s\\S]*?(<!-- /bench:${suite} -->)`);
  if (!re.test(readme)) {
    console.error(`bench:report: README has no <!-- bench:${suite} --> section; skipped`);
    continue;
  }
  readme = readme.replace(re, `$1${(RENDER[suite] ?? table)(entries)}\n$2`);
  console.log(`bench:report: ${suite}: ${entries.length} file(s)`);
}
// The targets table draws on every suite's files (the two-GPU machine's).
const targets = /(<!-- bench:targets -->\n)[\s\S]*?(<!-- \/bench:targets -->)/;
if (targets.test(readme)) readme = readme.replace(targets, `$1${targetsTable(twoGpu)}\n$2`);
else console.error('bench:report: README has no <!-- bench:targets --> section; skipped');
const oneGpu = /(<!-- bench:one-gpu -->\n)[\s\S]*?(<!-- \/bench:one-gpu -->)/;
if (oneGpu.test(readme))
  readme = readme.replace(oneGpu, () => `<!-- bench:one-gpu -->\n${otherMachines()}\n<!-- /bench:one-gpu -->`);
else console.error('bench:report: README has no <!-- bench:one-gpu --> section; skipped');
writeFileSync(readmePath, readme);

const pagePath = join(dir, 'index.html');
writeFileSync(pagePath, renderBenchReport(all));
console.log(`bench:report: ${pagePath}`);
