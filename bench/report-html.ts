/**
 * The benchmark results as one self-contained HTML page (bench/results/index.html): inline CSS
 * and inline SVG, no script and nothing fetched, so it opens from a CI artifact as it is.
 *
 * Sections: where the figures were measured (machines, versions, files, dates); the joins suite
 * as latency-against-size plots per op, each line from the newest file that has it (the README
 * table's rule, newest-results.ts); every other suite as a table per file, and for the decode
 * and ep suites bar charts of the medians. Exact figures sit in the tables and in each mark's
 * <title>. Files from one GPU or from loopback (results-machine.ts) get sections of their own,
 * titled with their machine label, after the two-GPU machine's: no line mixes the two.
 *
 * Results files are data from disk, so every string from them is escaped, and numbers go
 * through formatters that print 'n/a' for anything that is not one.
 */
import { PAGE_STYLE, htmlPage } from '../src/profile/page-style.js';
import { ColourScale } from '../src/profile/colour-scale.js';
import { esc } from '../src/profile/html-escape.js';
import { fmtByteSize, fmtFigure, fmtInUnit } from '../src/profile/number-format.js';
import { barChart, type Bar } from './bar-chart.js';
import { groupBy } from './group-by.js';
import { latencyPlot, type LatencySeries } from './latency-plot.js';
import { byDateThenName, newestLines, type ResultsLine } from './newest-results.js';
import type { Machine, NamedResults, ResultsFile, Row } from './results-types.js';
import { seriesColours } from './series-palette.js';
import { splitByMachine } from './results-machine.js';

/** The suites in the order bench runs them; others follow by name. */
const SUITE_ORDER = ['joins', 'ring', 'decode', 'ep'];
/** The joins' ops in the walk's order of use; others follow by name. */
const OP_ORDER = ['broadcast', 'allGather', 'gather', 'allReduce'];
/** Suites whose rows compare variants of one measurement: drawn as bars as well as tabled. */
const BAR_SUITES = new Set(['decode', 'ep']);
/** Line style per metric, so device and host figures of one transport share its colour. */
const METRIC_DASH = new Map<string, string | null>([
  ['device', null],
  ['host', '7 4'],
  ['', null],
]);
const OTHER_METRIC_DASH = '2 3';

