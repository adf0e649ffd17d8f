/**
 * A profile as one self-contained HTML page: inline CSS and inline SVG, no script, no font or
 * file from anywhere else, so it opens from a CI artifact or an email attachment as it is.
 *
 * Sections: a summary; join-latency distributions per transport and per (hop, transport) as
 * percentile ladders on a log axis; a heat map of layers × hops coloured by median device time;
 * tokens/s over time. Exact numbers sit in each mark's <title> (the browser's tooltip) and in
 * the tables, so the pictures never have to be read to three digits.
 *
 * Every string that comes from the profile goes through `esc`, since a preset name or a refusal
 * reason is free text.
 */
import { PAGE_STYLE, htmlPage } from './page-style.js';
import { aggregate, type Aggregate, type JoinStats, type LatencySummary, type ThroughputPoint } from './aggregate.js';
import { ColourScale, VIRIDIS } from './colour-scale.js';
import { esc } from './html-escape.js';
import { fmtBytes, fmtRate, fmtUs, sig3 } from './number-format.js';
import { HOPS, type Profile } from './profile-data.js';
import { LinearAxis, LogAxis } from './svg-axis.js';
import { emptyPlot, legendSwatch, px as f, svg } from './svg-figure.js';

export interface HtmlReportOptions {
  /** Steps in the moving tokens/s (default 8). */
  window?: number;
  /** The profile's aggregate when the caller made it already (for the JSON export, say). */
  aggregate?: Aggregate;
}

export function renderHtmlReport(profile: Profile, options: HtmlReportOptions = {}): string {
  const agg = options.aggregate ?? aggregate(profile, options.window === undefined ? {} : { window: options.window });
  const m = profile.meta;
  return htmlPage(
    `memra profile: ${esc(m.preset)}`,
    STYLE,
    `<h1>memra decode profile: ${esc(m.preset)}</h1>
${summarySection(profile, agg)}
${latencySection(agg)}
${heatMapSection(agg, m.layers)}
${throughputSection(agg)}`,
  );
}

// The shared page style, plus the config's <pre>.
const STYLE = `${PAGE_STYLE}
pre { background: #f7fafc; border: 1px solid #e2e8f0; padding: 8px; overflow: auto; }
`;

const DEVICE_COLOUR = '#2b6cb0';
const HOST_COLOUR = '#c05621';

// ---- summary ----

function summarySection(p: Profile, agg: Aggregate): string {
  const m = p.meta,
    t = agg.throughput.summary;
  const kv: Array<[string, string]> = [
    ['Preset', esc(m.preset)],
    ['Layers', String(m.layers)],
    ['Backend', esc(m.backend)],
    ['Machine', esc(m.machine)],
    ['Date', esc(m.date)],
    ['Steps', String(p.steps.length)],
    ['Tokens', t ? String(t.tokens) : '0'],
    ['Joins timed', String(agg.joins)],
  ];
  if (t) {
    kv.push(['Tokens/s, median step', fmtRate(t.medianTokensPerS)]);
    kv.push([
      'Tokens/s, whole run',
      `${fmtRate(t.overallTokensPerS)} <span class="note">(${t.tokens} tokens in ${fmtUs(t.wallUs)})</span>`,
    ]);
    kv.push(['Tokens/s, range over steps', `${fmtRate(t.minTokensPerS)} to ${fmtRate(t.maxTokensPerS)}`]);
  }
  if (p.epGraph) {
    const g = p.epGraph;
    kv.push(['EP graph', `dispatches ${g.dispatches}, captures ${g.captures}, layers refused ${g.refused.length}`]);
    for (const r of g.refused) kv.push([`EP graph refused, layer ${r.layer}`, esc(r.reason)]);
  }
  return `<section id="summary">
<h2>Summary</h2>
<table class="kv">
${kv.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join('\n')}
</table>
<details><summary>Decode config</summary><pre>${esc(JSON.stringify(m.config, null, 2) ?? 'none')}</pre></details>
</section>`;
}

