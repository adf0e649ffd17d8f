/**
 * The synthetic model's CPU oracle (docs/model.md). Weights are held bit for bit to slow
 * BigInt and nearest-value transcriptions written here, independently of src/decode; the decode
 * step is held to determinism, row independence, and a float64 transcription of docs/model.md.
 */
import { strict as assert } from 'node:assert';
import { PRESETS, presetByName, validateConfig, tiny, type ModelConfig } from '../../src/decode/model-config.js';
import {
  bf16ToF32,
  f32BitsToBf16,
  f32ToBf16,
  fillU24,
  generateTensor,
  tensorSpecs,
  type TensorSpec,
} from '../../src/decode/weights.js';
import { e4m3Decode, e4m3Encode } from '../../src/decode/e4m3.js';
import { argmax, matvec, quantizeE4m3Blocks, rmsnorm, topk } from '../../src/decode/f32-ops.js';
import { CpuModel } from '../../src/decode/cpu-model.js';

// ---------------------------------------------------------------------------------------------
// Independent references

const M64 = (1n << 64n) - 1n;

/** docs/model.md's hash, transcribed with BigInt: u·2^24 of element i of tensor id. */
function refU24(S: bigint, id: number, i: number): number {
  let z = (S * 0x9e3779b97f4a7c15n + BigInt(id) * 0xd1b54a32d192ed03n + BigInt(i)) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  z = z ^ (z >> 31n);
  return Number(z >> 40n);
}

/** A reproducible u64 stream (splitmix64 itself, in BigInt), so a failure names its inputs. */
function bigStream(seed: bigint): () => bigint {
  let s = seed;
  return () => {
    s = (s + 0x9e3779b97f4a7c15n) & M64;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
    return z ^ (z >> 31n);
  };
}

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);
const bitsToF32 = (b: number): number => {
  u32buf[0] = b >>> 0;
  return f32buf[0]!;
};
const f32ToBits = (x: number): number => {
  f32buf[0] = x;
  return u32buf[0]!;
};

/**
 * bf16 by comparing distances: the two bf16 values around x are x's bits with the low 16 cleared
 * (toward zero) and that plus one bf16 step (away from zero); the nearer wins, on a tie the even.
 */
function refBf16(bits: number): number {
  const x = bitsToF32(bits);
  const down = (bits >>> 16) & 0xffff,
    up = (down + 1) & 0xffff;
  // Past the largest bf16 the next step up is inf; IEEE rounds as if it were 2^128.
  const value = (b: number): number => ((b & 0x7fff) === 0x7f80 ? Math.sign(x) * 2 ** 128 : bitsToF32(b << 16));
  const dDown = Math.abs(x - value(down)),
    dUp = Math.abs(value(up) - x);
  if (dDown < dUp) return down;
  if (dUp < dDown) return up;
  return down % 2 === 0 ? down : up;
}

/** e4m3 decoded through the f32 bit layout (exponent rebias 7 -> 127), not through the formula. */
function refE4m3Decode(c: number): number {
  const s = (c >>> 7) & 1,
    e = (c >>> 3) & 15,
    m = c & 7;
  if (e === 15 && m === 7) return Number.NaN;
  if (e === 0) return ((s ? -1 : 1) * m) / 512; // subnormal: m · 2^-9
  return bitsToF32((s << 31) | ((e - 7 + 127) << 23) | (m << 20));
}

/** Brute-force nearest code among the finite ones, ties to the even code; saturation at 448. */
const POS_CODES = Array.from({ length: 0x7f }, (_, c) => c); // 0x00 .. 0x7e, increasing values
function refE4m3Encode(x: number): number {
  const s = x < 0 || Object.is(x, -0) ? 0x80 : 0,
    a = Math.abs(x);
  if (a >= 448) return s | 0x7e;
  let best = 0;
  for (const c of POS_CODES) {
    const d = Math.abs(refE4m3Decode(c) - a),
      db = Math.abs(refE4m3Decode(best) - a);
    if (d < db || (d === db && c % 2 === 0 && best % 2 === 1)) best = c;
  }
  return s | best;
}

// ---------------------------------------------------------------------------------------------

