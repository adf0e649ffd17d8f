/**
 * Escaping for HTML text and attribute values alike: the reports interpolate free text (preset
 * names, refusal reasons, transport names from results files) into markup.
 */

/** `&`, `<`, `>`, `"` and `'` as entities; anything not a string is stringified first. */
export function esc(s: unknown): string {
  return String(s).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
}