// ---- join latency: percentile ladders ----

interface LadderGroup {
  label: string;
  stats: JoinStats;
}

function latencySection(agg: Aggregate): string {
  const perTransport = agg.byTransport.map((t) => ({ label: t.transport, stats: t }));
  const perHop = agg.byHop.map((h) => ({ label: `${h.hop} · ${h.transport}`, stats: h }));
  return `<section id="latency">
<h2>Join latency</h2>
<p class="note">Device: the join on its receiving rank's stream. Host: the main thread enqueueing it. Line: min to max; bar: median to p90; tall tick: median; short tick: p99; dot: max. Log scale. Percentiles to 3 significant digits (HDR histograms).</p>
<h3>Per transport, over all hops and layers</h3>
${ladderPlot(perTransport, 'Join latency per transport')}
<h3>Per hop, over all layers</h3>
${ladderPlot(perHop, 'Join latency per hop and transport')}
${rollupTable(agg)}
<details><summary>Every (layer, hop, transport)</summary>
${rowsTable(agg)}
</details>
</section>`;
}

function ladderPlot(groups: LadderGroup[], label: string): string {
  const W = 1100,
    x0 = 250,
    x1 = 820,
    top = 34,
    rowH = 18,
    groupGap = 10,
    bottom = 40;
  if (groups.length === 0) return emptyPlot(label, 'No joins were timed.');
  const h = top + groups.length * (2 * rowH + groupGap) + bottom;
  const axis = LogAxis.covering(
    groups.flatMap((g) => [...values(g.stats.device), ...values(g.stats.host)]),
    x0,
    x1,
  );
  const out: string[] = [];
  for (const t of axis.ticks(fmtUs)) {
    out.push(`<line class="grid" x1="${f(t.at)}" x2="${f(t.at)}" y1="${top - 6}" y2="${h - bottom}"/>`);
    out.push(`<line class="axis" x1="${f(t.at)}" x2="${f(t.at)}" y1="${h - bottom}" y2="${h - bottom + 5}"/>`);
    if (t.label) out.push(`<text x="${f(t.at)}" y="${h - bottom + 18}" text-anchor="middle">${t.label}</text>`);
  }
  out.push(`<line class="axis" x1="${x0}" x2="${x1}" y1="${h - bottom}" y2="${h - bottom}"/>`);
  out.push(`<text x="${(x0 + x1) / 2}" y="${h - 6}" text-anchor="middle">join latency (log scale)</text>`);
  out.push(legendSwatch(x0, 16, DEVICE_COLOUR, 'device'), legendSwatch(x0 + 90, 16, HOST_COLOUR, 'host enqueue'));
  let y = top;
  for (const g of groups) {
    out.push(`<text x="8" y="${y + rowH + 4}" font-weight="600">${esc(g.label)}</text>`);
    out.push(`<text x="${x0 - 10}" y="${y + rowH / 2 + 4}" text-anchor="end" class="muted">device</text>`);
    out.push(`<text x="${x0 - 10}" y="${y + rowH * 1.5 + 4}" text-anchor="end" class="muted">host</text>`);
    out.push(ladderRow(axis, y + rowH / 2, g.stats.device, DEVICE_COLOUR, `${g.label}, device`, g.stats.n));
    out.push(ladderRow(axis, y + rowH * 1.5, g.stats.host, HOST_COLOUR, `${g.label}, host enqueue`, g.stats.n));
    y += 2 * rowH + groupGap;
  }
  return svg(W, h, label, out.join('\n'));
}