describe('synthetic model: configuration', () => {
  it('has the presets docs/model.md gives, and they validate', () => {
    assert.deepEqual(
      { ...PRESETS.tiny },
      {
        hidden: 256,
        heads: 4,
        latent: 32,
        headDim: 32,
        experts: 4,
        topk: 2,
        ffn: 128,
        vocab: 256,
        layers: 2,
        maxPos: 64,
        seed: 0n,
      },
    );
    assert.deepEqual(
      { ...PRESETS.small },
      {
        hidden: 1024,
        heads: 8,
        latent: 128,
        headDim: 64,
        experts: 8,
        topk: 2,
        ffn: 512,
        vocab: 4096,
        layers: 4,
        maxPos: 256,
        seed: 0n,
      },
    );
    assert.deepEqual(
      { ...PRESETS.bench },
      {
        hidden: 4096,
        heads: 32,
        latent: 512,
        headDim: 128,
        experts: 32,
        topk: 8,
        ffn: 1536,
        vocab: 32768,
        layers: 30,
        maxPos: 4096,
        seed: 0n,
      },
    );
    for (const name of ['tiny', 'small', 'bench']) assert.equal(validateConfig(presetByName(name)), presetByName(name));
  });

  it('bench is about 21 GB of weights per GPU (docs/model.md), as its shapes say', () => {
    // Per GPU, bf16: half the heads (Wq, Wuv, Wo rows), half the experts, the rest whole.
    // A sanity check that the shapes match the prose.
    const halved = ['Wq', 'Wuv', 'Wo', 'W1', 'W2', 'W3'];
    const bytes = tensorSpecs(PRESETS.bench).reduce(
      (acc, s) => acc + 2 * (halved.includes(s.name) ? s.size / 2 : s.size),
      0,
    );
    assert.ok(bytes > 20e9 && bytes < 22.5e9, `bench per-GPU bytes ${bytes}`);
  });

  it('refuses an unknown preset naming the allowed ones, and takes a seed', () => {
    assert.throws(() => presetByName('huge'), /unknown model preset 'huge': the presets are tiny, small, bench/);
    assert.throws(() => presetByName('toString'), /unknown model preset/);
    assert.equal(presetByName('tiny', 7n).seed, 7n);
    assert.equal(presetByName('tiny', 7n).hidden, 256);
  });

  const bad: [Partial<Record<keyof ModelConfig, unknown>>, RegExp][] = [
    [{ hidden: 300 }, /hidden must be a positive multiple of 256, got 300$/],
    [{ hidden: 0 }, /hidden must be a positive multiple of 256, got 0/],
    [{ hidden: 256.5 }, /hidden must be an integer, got 256.5/],
    [{ heads: 3 }, /heads must be positive and even \(N\/2 heads per TP rank\), got 3/],
    [{ latent: 48 }, /latent must be a positive multiple of 32, got 48/],
    [{ headDim: 16 }, /headDim must be a positive multiple of 32, got 16/],
    [{ experts: 5, topk: 2 }, /experts must be positive and even \(E\/2 experts per EP rank\), got 5/],
    [{ topk: 0 }, /topk must be between 1 and experts \(4\), got 0/],
    [{ topk: 5 }, /topk must be between 1 and experts \(4\), got 5/],
    [{ ffn: 100 }, /ffn must be a positive multiple of 128, got 100/],
    [{ vocab: 1 }, /vocab must be at least 2, got 1/],
    [{ layers: 0 }, /layers must be at least 1, got 0/],
    [{ maxPos: 0 }, /maxPos must be at least 1, got 0/],
    [{ seed: -1n }, /seed must be a u64 bigint in \[0, 2\^64\), got -1/],
    [{ seed: 1n << 64n }, /seed must be a u64 bigint/],
    [{ seed: 3 }, /seed must be a u64 bigint/],
  ];
  for (const [patch, msg] of bad) {
    it(`refuses ${JSON.stringify(patch, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))}`, () => {
      assert.throws(() => validateConfig({ ...tiny, ...patch } as ModelConfig), msg);
    });
  }

  it('accepts the boundary values', () => {
    validateConfig({ ...tiny, topk: 1 });
    validateConfig({ ...tiny, topk: 4 });
    validateConfig({ ...tiny, vocab: 2, layers: 1, maxPos: 1, seed: M64 });
  });
});

