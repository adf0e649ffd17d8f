/** The CPU reference's exact test of whether two (possibly strided) accesses share a byte. */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { overlaps } from '../../src/runtime/cpu-device.js';

/** Bytes an access covers: rows of `width` every `stride` from lo to hi, or [lo, hi) when stride is 0. */
function bytesOf(lo: number, hi: number, stride: number, width: number): Set<number> {
  const s = new Set<number>();
  if (stride === 0) {
    for (let i = lo; i < hi; i++) s.add(i);
    return s;
  }
  for (let r = lo; r < hi; r += stride) for (let i = r; i < Math.min(r + width, hi); i++) s.add(i);
  return s;
}

function randomAccess(): [number, number, number, number] {
  const lo = randomInt(0, 64);
  if (randomInt(0, 3) === 0) return [lo, lo + randomInt(1, 40), 0, 0];
  const width = randomInt(1, 9),
    stride = width + randomInt(0, 9),
    rows = randomInt(1, 6);
  return [lo, lo + (rows - 1) * stride + width, stride, width];
}

describe('cpu reference: strided access overlap', () => {
  it('agrees with byte sets on 20,000 random pairs (contiguous and strided, both orders)', () => {
    let hits = 0;
    for (let n = 0; n < 20_000; n++) {
      const a = randomAccess(),
        b = randomAccess();
      const sa = bytesOf(...a),
        sb = bytesOf(...b);
      const want = [...sa].some((x) => sb.has(x));
      assert.equal(overlaps(...a, ...b), want, `a=${a} b=${b}`);
      assert.equal(overlaps(...b, ...a), want, `b=${b} a=${a}`);
      if (want) hits++;
    }
    assert.ok(hits > 1000 && hits < 19_000, `both outcomes exercised (${hits} overlaps)`);
  });

  it("two ranks' interleaved rows of one token-major buffer do not overlap; the same rows do", () => {
    const span = 64,
      rows = 4,
      width = 2 * span * 4;
    const slot = (r: number): [number, number, number, number] => [
      r * span * 4,
      r * span * 4 + (rows - 1) * width + span * 4,
      width,
      span * 4,
    ];
    assert.equal(overlaps(...slot(0), ...slot(1)), false);
    assert.equal(overlaps(...slot(1), ...slot(1)), true);
  });
});
