/**
 * A seeded PRNG for tests that need the same numbers every run, so a failure replays.
 * test/support/random.ts draws from node:crypto instead, fresh per run, for inputs where any
 * value must do.
 */

/** mulberry32: a 32-bit seeded generator of floats in [0, 1); small, fast, good enough for tests. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