describe('synthetic model: weights', () => {
  it('the 32-bit-halves hash equals the BigInt transcription of docs/model.md', () => {
    const next = bigStream(42n);
    let checked = 0;
    const cases: [bigint, number, number][] = [
      [0n, 0, 0],
      [M64, 0xffffffff, 0],
      [0n, 16 * 30 + 2, 2 ** 32 - 5],
      [M64, 12345, 2 ** 53 - 40],
      [1n, 1, 2 ** 31 - 3],
      [0x8000000000000000n, 7, 0xfffffff0],
    ];
    for (let k = 0; k < 2000; k++) {
      const seed = next(),
        r = next();
      const id = Number(r & 0xffffffffn);
      // Indices small, around 2^32, and large (up to 2^52).
      const kind = k % 3;
      const i =
        kind === 0
          ? Number((r >> 32n) & 0xffffffn)
          : kind === 1
            ? 2 ** 32 - 8 + Number((r >> 32n) & 15n)
            : Number((r >> 12n) & ((1n << 52n) - 1n));
      cases.push([seed, id, i]);
    }
    for (const [seed, id, i] of cases) {
      const got = fillU24(seed, id, i, new Uint32Array(16));
      for (let k = 0; k < 16; k++) {
        assert.equal(got[k], refU24(seed, id, i + k), `seed ${seed} id ${id} i ${i + k}`);
        checked++;
      }
    }
    assert.ok(checked >= 32000);
  });

  it('carries from the low word into the high word mid-run', () => {
    // Pick the start so that S·G + id·M + start has low word 2^32 − 3: the run crosses the carry.
    const seed = 0x0123456789abcdefn,
      id = 99;
    const base = (seed * 0x9e3779b97f4a7c15n + BigInt(id) * 0xd1b54a32d192ed03n) & M64;
    const start = Number((0xfffffffdn - (base & 0xffffffffn)) & 0xffffffffn);
    const got = fillU24(seed, id, start, new Uint32Array(8));
    for (let k = 0; k < 8; k++) assert.equal(got[k], refU24(seed, id, start + k));
  });

  it("has docs/model.md's ids, shapes and f32 scales", () => {
    const c = tiny,
      H = 256,
      N = 4,
      R = 32,
      Dv = 32,
      E = 4,
      F = 128,
      V = 256,
      L = 2;
    const specs = tensorSpecs(c);
    const byId = new Map(specs.map((s) => [s.id, s]));
    const expect = (id: number, name: string, shape: number[], fanIn: number | null): void => {
      const s = byId.get(id);
      assert.ok(s, `id ${id}`);
      assert.equal(s.name, name);
      assert.deepEqual(s.shape, shape);
      if (fanIn === null) {
        assert.equal(s.kind, 'gain');
        return;
      }
      assert.equal(s.kind, 'matrix');
      assert.equal(s.scale, Math.fround(1 / Math.sqrt(fanIn)), `${name} scale`);
    };
    expect(0, 'Emb', [V, H], 1);
    for (let l = 0; l < L; l++) {
      expect(16 * l + 1, 'Wq', [H, N, R], H);
      expect(16 * l + 2, 'Wuv', [N, R, Dv], R);
      expect(16 * l + 3, 'Wdkv', [H, R], H);
      expect(16 * l + 4, 'Wo', [N * Dv, H], N * Dv);
      expect(16 * l + 5, 'Wr', [H, E], H);
      expect(16 * l + 6, 'W1', [E, H, F], H);
      expect(16 * l + 7, 'W3', [E, H, F], H);
      expect(16 * l + 8, 'W2', [E, F, H], F);
      expect(16 * l + 9, 'g1', [H], null);
      expect(16 * l + 10, 'g2', [H], null);
    }
    expect(16 * L + 1, 'gf', [H], null);
    expect(16 * L + 2, 'Wvocab', [H, V], H);
    assert.equal(specs.length, 3 + 10 * L);
    assert.equal(byId.get(0)!.scale, 1);
  });

  it('generates each element as docs/model.md writes it, bit for bit (matrices and gains)', () => {
    const seed = 0xfeedfacecafebeefn;
    const cfg = { ...presetByName('small'), seed };
    for (const spec of tensorSpecs(cfg).filter((s) => ['Emb', 'Wo', 'W2', 'g1', 'gf', 'Wvocab'].includes(s.name))) {
      // A range from the middle, generated on its own: shards must agree with the whole.
      const start = Math.floor(spec.size / 3),
        count = Math.min(3000, spec.size - start);
      const got = generateTensor(seed, spec, start, count);
      for (let k = 0; k < count; k++) {
        const u = refU24(seed, spec.id, start + k) / 2 ** 24;
        const v = Math.fround(Math.fround(2 * u) - 1);
        const f =
          spec.kind === 'matrix' ? Math.fround(v * spec.scale) : Math.fround(1 + Math.fround(Math.fround(0.1) * v));
        assert.equal(got[k], refBf16(f32ToBits(f)), `${spec.name}[${start + k}]`);
      }
    }
  });

  it('a range of a tensor equals the same slice of the whole tensor', () => {
    const spec = tensorSpecs(tiny).find((s) => s.name === 'W1')!;
    const whole = generateTensor(0n, spec);
    assert.deepEqual(generateTensor(0n, spec, 70001, 9999), whole.subarray(70001, 80000));
    assert.throws(() => generateTensor(0n, spec, spec.size - 1, 2), /W1: range .* is outside its 131072 elements/);
  });

  it('has sane statistics: mean near 0, |w| within scale, spread over the whole range; gains near 1', () => {
    for (const spec of tensorSpecs(tiny)) {
      const w = Array.from(generateTensor(0n, spec), bf16ToF32);
      const n = w.length,
        mean = w.reduce((a, b) => a + b, 0) / n;
      if (spec.kind === 'gain') {
        // 1 + 0.1·[-1, 1), then bf16: the bf16 roundings of 0.9 and 1.1 bound it.
        const lo = bf16ToF32(f32ToBf16(0.9)),
          hi = bf16ToF32(f32ToBf16(1.1));
        assert.ok(
          w.every((g) => g >= lo && g <= hi),
          `${spec.name} in [${lo}, ${hi}]`,
        );
        assert.ok(Math.abs(mean - 1) < 0.05, `${spec.name} mean ${mean}`);
        assert.ok(new Set(w).size > 8, `${spec.name} varies`);
        continue;
      }
      const s = spec.scale,
        cap = bf16ToF32(f32ToBf16(s)); // rounding is monotonic: |w| <= bf16(scale)
      const maxAbs = w.reduce((a, b) => Math.max(a, Math.abs(b)), 0);
      assert.ok(maxAbs <= cap, `${spec.name} max ${maxAbs} > ${cap}`);
      assert.ok(maxAbs > 0.95 * s, `${spec.name} max ${maxAbs} covers the range`);
      // Uniform on (-s, s): sd s/√3, standard error of the mean s/√(3n); allow 6 of them.
      assert.ok(Math.abs(mean) < (6 * s) / Math.sqrt(3 * n), `${spec.name} mean ${mean}`);
      const inner = w.filter((x) => Math.abs(x) < s / 2).length / n;
      assert.ok(Math.abs(inner - 0.5) < 0.05 + 3 / Math.sqrt(n), `${spec.name} half within s/2: ${inner}`);
    }
  });

  it('depends on the seed and the tensor id', () => {
    const [a, b] = tensorSpecs(tiny).filter((s) => s.name === 'W1') as [TensorSpec, TensorSpec];
    const x = generateTensor(0n, a, 0, 4096),
      y = generateTensor(1n, a, 0, 4096),
      z = generateTensor(0n, { ...b, id: a.id + 1 }, 0, 4096);
    const same = (p: Uint16Array, q: Uint16Array): number => p.reduce((acc, v, i) => acc + (v === q[i] ? 1 : 0), 0);
    assert.ok(same(x, y) < 200 && same(x, z) < 200);
    assert.deepEqual(generateTensor(0n, a, 0, 4096), x);
  });
});

