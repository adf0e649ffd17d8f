/**
 * Route validation (the config's `validate`): the router's output for one layer, checked on the
 * host against what docs/model.md says it is: `ids` the K largest logits, so K distinct experts in
 * [0, E); `wts` a softmax over them, largest first, so finite, positive, non-increasing and
 * summing to 1. The seed's engine had the same kind of switch (route validation), and its EP graph
 * refused to capture while one was on, since a graph hides the state such a check reads.
 */

/** The first violation in rows 0..t-1 of one layer's routes, or undefined when they are sound. */
export function checkRoutes(
  ids: Int32Array,
  wts: Float32Array,
  t: number,
  K: number,
  E: number,
  layer: number,
): string | undefined {
  if (ids.length < t * K || wts.length < t * K)
    return `layer ${layer}: ${t * K} routes expected, got ${Math.min(ids.length, wts.length)}`;
  for (let s = 0; s < t; s++) {
    const at = (k: number): string => `route validation: layer ${layer} row ${s} slot ${k}`;
    let sum = 0;
    for (let k = 0; k < K; k++) {
      const e = ids[s * K + k]!,
        w = wts[s * K + k]!;
      if (!(e >= 0 && e < E)) return `${at(k)}: expert id ${e} is outside [0, ${E})`;
      for (let j = 0; j < k; j++)
        if (ids[s * K + j] === e) return `${at(k)}: expert ${e} is routed twice (slots ${j} and ${k})`;
      if (!(Number.isFinite(w) && w > 0)) return `${at(k)}: weight ${w} is not a positive finite number`;
      if (k > 0 && w > wts[s * K + k - 1]!)
        return `${at(k)}: weight ${w} exceeds the previous slot's ${wts[s * K + k - 1]} (routes are largest first)`;
      sum += w;
    }
    // f32 softmax over at most E terms: each weight is within a few ulps, so 1e-5 is loose enough
    // for any K here and tight enough to catch a dropped or doubled term (>= 1/K off).
    if (Math.abs(sum - 1) > 1e-5) return `route validation: layer ${layer} row ${s}: weights sum to ${sum}, not 1`;
  }
  return undefined;
}