function ladderRow(axis: LogAxis, y: number, s: LatencySummary, colour: string, what: string, n: number): string {
  const x = (v: number) => f(axis.at(v));
  const boxW = Math.max(1, axis.at(s.p90) - axis.at(s.median));
  const tip = `${what}: min ${fmtUs(s.min)}, median ${fmtUs(s.median)}, p90 ${fmtUs(s.p90)}, p99 ${fmtUs(s.p99)}, max ${fmtUs(s.max)} (n = ${n})`;
  return `<g class="ladder"><title>${esc(tip)}</title>
<line x1="${x(s.min)}" x2="${x(s.max)}" y1="${f(y)}" y2="${f(y)}" stroke="${colour}" stroke-width="1.5"/>
<rect x="${x(s.median)}" y="${f(y - 5)}" width="${f(boxW)}" height="10" fill="${colour}" fill-opacity="0.3" stroke="${colour}"/>
<line x1="${x(s.median)}" x2="${x(s.median)}" y1="${f(y - 7)}" y2="${f(y + 7)}" stroke="${colour}" stroke-width="2.5"/>
<line x1="${x(s.p99)}" x2="${x(s.p99)}" y1="${f(y - 5)}" y2="${f(y + 5)}" stroke="${colour}" stroke-width="1.5"/>
<circle cx="${x(s.max)}" cy="${f(y)}" r="3" fill="${colour}"/>
<text x="835" y="${f(y + 4)}">p50 ${fmtUs(s.median)} · p99 ${fmtUs(s.p99)} · max ${fmtUs(s.max)}</text>
</g>`;
}

function rollupTable(agg: Aggregate): string {
  if (agg.byHop.length === 0) return '';
  const head =
    '<tr><th>hop</th><th>transport</th><th class="num">layers</th><th class="num">n</th><th class="num">bytes</th>' +
    '<th class="num">device p50</th><th class="num">p90</th><th class="num">p99</th><th class="num">max</th>' +
    '<th class="num">host p50</th><th class="num">p99</th><th class="num">max</th></tr>';
  const rows = agg.byHop.map(
    (h) => `<tr><td>${esc(h.hop)}</td><td>${esc(h.transport)}</td><td class="num">${h.layers}</td>${statCells(h)}</tr>`,
  );
  return `<table class="rows">\n${head}\n${rows.join('\n')}\n</table>`;
}

function rowsTable(agg: Aggregate): string {
  const head =
    '<tr><th class="num">layer</th><th>hop</th><th>transport</th><th class="num">n</th><th class="num">bytes</th>' +
    '<th class="num">device p50</th><th class="num">p90</th><th class="num">p99</th><th class="num">max</th>' +
    '<th class="num">host p50</th><th class="num">p99</th><th class="num">max</th></tr>';
  const rows = agg.rows.map(
    (r) => `<tr><td class="num">${r.layer}</td><td>${esc(r.hop)}</td><td>${esc(r.transport)}</td>${statCells(r)}</tr>`,
  );
  return `<table class="rows">\n${head}\n${rows.join('\n')}\n</table>`;
}

function statCells(s: JoinStats): string {
  const d = s.device,
    h = s.host;
  return [
    String(s.n),
    fmtBytes(s.bytes.min, s.bytes.max),
    fmtUs(d.median),
    fmtUs(d.p90),
    fmtUs(d.p99),
    fmtUs(d.max),
    fmtUs(h.median),
    fmtUs(h.p99),
    fmtUs(h.max),
  ]
    .map((v) => `<td class="num">${v}</td>`)
    .join('');
}

function values(s: LatencySummary): number[] {
  return [s.min, s.median, s.p90, s.p99, s.max];
}

// ---- heat map: layers × hops ----

function heatMapSection(agg: Aggregate, layers: number): string {
  return `<section id="heatmap">
<h2>Per-layer device latency</h2>
<p class="note">Median device time of each (layer, hop) of the walk profiled, colour on a log scale; hover a cell for its percentiles. Grey: not timed (the hop did not run there, or ran inside a graph).</p>
${heatMap(agg, layers)}
</section>`;
}