describe('synthetic model: bf16 rounding', () => {
  it('rounds ties to even and breaks near-ties the right way', () => {
    assert.equal(f32BitsToBf16(0x3f808000), 0x3f80); // 1 + 2^-8: tie, keep even 0x3f80
    assert.equal(f32BitsToBf16(0x3f818000), 0x3f82); // tie, odd below: up to even
    assert.equal(f32BitsToBf16(0x3f808001), 0x3f81); // just above the tie
    assert.equal(f32BitsToBf16(0x3f807fff), 0x3f80); // just below
    assert.equal(f32BitsToBf16(0xbf818000), 0xbf82); // negative tie
    assert.equal(f32BitsToBf16(0x3fff8000), 0x4000); // carry into the exponent
    assert.equal(f32BitsToBf16(0x7f7f0000), 0x7f7f); // largest bf16, exact
    assert.equal(f32BitsToBf16(0x7f7f7fff), 0x7f7f); // below its upper midpoint
    assert.equal(f32BitsToBf16(0x7f7f8000), 0x7f80); // at the midpoint, odd: to inf (IEEE overflow)
    assert.equal(f32BitsToBf16(0x7f7fffff), 0x7f80); // largest f32 rounds to inf
    assert.equal(f32BitsToBf16(0xff7fffff), 0xff80);
    assert.equal(f32BitsToBf16(0x00000001), 0x0000); // smallest subnormal
    assert.equal(f32BitsToBf16(0x00008000), 0x0000); // subnormal tie to even zero
    assert.equal(f32BitsToBf16(0x00018000), 0x0002);
    assert.equal(f32BitsToBf16(0x80000000), 0x8000); // -0
    assert.equal(f32BitsToBf16(0x7f800000), 0x7f80); // inf stays inf
    const nan = f32BitsToBf16(0x7f800001);
    assert.ok(Number.isNaN(bf16ToF32(nan)), 'a signalling NaN stays a NaN rather than becoming inf');
    assert.equal(f32ToBf16(1.00390625), 0x3f80); // 1 + 2^-8 via the number path
    assert.equal(bf16ToF32(0x3f80), 1);
    assert.equal(bf16ToF32(0xc000), -2);
  });

  it('equals nearest-value rounding on every exponent and random mantissas', () => {
    const next = bigStream(7n);
    for (let k = 0; k < 200000; k++) {
      const r = next();
      let bits = Number(r & 0xffffffffn);
      if ((bits & 0x7f800000) === 0x7f800000) bits &= 0xbfffffff; // keep finite
      if (k % 4 === 0) bits = ((bits & 0xffff0000) | 0x8000) >>> 0; // exact ties
      assert.equal(f32BitsToBf16(bits), refBf16(bits), `bits 0x${bits.toString(16)}`);
    }
  });
});