export function renderBenchReport(files: Array<{ file: string; data: ResultsFile }>): string {
  const ordered = [...files].sort(byDateThenName);
  const colours = seriesColours(ordered.flatMap((f) => rowsOf(f.data).map((r) => String(r.transport))));
  const { twoGpu, others } = splitByMachine(ordered);
  const body = suiteSections(twoGpu, colours, '');
  for (const [label, fs] of [...others].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    body.push(...suiteSections(fs, colours, label));
  return htmlPage(
    'memra benchmarks',
    STYLE,
    `<h1>memra benchmarks</h1>
${machinesSection(ordered)}
${body.join('\n')}`,
  );
}

/** A section per suite; `machine` (a label) titles sections of files that are not the two-GPU machine's. */
function suiteSections(files: NamedResults[], colours: Map<string, string>, machine: string): string[] {
  const bySuite = groupBy(files, (f) => String(f.data.suite));
  const suites = [...bySuite.keys()].sort(
    (a, b) => rank(SUITE_ORDER, a) - rank(SUITE_ORDER, b) || (a < b ? -1 : a > b ? 1 : 0),
  );
  return suites.map((suite) =>
    suite === 'joins'
      ? joinsSection(bySuite.get(suite)!, colours, machine)
      : suiteSection(suite, bySuite.get(suite)!, colours, machine),
  );
}

/** A section's title and id: the suite's, with the machine's label where it is not the two-GPU machine. */
function heading(title: string, suite: string, machine: string): { title: string; id: string } {
  const id = `suite-${String(suite).replace(/[^A-Za-z0-9_-]/g, '_')}${machine ? `-${machine.replace(/[^A-Za-z0-9_-]/g, '_')}` : ''}`;
  return { title: machine ? `${title} on ${machine}` : title, id };
}

// The shared page style, plus what only this page has: spacing for its many tables, heat cells.
const STYLE = `${PAGE_STYLE}
table { margin: 6px 0 14px; }
table.heat td.num { padding: 2px 8px; }
code { font-size: 13px; }
`;

// ---- where: machines, versions, files, dates ----

function machinesSection(files: NamedResults[]): string {
  if (files.length === 0) return '<section id="machines"><p class="note">No results files.</p></section>';
  const machines = new Map<string, { m: Partial<Machine>; files: string[] }>();
  for (const { file, data } of files) {
    const m: Partial<Machine> = data.machine ?? {};
    const k = JSON.stringify([
      m.hostname,
      m.label,
      m.os,
      m.cpu,
      m.node,
      m.driverVersion,
      m.cudaRuntimeVersion,
      m.nccl,
      m.addon,
      (m.gpus ?? []).map((g) => [g.name, g.pciBusId]),
    ]);
    if (!machines.has(k)) machines.set(k, { m, files: [] });
    machines.get(k)!.files.push(file);
  }
  const head =
    '<tr><th>machine</th><th>GPUs</th><th>CUDA driver</th><th>CUDA runtime</th><th>NCCL</th><th>Node</th><th>addon</th><th>CPU</th><th>OS</th><th class="num">files</th></tr>';
  const rows = [...machines.values()].map(
    ({ m, files: fs }) =>
      `<tr>${[
        `${esc(m.label ?? 'unlabelled')}<br><span class="note">${esc(m.hostname ?? '')}, ${esc(m.backend ?? '')}</span>`,
        esc(gpuSummary(m.gpus ?? [])),
        esc(cudaVersion(m.driverVersion)),
        esc(cudaVersion(m.cudaRuntimeVersion)),
        esc(ncclVersion(m.nccl)),
        esc(m.node ?? 'not recorded'),
        esc(m.addon ?? 'not recorded'),
        esc(`${m.cpu ?? 'unknown'} (${m.cores ?? '?'} cores)`),
        esc(m.os ?? 'not recorded'),
      ]
        .map((v) => `<td>${v}</td>`)
        .join('')}<td class="num">${fs.length}</td></tr>`,
  );
  const dates = files.map((f) => String(f.data.date));
  const fileRows = files.map(
    ({ file, data }) =>
      `<tr><td><code>${esc(file)}</code></td><td>${esc(data.suite)}</td><td>${esc(data.date)}</td><td>${esc(data.machine?.label ?? '')}</td><td class="num">${rowsOf(data).length}</td></tr>`,
  );
  return `<section id="machines">
<h2>Where and when</h2>
<p>${files.length} results file(s), dated ${esc(dates[0]!)} to ${esc(dates[dates.length - 1]!)}.</p>
<table class="rows">
${head}
${rows.join('\n')}
</table>
<details><summary>Every results file</summary>
<table class="rows">
<tr><th>file</th><th>suite</th><th>date</th><th>machine</th><th class="num">rows</th></tr>
${fileRows.join('\n')}
</table>
</details>
</section>`;
}

/** GPUs counted by name, with memory and compute capability: "2 × NVIDIA H200 (140 GiB, sm_90)". */
function gpuSummary(gpus: Machine['gpus']): string {
  if (gpus.length === 0) return 'none (CPU reference)';
  const byKind = new Map<string, number>();
  for (const g of gpus) {
    const kind = `${g.name} (${g.totalMem ? `${fmtFigure(g.totalMem / 2 ** 30)} GiB, ` : ''}sm_${g.major}${g.minor})`;
    byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
  }
  return [...byKind].map(([kind, n]) => `${n} × ${kind}`).join(', ');
}

/** CUDA's integer versions: 1000 × major + 10 × minor. */
function cudaVersion(v: number | undefined): string {
  if (typeof v !== 'number') return 'not recorded';
  return v === 0 ? 'none' : `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

/** NCCL's version code: 10000 × major + 100 × minor + patch since 2.9, 1000 × major + 100 × minor + patch before. */
function ncclVersion(v: number | undefined): string {
  if (typeof v !== 'number') return 'not recorded';
  if (v === 0) return 'not loaded';
  return v >= 20900
    ? `${Math.floor(v / 10000)}.${Math.floor((v % 10000) / 100)}.${v % 100}`
    : `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 100)}.${v % 100}`;
}

// ---- joins: latency against size per op ----

function joinsSection(entries: NamedResults[], colours: Map<string, string>, machine: string): string {
  const lines = newestLines(entries);
  const byPlot = new Map<string, { op: string; unit: string; lines: ResultsLine[] }>();
  for (const l of lines) {
    // One plot per op and unit: a log axis cannot mix µs with anything else.
    for (const [unit, rows] of groupBy(l.rows, (r) => String(r.unit))) {
      const k = JSON.stringify([l.op, unit]);
      if (!byPlot.has(k)) byPlot.set(k, { op: l.op, unit, lines: [] });
      byPlot.get(k)!.lines.push({ ...l, rows });
    }
  }
  const plots = [...byPlot.values()].sort(
    (a, b) =>
      rank(OP_ORDER, a.op) - rank(OP_ORDER, b.op) ||
      (a.op < b.op ? -1 : a.op > b.op ? 1 : 0) ||
      (a.unit < b.unit ? -1 : 1),
  );
  const parts = plots.map(({ op, unit, lines: ls }) => {
    ls.sort(
      (a, b) =>
        (a.transport < b.transport ? -1 : a.transport > b.transport ? 1 : 0) ||
        (a.metric < b.metric ? -1 : a.metric > b.metric ? 1 : 0),
    );
    const series: LatencySeries[] = ls.map((l) => ({
      label: lineLabel(l),
      colour: colours.get(l.transport) ?? '#4a5568',
      dash: METRIC_DASH.has(l.metric) ? METRIC_DASH.get(l.metric)! : OTHER_METRIC_DASH,
      source: `${l.file} (${l.date})`,
      points: l.rows.map((r) => ({ bytes: r.bytes, median: r.median, p90: r.p90, p99: r.p99, n: r.n })),
    }));
    const title = plots.filter((p) => p.op === op).length > 1 ? `${op} (${unit})` : op;
    return `<h3 class="op">${esc(title)}</h3>
