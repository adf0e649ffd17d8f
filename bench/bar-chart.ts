/**
 * Medians as horizontal bars with a whisker out to p99, one bar per row, on a linear axis that
 * holds 0 (a difference of step times can be negative). Each bar's <title> carries its exact
 * figures.
 */
import { esc } from '../src/profile/html-escape.js';
import { fmtInUnit } from '../src/profile/number-format.js';
import { LinearAxis } from '../src/profile/svg-axis.js';
import { emptyPlot, px, svg } from '../src/profile/svg-figure.js';

export interface Bar {
  label: string;
  colour: string;
  median: number;
  p90: number;
  p99: number;
  n: number;
}

const W = 980,
  X0 = 230,
  X1 = 720,
  TOP = 12,
  ROW = 26,
  BOTTOM = 44;

export function barChart(label: string, unit: string, bars: Bar[]): string {
  const drawable = bars.filter((b) => Number.isFinite(b.median) && Number.isFinite(b.p99));
  if (drawable.length === 0) return emptyPlot(label, 'No finite medians to draw.', W);
  const y0 = TOP + drawable.length * ROW,
    H = y0 + BOTTOM;
  const values = drawable.flatMap((b) => [b.median, b.p99]);
  const axis = LinearAxis.covering(Math.min(0, ...values), Math.max(0, ...values), X0, X1);
  const out: string[] = [];
  for (const t of axis.ticks((v) => fmtInUnit(v, unit))) {
    out.push(
      `<line class="${t.value === 0 ? 'axis' : 'grid'}" x1="${px(t.at)}" x2="${px(t.at)}" y1="${TOP}" y2="${y0 + 5}"/>`,
    );
    out.push(`<text x="${px(t.at)}" y="${y0 + 19}" text-anchor="middle">${esc(t.label)}</text>`);
  }
  out.push(`<line class="axis" x1="${X0}" x2="${X1}" y1="${y0}" y2="${y0}"/>`);
  out.push(`<text x="${(X0 + X1) / 2}" y="${y0 + 38}" text-anchor="middle">median (bar), p99 (whisker)</text>`);
  const zero = axis.at(0);
  drawable.forEach((b, i) => {
    const mid = TOP + i * ROW + ROW / 2,
      m = axis.at(b.median),
      p = axis.at(b.p99);
    const tip = `${b.label}: median ${fmtInUnit(b.median, unit)}, p90 ${fmtInUnit(b.p90, unit)}, p99 ${fmtInUnit(b.p99, unit)} (n = ${b.n})`;
    out.push(`<g class="bar"><title>${esc(tip)}</title>
<text x="${X0 - 10}" y="${px(mid + 4)}" text-anchor="end">${esc(b.label)}</text>
<rect x="${px(Math.min(zero, m))}" y="${px(mid - 8)}" width="${px(Math.max(1, Math.abs(m - zero)))}" height="16" fill="${b.colour}" fill-opacity="0.8"/>
<line class="whisker" x1="${px(m)}" x2="${px(p)}" y1="${px(mid)}" y2="${px(mid)}" stroke="#1a202c" stroke-width="1.5"/>
<line x1="${px(p)}" x2="${px(p)}" y1="${px(mid - 6)}" y2="${px(mid + 6)}" stroke="#1a202c" stroke-width="1.5"/>
<text x="${X1 + 12}" y="${px(mid + 4)}">${esc(`${fmtInUnit(b.median, unit)} · p99 ${fmtInUnit(b.p99, unit)}`)}</text>
</g>`);
  });
  return svg(W, H, label, out.join('\n'));
}
