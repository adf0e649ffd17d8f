/**
 * The frame and small pieces every inline-SVG plot of the reports shares. Plots are drawn with
 * CSS classes (`axis`, `grid`, `muted`) that each page's stylesheet defines.
 */
import { esc } from './html-escape.js';

/** Coordinates to 0.1 px: finer is invisible and only fattens the file. */
export function px(v: number): string {
  return String(Math.round(v * 10) / 10);
}

/** An `<svg>` of w × h px holding `body`, labelled for screen readers. */
export function svg(w: number, h: number, label: string, body: string): string {
  return `<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="${esc(label)}">\n${body}\n</svg>`;
}

/** A plot with nothing to draw, saying why, so the page's layout stays the same. */
export function emptyPlot(label: string, why: string, width = 1100): string {
  return svg(width, 60, label, `<text x="20" y="35" class="muted">${esc(why)}</text>`);
}

/** A legend entry: a colour swatch and its label, the label's baseline at y. */
export function legendSwatch(x: number, y: number, colour: string, label: string): string {
  return `<rect x="${x}" y="${y - 9}" width="14" height="10" fill="${colour}"/><text x="${x + 20}" y="${y}">${esc(label)}</text>`;
}
