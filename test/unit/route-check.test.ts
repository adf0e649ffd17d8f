import { strict as assert } from 'node:assert';
import { checkRoutes } from '../../src/decode/route-check.js';

/** Routes of t rows as docs/model.md's router makes them: distinct ids, a descending softmax. */
function sound(t: number, K: number, E: number): { ids: Int32Array; wts: Float32Array } {
  const ids = new Int32Array(t * K),
    wts = new Float32Array(t * K);
  for (let s = 0; s < t; s++) {
    const logits = Array.from({ length: K }, (_, k) => 3 - k * 0.37 - s * 0.01);
    const z = logits.reduce((a, x) => a + Math.exp(x), 0);
    for (let k = 0; k < K; k++) {
      ids[s * K + k] = (s * 7 + k * 3) % E;
      wts[s * K + k] = Math.exp(logits[k]!) / z;
    }
  }
  return { ids, wts };
}

describe('route validation', () => {
  it('passes sound routes, K = 1 to E, one row and several', () => {
    for (const [t, K, E] of [
      [1, 1, 4],
      [3, 2, 4],
      [4, 4, 4],
      [2, 3, 10],
    ] as const) {
      const { ids, wts } = sound(t, K, E);
      assert.equal(checkRoutes(ids, wts, t, K, E, 0), undefined, `t=${t} K=${K} E=${E}`);
    }
  });

  it('names the layer, row and slot of each kind of broken route', () => {
    const cases: Array<[string, (r: { ids: Int32Array; wts: Float32Array }) => void, RegExp]> = [
      [
        'id out of range',
        (r) => {
          r.ids[7] = 10;
        },
        /layer 7 row 2 slot 1: expert id 10 is outside \[0, 10\)/,
      ],
      [
        'negative id',
        (r) => {
          r.ids[0] = -1;
        },
        /row 0 slot 0: expert id -1/,
      ],
      [
        'repeated expert',
        (r) => {
          r.ids[4] = r.ids[3]!;
        },
        /row 1 slot 1: expert \d+ is routed twice \(slots 0 and 1\)/,
      ],
      [
        'NaN weight',
        (r) => {
          r.wts[2] = NaN;
        },
        /row 0 slot 2: weight NaN is not a positive finite number/,
      ],
      [
        'zero weight',
        (r) => {
          r.wts[8] = 0;
        },
        /row 2 slot 2: weight 0/,
      ],
      [
        'ascending weights',
        (r) => {
          const w = r.wts[6]!;
          r.wts[6] = r.wts[7]!;
          r.wts[7] = w;
        },
        /row 2 slot 1: weight .* exceeds the previous slot's/,
      ],
      [
        'weights not summing to 1',
        (r) => {
          r.wts[0] = r.wts[0]! * 1.001;
        },
        /layer 7 row 0: weights sum to/,
      ],
    ];
    for (const [what, breakIt, want] of cases) {
      const r = sound(3, 3, 10);
      breakIt(r);
      assert.match(checkRoutes(r.ids, r.wts, 3, 3, 10, 7) ?? 'passed', want, what);
    }
  });
});
