/**
 * The Markdown tables `npm run bench:report` writes into the README and docs/performance.md,
 * each rendered from the stored results alone. Every table is per machine (the label a results
 * file records, e.g. `2xH200`): figures of one machine never stand in for another's.
 */
import { byDateThenName, newestLines } from './newest-results.js';
import type { NamedResults, Row } from './results-types.js';

export const fmt = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const stem = (file: string): string => file.replace(/\.json$/, '');

/** The files of each machine, machines by label. */
export function byMachine(files: NamedResults[]): Array<[string, NamedResults[]]> {
  const out = new Map<string, NamedResults[]>();
  for (const f of files) {
    const label = f.data.machine?.label ?? 'unknown';
    if (!out.has(label)) out.set(label, []);
    out.get(label)!.push(f);
  }
  return [...out.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

export function newestFile(files: NamedResults[]): NamedResults | undefined {
  return [...files].sort(byDateThenName).at(-1);
}

function origin({ file, data }: NamedResults): string {
  return `From \`${file}\` (${data.machine.label}, ${data.date.slice(0, 10)}, node ${data.machine.node}).`;
}

/** Ring (and any suite without a table of its own): every row of each machine's newest file. */
export function rowsTable(files: NamedResults[]): string {
  return byMachine(files)
    .map(([, mine]) => {
      const newest = newestFile(mine)!;
      const lines = [
        origin(newest),
        '',
        '| op | bytes | median | p90 | p99 | n | unit |',
        '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
      ];
      for (const r of newest.data.rows)
        lines.push(`| ${r.op} | ${r.bytes} | ${fmt(r.median)} | ${fmt(r.p90)} | ${fmt(r.p99)} | ${r.n} | ${r.unit} |`);
      return lines.join('\n');
    })
    .join('\n\n');
}

/** Decode and EP: every row of each machine's newest file, with its variant and metric. */
export function variantsTable(files: NamedResults[]): string {
  return byMachine(files)
    .map(([, mine]) => {
      const newest = newestFile(mine)!;
      const lines = [
        origin(newest),
        '',
        '| op | variant | metric | median | p90 | p99 | n | unit |',
        '| --- | --- | --- | ---: | ---: | ---: | ---: | --- |',
      ];
      for (const r of newest.data.rows) {
        const variant = r.op === 'memory' ? `${r.transport}, device ${r.bytes}` : r.transport;
        lines.push(
          `| ${r.op} | ${variant} | ${r.metric ?? ''} | ${fmt(r.median)} | ${fmt(r.p90)} | ${fmt(r.p99)} | ${r.n} | ${r.unit} |`,
        );
      }
      return lines.join('\n');
    })
    .join('\n\n');
}

/**
 * Joins: per machine, one line per transport, op and metric, one column per size, median (p99);
 * each line from the newest file of that machine holding it (newest-results.ts).
 */
export function joinsTable(files: NamedResults[]): string {
  return byMachine(files)
    .map(([label, mine]) => {
      const lines = newestLines(mine);
      const sizes = [...new Set(lines.flatMap((l) => l.rows.map((r) => r.bytes)))].sort((x, y) => x - y);
      const size = (b: number): string => (b >= 1 << 20 ? `${b >> 20} MB` : `${b >> 10} KB`);
      const out = [
        `${label}: median (p99), µs; each line from the newest results file holding it.`,
        '',
        `| transport | op | metric | ${sizes.map(size).join(' | ')} | file |`,
        `| --- | --- | --- | ${sizes.map(() => '---:').join(' | ')} | --- |`,
      ];
      for (const l of lines) {
        const cells = sizes.map((b) => {
          const r = l.rows.find((x) => x.bytes === b);
          return r ? `${fmt(r.median)} (${fmt(r.p99)})` : '';
        });
        out.push(`| ${l.transport} | ${l.op} | ${l.metric} | ${cells.join(' | ')} | \`${stem(l.file)}\` |`);
      }
      return out.join('\n');
    })
    .join('\n\n');
}

/** One line of the README's summary: which suite's rows, which row, and how to say what it is. */
export interface Headline {
  suite: string;
  what: string;
  pick: (r: Row) => boolean;
}

const KB8 = 8192;
const step = (variant: string): Headline => ({
  suite: 'decode',
  what: `decode step, \`bench\` at t = 1, \`${variant}\``,
  pick: (r) => r.op === 'step' && r.transport === variant,
});
const join8k = (transport: string, op: string, metric: string, what: string): Headline => ({
  suite: 'joins',
  what,
  pick: (r) => r.transport === transport && r.op === op && r.metric === metric && r.bytes === KB8,
});

/**
 * The README's figures, in this order, for every machine that measured them. A machine that
 * lacks a line (one GPU has no joins) simply has fewer lines; a new line is one entry here.
 */
// One GPU's decode rows are the README's roofline table (bench/report-roofline.ts).
export const HEADLINES: Headline[] = [
  step('ll'),
  step('ll+graph'),
  { suite: 'ep', what: 'MoE step, EP parent graph', pick: (r) => r.op === 'moe step' && r.transport === 'graph' },
  join8k('ll', 'allReduce', 'device', '8 KB all-reduce in a graph, `ll`'),
  join8k('nccl', 'allReduce', 'device', '8 KB all-reduce in a graph, `nccl`'),
  join8k('ll', 'allGather', 'device', '8 KB all-gather in a graph, `ll`'),
  join8k('ll', 'broadcast', 'device', '8 KB broadcast in a graph, `ll`'),
  join8k('ll', 'allReduce', 'host', '8 KB eager all-reduce, host time, `ll` (LL server)'),
  { suite: 'ring', what: 'main thread per join, one kernel per worker', pick: (r) => r.op === 'join-kernel' },
];

/** The README's table: each headline from the newest file of its suite and machine that has it. */
export function summaryTable(files: NamedResults[], headlines: Headline[] = HEADLINES): string {
  const out = ['| machine | what | median | p99 | results file |', '| --- | --- | ---: | ---: | --- |'];
  for (const [label, mine] of byMachine(files)) {
    for (const h of headlines) {
      const found = [...mine]
        .filter((f) => f.data.suite === h.suite)
        .sort(byDateThenName)
        .reverse()
        .map((f) => ({ file: f.file, row: f.data.rows.find(h.pick) }))
        .find((x) => x.row !== undefined);
      if (!found) continue;
      const r = found.row!;
      const unit = r.unit === 'us' ? 'µs' : r.unit;
      out.push(`| ${label} | ${h.what} | ${fmt(r.median)} ${unit} | ${fmt(r.p99)} ${unit} | \`${stem(found.file)}\` |`);
    }
  }
  return out.join('\n');
}