function heatMap(agg: Aggregate, layers: number): string {
  const cellW = 150,
    cellH = layers <= 40 ? 18 : layers <= 100 ? 12 : 6,
    left = 80,
    top = 30;
  // The hops of the walk the profile ran (each walk has its own): a hop no layer timed has no column.
  const hops = HOPS.filter((h) => agg.byLayerHop.some((c) => c.hop === h));
  const gridW = hops.length * cellW,
    W = Math.max(left + gridW + 20, 560),
    legendTop = top + layers * cellH + 24,
    H = legendTop + 50;
  const cells = new Map(agg.byLayerHop.map((c) => [`${c.layer}/${c.hop}`, c]));
  const medians = agg.byLayerHop.map((c) => c.device.median);
  const scale = ColourScale.covering(medians);
  const out: string[] = [
    `<defs><linearGradient id="heat-ramp" x1="0" x2="1" y1="0" y2="0">${VIRIDIS.map((c, i) => `<stop offset="${i / (VIRIDIS.length - 1)}" stop-color="${c}"/>`).join('')}</linearGradient></defs>`,
  ];
  hops.forEach(
    (hop, k) =>
      void out.push(
        `<text x="${left + k * cellW + cellW / 2}" y="${top - 10}" text-anchor="middle" font-weight="600">${esc(hop)}</text>`,
      ),
  );
  const labelEvery = cellH >= 12 ? 1 : 5;
  for (let l = 0; l < layers; l++) {
    const y = top + l * cellH;
    if (l % labelEvery === 0)
      out.push(`<text x="${left - 8}" y="${f(y + cellH / 2 + 4)}" text-anchor="end">L${l}</text>`);
    hops.forEach((hop, k) => {
      const x = left + k * cellW,
        c = cells.get(`${l}/${hop}`);
      if (!c) {
        out.push(
          `<rect class="cell empty" x="${x}" y="${y}" width="${cellW - 1}" height="${cellH - 1}" fill="#edf2f7"><title>${esc(`layer ${l} · ${hop}: no samples`)}</title></rect>`,
        );
        return;
      }
      const d = c.device,
        fill = scale.colour(d.median);
      const tip = `layer ${l} · ${hop} (${c.transports.join(', ')}): median ${fmtUs(d.median)}, p90 ${fmtUs(d.p90)}, p99 ${fmtUs(d.p99)}, max ${fmtUs(d.max)}; host median ${fmtUs(c.host.median)} (n = ${c.n})`;
      out.push(
        `<rect class="cell" x="${x}" y="${y}" width="${cellW - 1}" height="${cellH - 1}" fill="${fill}"><title>${esc(tip)}</title></rect>`,
      );
      if (cellH >= 12) {
        const ink = scale.ink(d.median);
        out.push(
          `<text x="${x + cellW / 2}" y="${f(y + cellH / 2 + 3.5)}" text-anchor="middle" font-size="${cellH >= 18 ? 11 : 9}" style="fill:${ink}" pointer-events="none">${fmtUs(d.median)}</text>`,
        );
      }
    });
  }
  if (medians.length > 0) {
    const lw = 320;
    out.push(`<rect x="${left}" y="${legendTop}" width="${lw}" height="12" fill="url(#heat-ramp)"/>`);
    for (const [pos, v] of scale.legend()) {
      out.push(
        `<line class="axis" x1="${f(left + pos * lw)}" x2="${f(left + pos * lw)}" y1="${legendTop + 12}" y2="${legendTop + 17}"/>`,
      );
      out.push(`<text x="${f(left + pos * lw)}" y="${legendTop + 30}" text-anchor="middle">${fmtUs(v)}</text>`);
    }
    out.push(`<text x="${left + lw + 14}" y="${legendTop + 11}">median device time</text>`);
  }
  return svg(W, H, 'Median device latency per layer and hop', out.join('\n'));
}

// ---- tokens/s over time ----