describe('synthetic model: e4m3', () => {
  it('decodes all 256 codes as the f32-layout derivation does', () => {
    for (let c = 0; c < 256; c++) {
      const got = e4m3Decode(c),
        want = refE4m3Decode(c);
      if (Number.isNaN(want)) assert.ok(Number.isNaN(got), `code ${c}`);
      else assert.ok(Object.is(got, want), `code 0x${c.toString(16)}: ${got} vs ${want}`);
    }
    assert.ok(Number.isNaN(e4m3Decode(0x7f)) && Number.isNaN(e4m3Decode(0xff)));
    assert.equal(e4m3Decode(0x7e), 448);
    assert.equal(e4m3Decode(0xfe), -448);
    assert.equal(e4m3Decode(0x38), 1);
    assert.equal(e4m3Decode(0x08), 2 ** -6);
    assert.equal(e4m3Decode(0x01), 2 ** -9);
    assert.equal(e4m3Decode(0x07), 7 / 512);
    assert.equal(e4m3Decode(0x77), 240);
    assert.ok(Object.is(e4m3Decode(0x80), -0));
    for (let c = 1; c <= 0x7e; c++) assert.ok(e4m3Decode(c) > e4m3Decode(c - 1), 'positive codes increase');
  });

  it('encode(decode(c)) is c for every finite code', () => {
    for (let c = 0; c < 256; c++)
      if ((c & 0x7f) !== 0x7f) assert.equal(e4m3Encode(e4m3Decode(c)), c, `code 0x${c.toString(16)}`);
  });

  it('saturates at ±448 and keeps NaN', () => {
    for (const x of [448, 448.0001, 463.99, 464, 480, 1e6, 3.4e38, Infinity]) {
      assert.equal(e4m3Encode(x), 0x7e, `${x}`);
      assert.equal(e4m3Encode(-x), 0xfe, `${-x}`);
    }
    assert.equal(e4m3Encode(Number.NaN), 0x7f);
  });

  it('rounds ties to even, normal and subnormal', () => {
    assert.equal(e4m3Encode(1.0625), 0x38); // between 1 (0x38) and 1.125 (0x39)
    assert.equal(e4m3Encode(1.1875), 0x3a); // between 1.125 (0x39) and 1.25 (0x3a)
    assert.equal(e4m3Encode(432), 0x7e); // between 416 (0x7d) and 448 (0x7e)
    assert.equal(e4m3Encode(1.5 / 512), 0x02); // subnormals 1/512 and 2/512
    assert.equal(e4m3Encode(0.5 / 512), 0x00);
    assert.equal(e4m3Encode(-0.5 / 512), 0x80);
    assert.equal(e4m3Encode(7.5 / 512), 0x08); // top subnormal to the smallest normal
    assert.equal(e4m3Encode(-1.0625), 0xb8);
  });

  it('equals a brute-force nearest search at every midpoint, its f32 neighbours, and random f32s', () => {
    const xs: number[] = [];
    for (let c = 1; c <= 0x7e; c++) {
      const mid = (e4m3Decode(c - 1) + e4m3Decode(c)) / 2,
        b = f32ToBits(mid);
      xs.push(mid, bitsToF32(b + 1), bitsToF32(b - 1));
    }
    const next = bigStream(3n);
    for (let k = 0; k < 5000; k++) {
      const r = next();
      // Magnitudes from 2^-12 to 2^10 uniformly in the exponent.
      xs.push(Math.fround((Number(r & 0xffffn) / 65536 + 1) * 2 ** (Number((r >> 16n) % 23n) - 12)));
    }
    for (const x of xs) {
      assert.equal(e4m3Encode(x), refE4m3Encode(x), `${x}`);
      assert.equal(e4m3Encode(-x), refE4m3Encode(-x), `${-x}`);
    }
  });

  it('block quantization: scale max|b|/448, 1 for a zero block, round trip within half a step', () => {
    const b = new Float32Array(256);
    for (let i = 0; i < 128; i++) b[i] = Math.fround(Math.sin(i) * 3);
    // second block all zero
    const xq = new Uint8Array(256),
      xs = new Float32Array(2),
      xd = new Float32Array(256);
    quantizeE4m3Blocks(b, xq, xs, xd);
    const mx = b.subarray(0, 128).reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    assert.equal(xs[0], Math.fround(mx / 448));
    assert.equal(xs[1], 1);
    assert.ok(xq.subarray(128).every((c) => c === 0) && xd.subarray(128).every((v) => v === 0));
    const imax = b.subarray(0, 128).findIndex((v) => Math.abs(v) === mx);
    assert.equal(xq[imax]! & 0x7f, 0x7e, 'the block maximum lands on ±448');
    for (let i = 0; i < 128; i++) {
      // e4m3 steps are 2^-3 of the binade (2^-9·xs below 2^-6·xs): half a step relative bound.
      const err = Math.abs(xd[i]! - b[i]!),
        tol = Math.max(Math.abs(b[i]!) / 16, 2 ** -10 * xs[0]!) * 1.0001;
      assert.ok(err <= tol, `xd[${i}] ${xd[i]} vs ${b[i]}`);
    }
    assert.throws(() => quantizeE4m3Blocks(new Float32Array(100), xq, xs, xd), /not a multiple of 128/);
  });
});

