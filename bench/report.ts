/**
 * `npm run bench:report`: rewrite the README's performance tables from bench/results/*.json, so
 * no figure in the README is typed by hand. Each table sits between
 * `<!-- bench:<suite> -->` and `<!-- /bench:<suite> -->`.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Machine, Row } from './results-file.js';

interface ResultsFile { suite: string; date: string; machine: Machine; rows: Row[] }

const root = new URL('../../', import.meta.url).pathname;
const dir = join(root, 'bench', 'results');
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
const bySuite = new Map<string, Array<{ file: string; data: ResultsFile }>>();
for (const file of files) {
  const data = JSON.parse(readFileSync(join(dir, file), 'utf8')) as ResultsFile;
  if (!bySuite.has(data.suite)) bySuite.set(data.suite, []);
  bySuite.get(data.suite)!.push({ file, data });
}

const fmt = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

function table(entries: Array<{ file: string; data: ResultsFile }>): string {
  const lines = ['| results file | machine | op | bytes | median | p90 | p99 | n | unit |', '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |'];
  for (const { file, data } of entries) {
    for (const r of data.rows) {
      lines.push(`| \`${file}\` | ${data.machine.label}, CUDA driver API ${data.machine.driverVersion}, node ${data.machine.node} | ${r.op} | ${r.bytes} | ${fmt(r.median)} | ${fmt(r.p90)} | ${fmt(r.p99)} | ${r.n} | ${r.unit} |`);
    }
  }
  return lines.join('\n');
}

const readmePath = join(root, 'README.md');
let readme = readFileSync(readmePath, 'utf8');
for (const [suite, entries] of bySuite) {
  const re = new RegExp(`(<!-- bench:${suite} -->\\n)[\\s\\S]*?(<!-- /bench:${suite} -->)`);
  if (!re.test(readme)) { console.error(`bench:report: README has no <!-- bench:${suite} --> section; skipped`); continue; }
  readme = readme.replace(re, `$1${table(entries)}\n$2`);
  console.log(`bench:report: ${suite}: ${entries.length} file(s)`);
}
writeFileSync(readmePath, readme);
