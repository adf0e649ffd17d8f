/**
 * One colour per transport, the same in every chart of the page, so a transport is found by
 * colour from plot to plot. Okabe and Ito's palette: told apart with the common colour-vision
 * deficiencies; its yellow, faint on white, comes last.
 */
export const OKABE_ITO = [
  '#0072b2',
  '#d55e00',
  '#009e73',
  '#cc79a7',
  '#e69f00',
  '#56b4e9',
  '#000000',
  '#f0e442',
] as const;

/** Names to colours in sorted order; past eight names the colours repeat. */
export function seriesColours(names: Iterable<string>): Map<string, string> {
  const sorted = [...new Set(names)].sort();
  return new Map(sorted.map((n, i) => [n, OKABE_ITO[i % OKABE_ITO.length]!]));
}