describe('synthetic model: routing and small pieces', () => {
  it('top-k: largest first, ties to the lower index', () => {
    assert.deepEqual(topk([1, 3, 3, 2, 3], 3), [1, 2, 4]);
    assert.deepEqual(topk([5, 5, 5, 5], 2), [0, 1]);
    assert.deepEqual(topk([0.5, 0.9, 0.1], 3), [1, 0, 2]);
    assert.deepEqual(topk([-1, -2, -1, 7], 4), [3, 0, 2, 1]);
    assert.deepEqual(topk(new Float32Array([0, -0, 0]), 2), [0, 1]);
    assert.throws(() => topk([1, 2], 3), /k must be in \[1, 2\], got 3/);
  });

  it('matvec is, bit for bit, one rounded product and one rounded sum at a time, in row order', () => {
    // Ranges as wide as f32 allows and sizes that leave rows over after its passes of four.
    let seed = 12345;
    const rnd = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed / 2 ** 32 - 0.5) * 2 ** ((seed % 60) - 30);
    };
    for (const [n, m, off] of [
      [1, 1, 0],
      [7, 5, 3],
      [128, 64, 0],
      [130, 33, 17],
    ] as const) {
      const a = Float32Array.from({ length: n }, rnd),
        w = Float32Array.from({ length: off + n * m }, rnd);
      const want = new Float32Array(m);
      for (let i = 0; i < n; i++)
        for (let o = 0; o < m; o++) want[o] = Math.fround(want[o]! + Math.fround(a[i]! * w[off + i * m + o]!));
      const got = matvec(a, w, off, n, m, new Float32Array(m).fill(Number.NaN));
      assert.deepEqual(new Uint32Array(got.buffer), new Uint32Array(want.buffer), `[${n}] @ [${n}, ${m}]`);
    }
  });

  it('argmax ties to the lower index', () => {
    assert.equal(argmax([1, 4, 4, 2]), 1);
    assert.equal(argmax([3, 3]), 0);
    assert.equal(argmax(new Float32Array([-5, -1, -1])), 1);
  });

  it('rmsnorm of a constant vector is the gain', () => {
    const h = new Float32Array(256).fill(-3),
      g = new Float32Array(256).fill(2),
      out = new Float32Array(256);
    rmsnorm(h, g, out);
    for (const v of out) assert.ok(Math.abs(v + 2) < 1e-5, `${v}`);
  });
});

// ---------------------------------------------------------------------------------------------
// A float64 transcription of "One decode step", written straight from docs/model.md with its own
// indexing, to catch structural mistakes (a wrong stride, a missing residual) that determinism
// tests cannot see. Only the fp8 round trip is shared (already held to its own references).

