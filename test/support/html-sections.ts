/** Reading the reports' HTML in tests: a section's text, and how often a pattern occurs. */
import { strict as assert } from 'node:assert';

/** The text of `<section id="…">` up to its closing tag. */
export function section(html: string, id: string): string {
  const start = html.indexOf(`<section id="${id}">`);
  assert.ok(start >= 0, `no section #${id}`);
  return html.slice(start, html.indexOf('</section>', start));
}

export function count(text: string, pattern: RegExp): number {
  return (text.match(new RegExp(pattern.source, 'g')) ?? []).length;
}