function throughputSection(agg: Aggregate): string {
  const t = agg.throughput;
  return `<section id="throughput">
<h2>Tokens/s over time</h2>
<p class="note">Each step's rows over its wall time (thin), and over the last ${t.window} steps' wall time (thick).</p>
${tokensChart(t.points, t.window, t.summary?.medianTokensPerS)}
</section>`;
}

function tokensChart(points: ThroughputPoint[], window: number, median: number | undefined): string {
  const W = 1100,
    H = 360,
    x0 = 90,
    x1 = W - 30,
    y0 = H - 56,
    y1 = 36;
  if (points.length === 0) return emptyPlot('Tokens per second over time', 'No steps were recorded.');
  // A short run reads better in ms than in hundredths of a second.
  const inMs = Math.max(...points.map((p) => p.tMs)) < 2000,
    perUnit = inMs ? 1 : 1000,
    unit = inMs ? 'ms' : 's';
  const tMax = Math.max(...points.map((p) => p.tMs / perUnit));
  const xAxis = LinearAxis.covering(0, tMax > 0 ? tMax : 1, x0, x1);
  const yAxis = LinearAxis.covering(
    0,
    Math.max(...points.map((p) => Math.max(p.tokensPerS, p.movingTokensPerS))),
    y0,
    y1,
  );
  const x = (s: number) => xAxis.at(s),
    y = (v: number) => yAxis.at(v);
  const out: string[] = [];
  for (const t of yAxis.ticks(fmtRate)) {
    out.push(`<line class="grid" x1="${x0}" x2="${x1}" y1="${f(t.at)}" y2="${f(t.at)}"/>`);
    out.push(`<text x="${x0 - 8}" y="${f(t.at + 4)}" text-anchor="end">${t.label}</text>`);
  }
  for (const t of xAxis.ticks(sig3)) {
    out.push(`<line class="axis" x1="${f(t.at)}" x2="${f(t.at)}" y1="${y0}" y2="${y0 + 5}"/>`);
    out.push(`<text x="${f(t.at)}" y="${y0 + 19}" text-anchor="middle">${t.label}</text>`);
  }
  out.push(
    `<line class="axis" x1="${x0}" x2="${x1}" y1="${y0}" y2="${y0}"/><line class="axis" x1="${x0}" x2="${x0}" y1="${y1}" y2="${y0}"/>`,
  );
  out.push(`<text x="${(x0 + x1) / 2}" y="${H - 12}" text-anchor="middle">time since the first step (${unit})</text>`);
  out.push(`<text transform="translate(20 ${(y0 + y1) / 2}) rotate(-90)" text-anchor="middle">tokens/s</text>`);
  const line = (v: (p: ThroughputPoint) => number) =>
    points.map((p) => `${f(x(p.tMs / perUnit))},${f(y(v(p)))}`).join(' ');
  out.push(
    `<polyline class="per-step" points="${line((p) => p.tokensPerS)}" fill="none" stroke="#90cdf4" stroke-width="1"/>`,
  );
  out.push(
    `<polyline class="moving" points="${line((p) => p.movingTokensPerS)}" fill="none" stroke="${DEVICE_COLOUR}" stroke-width="2.5"/>`,
  );
  if (points.length === 1)
    out.push(`<circle cx="${f(x(0))}" cy="${f(y(points[0]!.tokensPerS))}" r="4" fill="${DEVICE_COLOUR}"/>`);
  if (median !== undefined) {
    out.push(
      `<line x1="${x0}" x2="${x1}" y1="${f(y(median))}" y2="${f(y(median))}" stroke="#2f855a" stroke-dasharray="5 4"><title>median step: ${fmtRate(median)} tokens/s</title></line>`,
    );
  }
  out.push(
    legendSwatch(x0, 18, '#90cdf4', 'per step'),
    legendSwatch(x0 + 100, 18, DEVICE_COLOUR, `moving, ${window} steps`),
    legendSwatch(x0 + 250, 18, '#2f855a', 'median step'),
  );
  return svg(W, H, 'Tokens per second over time', out.join('\n'));
}
