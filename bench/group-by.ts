/** xs split by key, each group in xs's order, the groups in the order their keys first appear. */
export function groupBy<T>(xs: T[], key: (x: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const x of xs) {
    const k = key(x);
    if (!out.has(k)) out.set(k, []);
    out.get(k)!.push(x);
  }
  return out;
}