class Ref64 {
  private readonly w = new Map<number, Float64Array>();
  private readonly cache: number[][][] = []; // [l][j] -> R latents
  constructor(private readonly m: CpuModel) {
    for (let l = 0; l < m.cfg.layers; l++) this.cache.push([]);
  }
  private W(id: number): Float64Array {
    let x = this.w.get(id);
    if (!x) {
      x = Float64Array.from(this.m.weightBits(id), bf16ToF32);
      this.w.set(id, x);
    }
    return x;
  }
  private static rms(h: number[], g: Float64Array): number[] {
    const ms = h.reduce((a, v) => a + v * v, 0) / h.length;
    return h.map((v, i) => (v / Math.sqrt(ms + 1e-6)) * g[i]!);
  }
  private static softmax(x: number[]): number[] {
    const mx = Math.max(...x),
      e = x.map((v) => Math.exp(v - mx)),
      s = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / s);
  }
  step(x: number, p: number): { h: number[]; logits: number[] } {
    const {
      hidden: H,
      heads: N,
      latent: R,
      headDim: Dv,
      experts: E,
      topk: K,
      ffn: F,
      vocab: V,
      layers: L,
    } = this.m.cfg;
    const emb = this.W(0);
    let h = Array.from({ length: H }, (_, i) => emb[x * H + i]!);
    for (let l = 0; l < L; l++) {
      const id = (k: number): Float64Array => this.W(16 * l + k);
      const Wq = id(1),
        Wuv = id(2),
        Wdkv = id(3),
        Wo = id(4),
        Wr = id(5),
        W1 = id(6),
        W3 = id(7),
        W2 = id(8);
      const a = Ref64.rms(h, id(9));
      const c = Array.from({ length: R }, (_, r) => a.reduce((acc, ai, i) => acc + ai * Wdkv[i * R + r]!, 0));
      this.cache[l]![p] = c;
      const u: number[] = [];
      for (let n = 0; n < N; n++) {
        const q = Array.from({ length: R }, (_, r) => a.reduce((acc, ai, i) => acc + ai * Wq[(i * N + n) * R + r]!, 0));
        const s: number[] = [];
        for (let j = 0; j <= p; j++)
          s.push(q.reduce((acc, qr, r) => acc + qr * this.cache[l]![j]![r]!, 0) / Math.sqrt(R));
        const pr = Ref64.softmax(s);
        const o = Array.from({ length: R }, (_, r) => pr.reduce((acc, pj, j) => acc + pj * this.cache[l]![j]![r]!, 0));
        for (let d = 0; d < Dv; d++) u.push(o.reduce((acc, or, r) => acc + or * Wuv[(n * R + r) * Dv + d]!, 0));
      }
      h = h.map((hi, i) => hi + u.reduce((acc, uk, k) => acc + uk * Wo[k * H + i]!, 0));
      const b = Ref64.rms(h, id(10));
      const logits = Array.from({ length: E }, (_, e) => b.reduce((acc, bi, i) => acc + bi * Wr[i * E + e]!, 0));
      const ids = logits
        .map((v, e) => [v, e] as const)
        .sort((p1, p2) => p2[0] - p1[0] || p1[1] - p2[1])
        .slice(0, K)
        .map(([, e]) => e);
      const wts = Ref64.softmax(ids.map((e) => logits[e]!));
      const xd = b.slice();
      for (let k0 = 0; k0 < H; k0 += 128) {
        const mx = Math.max(...b.slice(k0, k0 + 128).map(Math.abs)),
          xs = mx === 0 ? 1 : mx / 448;
        for (let i = k0; i < k0 + 128; i++) xd[i] = e4m3Decode(e4m3Encode(b[i]! / xs)) * xs;
      }
      const moe = new Array<number>(H).fill(0);
      ids.forEach((e, k) => {
        const act: number[] = [];
        for (let f = 0; f < F; f++) {
          let g = 0,
            up = 0;
          for (let i = 0; i < H; i++) {
            g += xd[i]! * W1[(e * H + i) * F + f]!;
            up += xd[i]! * W3[(e * H + i) * F + f]!;
          }
          act.push((g / (1 + Math.exp(-g))) * up);
        }
        for (let i = 0; i < H; i++)
          moe[i] = moe[i]! + wts[k]! * act.reduce((acc, af, f) => acc + af * W2[(e * F + f) * H + i]!, 0);
      });
      h = h.map((hi, i) => hi + moe[i]!);
    }
    const hn = Ref64.rms(h, this.W(16 * L + 1)),
      Wv = this.W(16 * L + 2);
    const logits = Array.from({ length: V }, (_, v) => hn.reduce((acc, a, i) => acc + a * Wv[i * V + v]!, 0));
    return { h, logits };
  }
}