${latencyPlot(`${op}: median latency against bytes per transport`, unit, series)}
${lineTable(ls, unit)}`;
  });
  const h = heading('Joins', 'joins', machine);
  return `<section id="${esc(h.id)}">
<h2>${esc(h.title)}</h2>
<p class="note">Median latency per join against the bytes it delivers, one line per transport and metric (solid: device, CUDA events; dashed: host, the main thread's clock); each point's whisker reaches up to p99. Each line comes from the newest results file that has it. Hover a point for its figures.</p>
${parts.join('\n') || '<p class="note">No rows.</p>'}
</section>`;
}

/**
 * The plot's figures: a row per line, a column per size, median (p99) in each cell, shaded by
 * the median against the same size's other lines, fastest darkest.
 */
function lineTable(lines: ResultsLine[], unit: string): string {
  const sizes = [...new Set(lines.flatMap((l) => l.rows.map((r) => r.bytes)))].sort((a, b) => a - b);
  const scales = new Map(
    sizes.map((b) => [
      b,
      ColourScale.covering(lines.flatMap((l) => l.rows.filter((r) => r.bytes === b).map((r) => r.median))),
    ]),
  );
  const head = `<tr><th>transport</th><th>metric</th>${sizes.map((b) => `<th class="num">${esc(fmtByteSize(b))}</th>`).join('')}<th>file</th></tr>`;
  const rows = lines.map((l) => {
    const cells = sizes.map((b) => {
      const r = l.rows.find((x) => x.bytes === b);
      if (!r) return '<td></td>';
      const s = scales.get(b)!,
        shade = typeof r.median === 'number' && r.median > 0;
      const style = shade ? ` style="background:${s.colour(r.median)};color:${s.ink(r.median)}"` : '';
      const tip = `median ${fmtInUnit(r.median, unit)}, p90 ${fmtInUnit(r.p90, unit)}, p99 ${fmtInUnit(r.p99, unit)} (n = ${r.n})`;
      return `<td class="num" title="${esc(tip)}"${style}>${esc(fmtInUnit(r.median, unit))} (${esc(fmtInUnit(r.p99, unit))})</td>`;
    });
    return `<tr><td>${esc(l.transport)}</td><td>${esc(l.metric)}</td>${cells.join('')}<td><code>${esc(l.file)}</code></td></tr>`;
  });
  return `<table class="rows heat">\n${head}\n${rows.join('\n')}\n</table>`;
}

function lineLabel(l: ResultsLine): string {
  return l.metric ? `${l.transport} · ${l.metric}` : l.transport;
}

// ---- other suites: a table per file, bars for decode and ep ----

function suiteSection(suite: string, entries: NamedResults[], colours: Map<string, string>, machine: string): string {
  const files = [...entries].reverse().map(({ file, data }) => {
    const rows = rowsOf(data);
    const charts = BAR_SUITES.has(suite) ? barCharts(rows, colours) : '';
    const presets = [...new Set(rows.map((r) => r.preset).filter((p) => p !== null && p !== undefined))];
    return `<h3 class="results-file"><code>${esc(file)}</code></h3>
<p class="note">${esc(data.date)} · ${esc(data.machine?.label ?? '')}${presets.length > 0 ? ` · preset ${esc(presets.join(', '))}` : ''}</p>
${charts}
${rowsTable(rows)}`;
  });
  const h = heading(suite, suite, machine);
  return `<section id="${esc(h.id)}">
<h2>${esc(h.title)}</h2>
<p class="note">One table per results file, newest first; hover a row for how its figure was taken.${BAR_SUITES.has(suite) ? ' Bars: median; whisker: out to p99.' : ''}</p>
${files.join('\n')}
</section>`;
}

/** A chart per (op, metric, unit): bars of one chart must share an axis. */
function barCharts(rows: Row[], colours: Map<string, string>): string {
  const groups = groupBy(rows, (r) => JSON.stringify([r.op, r.metric ?? '', r.unit]));
  return [...groups]
    .map(([k, rs]) => {
      const [op, metric, unit] = JSON.parse(k) as [string, string, string];
      // Where a transport has several rows (decode's memory: one per device), the bytes field tells them apart.
      const perTransport = groupBy(rs, (r) => String(r.transport));
      const bars: Bar[] = rs.map((r) => ({
        label: perTransport.get(String(r.transport))!.length > 1 ? `${r.transport} [${r.bytes}]` : String(r.transport),
        colour: colours.get(String(r.transport)) ?? '#4a5568',
        median: r.median,
        p90: r.p90,
        p99: r.p99,
        n: r.n,
      }));
      const what = `${op}${metric ? ` (${metric})` : ''}, ${unit}`;
      return `<p class="chart-title">${esc(what)}</p>\n${barChart(`${what}: median per transport`, unit, bars)}`;
    })
    .join('\n');
}

function rowsTable(rows: Row[]): string {
  const head =
    '<tr><th>op</th><th>transport</th><th>metric</th><th class="num">bytes</th><th>unit</th><th class="num">median</th><th class="num">p90</th><th class="num">p99</th><th class="num">n</th></tr>';
  const body = rows.map(
    (r) =>
      `<tr title="${esc(r.method ?? '')}"><td>${esc(r.op)}</td><td>${esc(r.transport)}</td><td>${esc(r.metric ?? '')}</td>` +
      `<td class="num">${esc(r.bytes)}</td><td>${esc(r.unit)}</td>` +
      `${[r.median, r.p90, r.p99].map((v) => `<td class="num">${esc(fmtFigure(v))}</td>`).join('')}<td class="num">${esc(r.n)}</td></tr>`,
  );
  return `<table class="rows">\n${head}\n${body.join('\n')}\n</table>`;
}

// ---- pieces ----

function rowsOf(data: ResultsFile): Row[] {
  return Array.isArray(data.rows) ? data.rows : [];
}

/** Position in a preferred order; names not in it after all that are. */
function rank(order: string[], name: string): number {
  const i = order.indexOf(name);
  return i < 0 ? order.length : i;
}
