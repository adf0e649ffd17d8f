/**
 * Latency against size on log-log axes: one line of medians per series, a whisker from each
 * median up to its p99, a legend. Each point's <title> carries its exact figures, so nothing has
 * to be read off the axes. Sizes run on powers of two (the suites' sizes are powers of two),
 * latencies on decades.
 */
import { esc } from '../src/profile/html-escape.js';
import { fmtByteSize, fmtInUnit } from '../src/profile/number-format.js';
import { LogAxis } from '../src/profile/svg-axis.js';
import { emptyPlot, px, svg } from '../src/profile/svg-figure.js';

export interface LatencyPoint {
  bytes: number;
  median: number;
  p90: number;
  p99: number;
  n: number;
}

export interface LatencySeries {
  label: string;
  colour: string;
  /** SVG stroke-dasharray, or null for a solid line. */
  dash: string | null;
  /** Where its figures come from (a results file), for the tooltips. */
  source: string;
  points: LatencyPoint[];
}

const W = 980,
  X0 = 80,
  X1 = 680,
  TOP = 24,
  PLOT_H = 330,
  LEGEND_X = 710,
  LEGEND_ROW = 19;

export function latencyPlot(label: string, unit: string, series: LatencySeries[]): string {
  // A log axis has no place for 0 or less: such points stay in the tables only.
  const drawable = series
    .map((s) => ({
      ...s,
      points: s.points.filter((p) => p.bytes > 0 && p.median > 0).sort((a, b) => a.bytes - b.bytes),
    }))
    .filter((s) => s.points.length > 0);
  if (drawable.length === 0) return emptyPlot(label, 'Nothing to plot on log axes (no positive medians).', W);
  const y0 = TOP + PLOT_H,
    H = Math.max(y0 + 52, TOP + drawable.length * LEGEND_ROW + 20);
  const all = drawable.flatMap((s) => s.points);
  // Inset from the frame, so the end sizes' whiskers stay off the axis line.
  const xAxis = LogAxis.covering(
    all.map((p) => p.bytes),
    X0 + 20,
    X1 - 20,
    2,
  );
  const yAxis = LogAxis.covering(
    all.flatMap((p) => [p.median, p.p99]),
    y0,
    TOP,
  );
  const out: string[] = [];
  for (const t of yAxis.ticks((v) => fmtInUnit(v, unit))) {
    out.push(
      `<line class="grid" x1="${X0}" x2="${X1}" y1="${px(t.at)}" y2="${px(t.at)}"${t.label ? '' : ' stroke-dasharray="2 3"'}/>`,
    );
    if (t.label) out.push(`<text x="${X0 - 8}" y="${px(t.at + 4)}" text-anchor="end">${esc(t.label)}</text>`);
  }
  for (const t of xAxis.ticks(fmtByteSize)) {
    out.push(`<line class="grid" x1="${px(t.at)}" x2="${px(t.at)}" y1="${TOP}" y2="${y0}"/>`);
    out.push(`<line class="axis" x1="${px(t.at)}" x2="${px(t.at)}" y1="${y0}" y2="${y0 + 5}"/>`);
    if (t.label) out.push(`<text x="${px(t.at)}" y="${y0 + 19}" text-anchor="middle">${esc(t.label)}</text>`);
  }
  out.push(
    `<line class="axis" x1="${X0}" x2="${X1}" y1="${y0}" y2="${y0}"/><line class="axis" x1="${X0}" x2="${X0}" y1="${TOP}" y2="${y0}"/>`,
  );
  out.push(`<text x="${(X0 + X1) / 2}" y="${y0 + 42}" text-anchor="middle">bytes per join (log scale)</text>`);
  out.push(
    `<text transform="translate(16 ${(TOP + y0) / 2}) rotate(-90)" text-anchor="middle">median, whisker to p99 (log scale)</text>`,
  );

  // Whiskers of one size are spread a few px apart, series by series, so they do not hide each other.
  const spread = Math.min(3, 24 / drawable.length);
  drawable.forEach((s, i) => {
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : '';
    const off = (i - (drawable.length - 1) / 2) * spread;
    out.push(
      `<g class="series"><polyline points="${s.points.map((p) => `${px(xAxis.at(p.bytes))},${px(yAxis.at(p.median))}`).join(' ')}" fill="none" stroke="${s.colour}" stroke-width="2"${dash}/>`,
    );
    for (const p of s.points) {
      const x = px(xAxis.at(p.bytes) + off),
        top = px(yAxis.at(Math.max(p.p99, p.median)));
      out.push(
        `<path class="p99" d="M${x},${px(yAxis.at(p.median))}V${top}m-3,0h6" stroke="${s.colour}" stroke-opacity="0.5" stroke-width="1.5" fill="none"/>`,
      );
    }
    for (const p of s.points) {
      const tip = `${s.label}, ${fmtByteSize(p.bytes)}: median ${fmtInUnit(p.median, unit)}, p90 ${fmtInUnit(p.p90, unit)}, p99 ${fmtInUnit(p.p99, unit)} (n = ${p.n}); ${s.source}`;
      out.push(
        `<circle class="point" cx="${px(xAxis.at(p.bytes))}" cy="${px(yAxis.at(p.median))}" r="3.5" fill="${s.colour}"><title>${esc(tip)}</title></circle>`,
      );
    }
    out.push('</g>');
  });
  drawable.forEach((s, i) => {
    const y = TOP + 8 + i * LEGEND_ROW,
      dash = s.dash ? ` stroke-dasharray="${s.dash}"` : '';
    out.push(
      `<g class="legend"><line x1="${LEGEND_X}" x2="${LEGEND_X + 28}" y1="${y}" y2="${y}" stroke="${s.colour}" stroke-width="2.5"${dash}/><text x="${LEGEND_X + 36}" y="${y + 4}">${esc(s.label)}</text></g>`,
    );
  });
  return svg(W, H, label, out.join('\n'));
}