describe('synthetic model: CPU decode', function () {
  this.timeout(30000);
  let model: CpuModel;
  before(() => {
    model = new CpuModel(tiny, { maxBatch: 3 });
  });
  beforeEach(() => model.reset());

  function greedy(m: CpuModel, first: number, n: number): { tokens: number[]; hidden: Float32Array[] } {
    const tokens: number[] = [],
      hidden: Float32Array[] = [];
    let x = first;
    for (let p = 0; p < n; p++) {
      const r = m.step([x], [p]);
      x = r.next[0]!;
      tokens.push(x);
      hidden.push(r.hidden);
    }
    return { tokens, hidden };
  }

  it('decodes 16 greedy tokens deterministically, with finite, varied hidden states', () => {
    const a = greedy(model, 1, 16);
    const other = new CpuModel(tiny);
    const b = greedy(other, 1, 16);
    assert.deepEqual(a.tokens, b.tokens);
    for (let p = 0; p < 16; p++)
      assert.deepEqual(
        new Uint32Array(a.hidden[p]!.buffer),
        new Uint32Array(b.hidden[p]!.buffer),
        `step ${p} bit for bit`,
      );
    for (const h of a.hidden) {
      assert.equal(h.length, 256);
      assert.ok(h.every(Number.isFinite));
      assert.ok(new Set(h).size > 100, 'hidden values vary within a step');
    }
    assert.notDeepEqual(a.hidden[0], a.hidden[1]);
    assert.ok(a.tokens.every((t) => Number.isInteger(t) && t >= 0 && t < 256));
    // reset replays the same sequence
    model.reset();
    assert.deepEqual(greedy(model, 1, 16).tokens, a.tokens);
  });

  it('another seed is another model', () => {
    const m7 = new CpuModel({ ...tiny, seed: 7n });
    const r0 = model.step([1], [0]).hidden,
      r7 = m7.step([1], [0]).hidden;
    assert.notDeepEqual(r0, r7);
  });

  it('rows of a batch are independent sequences: a batch equals each row run alone', () => {
    const solo = [5, 77, 200].map((x) => {
      model.reset();
      return greedy(model, x, 6);
    });
    model.reset();
    let xs = [5, 77, 200];
    for (let p = 0; p < 6; p++) {
      const r = model.step(xs, [p, p, p]);
      for (let s = 0; s < 3; s++) {
        assert.equal(r.next[s], solo[s]!.tokens[p]);
        assert.deepEqual(r.hidden.subarray(s * 256, (s + 1) * 256), solo[s]!.hidden[p]);
      }
      xs = r.next;
    }
  });

  it('agrees with a float64 transcription of docs/model.md within f32 rounding', () => {
    const ref = new Ref64(model);
    let x = 3;
    for (let p = 0; p < 8; p++) {
      const r = model.step([x], [p], { trace: true });
      const want = ref.step(x, p);
      let num = 0,
        den = 0;
      for (let i = 0; i < 256; i++) {
        num += (r.hidden[i]! - want.h[i]!) ** 2;
        den += want.h[i]! ** 2;
      }
      assert.ok(Math.sqrt(num / den) < 1e-5, `step ${p}: relative error ${Math.sqrt(num / den)}`);
      const lg = r.trace!.logits;
      for (let v = 0; v < 256; v++)
        assert.ok(Math.abs(lg[v]! - want.logits[v]!) < 1e-3 * (1 + Math.abs(want.logits[v]!)), `logit ${v}`);
      assert.equal(r.next[0], want.logits.indexOf(Math.max(...want.logits)));
      x = r.next[0]!;
    }
  });

  it('traces per-layer pieces consistent with the step', () => {
    const r = model.step([9, 10], [0, 0], { trace: true });
    const tr = r.trace!;
    assert.equal(tr.layers.length, 2);
    const last = tr.layers[1]!;
    assert.deepEqual(last.hOut, r.hidden);
    for (const lt of tr.layers) {
      for (let s = 0; s < 2; s++) {
        const ids = Array.from(lt.ids.subarray(2 * s, 2 * s + 2)),
          w = lt.wts.subarray(2 * s, 2 * s + 2);
        assert.notEqual(ids[0], ids[1]);
        assert.ok(ids.every((e) => e >= 0 && e < 4));
        assert.ok(w[0]! >= w[1]! && Math.abs(w[0]! + w[1]! - 1) < 1e-6, 'largest first, summing to 1');
      }
      assert.ok(lt.u.some((v) => v !== 0) && lt.c.some((v) => v !== 0));
      assert.equal(lt.xq.length, 512);
    }
  });

  it('refuses bad steps by name and leaves the sequences as they were', () => {
    model.step([1, 2], [0, 0]);
    assert.throws(() => model.step([256], [1]), /row 0: token 256 is out of range \[0, 256\)/);
    assert.throws(() => model.step([-1], [1]), /token -1 is out of range/);
    assert.throws(() => model.step([1.5], [1]), /token 1.5 is out of range/);
    assert.throws(() => model.step([1], [64]), /row 0: position 64 is past the KV cache \(maxPos 64\)/);
    assert.throws(
      () => model.step([1, 1], [1, 3]),
      /row 1: position 3 does not follow the sequence, whose next position is 1/,
    );
    assert.throws(() => model.step([1], [0]), /position 0 does not follow the sequence, whose next position is 1/);
    assert.throws(() => model.step([1, 1, 1, 1], [1, 1, 0, 0]), /batch of 4 rows is larger than maxBatch 3/);
    assert.throws(() => model.step([1, 2], [1]), /2 tokens but 1 positions/);
    assert.throws(() => model.step([], []), /empty batch/);
    // Row 1 was fine but row 0 was not: nothing advanced.
    assert.throws(() => model.step([999, 1], [1, 1]), /row 0: token 999/);
    assert.equal(model.length(0), 1);
    assert.equal(model.length(1), 1);
    model.step([1, 2], [1, 1]);
    assert.equal(model.length(0), 2);
    assert.throws(() => model.length(3), /slot must be in \[0, 3\)/);
    assert.throws(() => new CpuModel(tiny, { maxBatch: 0 }), /maxBatch must be a positive integer, got 0/);
    assert.throws(() => new CpuModel({ ...tiny, hidden: 300 }), /hidden must be a positive multiple of 256, got 300/);
  });

  it('runs to the end of the cache and no further', () => {
    const m = new CpuModel({ ...tiny, maxPos: 3, layers: 1 }, { maxBatch: 1 });
    for (let p = 0; p < 3; p++) m.step([4], [p]);
    assert.throws(() => m.step([4], [3]), /position 3 is past the KV cache \(maxPos 3\)/);
  });
});
