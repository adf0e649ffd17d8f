/**
 * The model kernels of cu/model.h on one GPU, driven through the addon on this thread, against the
 * CPU oracle (src/decode) or an f64 reference: bit-exact where model.h promises the oracle's own
 * operations, within rounding where it allows another summation order, and bit-identical across
 * column / head / expert slices, batch sizes and misaligned inputs (the slice rule the sharded walk
 * relies on). Every output is poisoned before its launch, so an element a kernel forgets fails.
 * Inputs are fresh each run; a failure names MEMRA_TEST_SEED, which replays them when set in the
 * environment. Fails (does not skip) without a GPU, like the rest of the GPU suite.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { asStreamHandle, loadBinding, ptrAdd, type DevicePtr } from '../../src/runtime/binding.js';
import * as F from '../../src/decode/f32-ops.js';
import { presetByName, type ModelConfig } from '../../src/decode/model-config.js';
import { bf16ToF32, generateTensor, tensorSpecs, widenBf16 } from '../../src/decode/weights.js';
import { seededRandom } from '../support/seeded-random.js';
import { gpuSuite } from '../support/gpu-machine.js';

gpuSuite();

const b = loadBinding();
const fr = Math.fround;
const SEED =
  process.env.MEMRA_TEST_SEED === undefined ? randomInt(0, 2 ** 32) : Number(process.env.MEMRA_TEST_SEED) >>> 0;

const fail = (msg: string): never => assert.fail(`${msg} [MEMRA_TEST_SEED=${SEED}]`);
const check = (ok: boolean, msg: () => string): void => {
  if (!ok) fail(msg());
};

// ---- inputs: a seeded generator, reset before each test so one test replays alone
let rnd = seededRandom(SEED);
const u32 = (): number => Math.floor(rnd() * 2 ** 32);
const u64 = (): bigint => (BigInt(u32()) << 32n) | BigInt(u32());
const randF = (n: number, scale = 1): Float32Array => Float32Array.from({ length: n }, () => (rnd() * 2 - 1) * scale);

// ---- comparisons
type Typed = Float32Array | Uint16Array | Uint8Array | Int32Array;
const F32 = new Float32Array(1),
  F32_BITS = new Uint32Array(F32.buffer);
const bitsOf = (x: number): number => {
  F32[0] = x;
  return F32_BITS[0]!;
};
const ulps = (x: number, y: number): number => Math.abs((bitsOf(x) | 0) - (bitsOf(y) | 0));
// f32 compared through its bits: NaN payloads and -0 count, and NaN equals itself.
const bitsView = (a: Typed): ArrayLike<number> =>
  a instanceof Float32Array ? new Uint32Array(a.buffer, a.byteOffset, a.length) : a;
const show = (a: Typed, i: number): string => `${a[i]} (0x${(bitsView(a)[i]! >>> 0).toString(16)})`;

function sameBits(got: Typed, want: Typed, what: string): void {
  check(got.length === want.length, () => `${what}: ${got.length} elements, expected ${want.length}`);
  if (
    Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(
      Buffer.from(want.buffer, want.byteOffset, want.byteLength),
    )
  )
    return;
  const g = bitsView(got),
    w = bitsView(want);
  for (let i = 0; i < g.length; i++)
    if (g[i] !== w[i]) fail(`${what}: first difference at index ${i}: GPU ${show(got, i)}, expected ${show(want, i)}`);
}

/** The largest error seen and where. A NaN error sticks: a poisoned or NaN output is never within tolerance. */
class Worst {
  value = 0;
  where = 'nowhere';
  /** True when `e` is the new worst; the caller then records `where` (built only then). */
  worse(e: number): boolean {
    if (Number.isNaN(this.value) || !(Number.isNaN(e) || e > this.value)) return false;
    this.value = e;
    return true;
  }
  within(tol: number, what: string): void {
    const v = Number.isInteger(this.value) ? String(this.value) : this.value.toExponential(2);
    check(this.value <= tol, () => `${what}: worst ${v} > ${tol}, at ${this.where}`);
  }
}

// ---- the device, on this thread
let s = asStreamHandle(0);
let bound = false;
const allocs: DevicePtr[] = [];
const sync = (): void => b.streamSynchronize(s);
function alloc(bytes: number): DevicePtr {
  const p = b.malloc(Math.max(bytes, 4));
  allocs.push(p);
  return p;
}
// upload / download run on the legacy stream, which does not order against our non-blocking one.
function up(p: DevicePtr, a: ArrayBufferView): void {
  sync();
  b.upload(p, a);
}
function put(a: ArrayBufferView): DevicePtr {
  const p = alloc(a.byteLength);
  up(p, a);
  return p;
}
function down<T extends Typed>(make: new (n: number) => T, p: DevicePtr, n: number): T {
  sync();
  const a = new make(n);
  b.download(a, p);
  return a;
}
const poison = (p: DevicePtr, bytes: number, byte = 0xff): void => b.memsetAsync(p, byte, bytes, s);
/** An output buffer, poisoned (0xff: every f32 a NaN, every i32 -1). */
function out(bytes: number, byte = 0xff): DevicePtr {
  const p = alloc(bytes);
  poison(p, bytes, byte);
  return p;
}
const untouched = (n: number): Float32Array => new Float32Array(new Uint32Array(n).fill(0xffffffff).buffer);
function freeAll(): void {
  if (allocs.length > 0) sync();
  for (const p of allocs.splice(0)) b.free(p);
}
/** A [rows, cols] bf16 matrix generated on the device from a fresh seed (its bits are read back where needed). */
function genMatrix(rows: number, cols: number, id: number, scale = 0.05): DevicePtr {
  const p = alloc(rows * cols * 2);
  b.launchGenWeights(p, u64().toString(), id, 0, rows, cols, 0, cols, 0, fr(scale), s);
  return p;
}

/** f64 absorbed attention of one head over positions j < np: u = softmax(q·c_j / sqrt R) · c @ Wuv, with Σ|o·w| per output. */
function attentionF64(
  q: Float32Array,
  qOff: number,
  cache: Float32Array,
  cOff: number,
  np: number,
  R: number,
  wuv: Float32Array,
  wOff: number,
  Dv: number,
): { u: Float64Array; mag: Float64Array } {
  const sc = new Float64Array(np);
  let mx = -Infinity,
    sum = 0;
  for (let j = 0; j < np; j++) {
    let d = 0;
    for (let k = 0; k < R; k++) d += q[qOff + k]! * cache[cOff + j * R + k]!;
    sc[j] = d / Math.sqrt(R);
    mx = Math.max(mx, sc[j]!);
  }
  for (let j = 0; j < np; j++) {
    sc[j] = Math.exp(sc[j]! - mx);
    sum += sc[j]!;
  }
  const o = new Float64Array(R);
  for (let j = 0; j < np; j++) for (let k = 0; k < R; k++) o[k] = o[k]! + (sc[j]! / sum) * cache[cOff + j * R + k]!;
  const u = new Float64Array(Dv),
    mag = new Float64Array(Dv);
  for (let d = 0; d < Dv; d++) {
    let a = 0,
      m = 0;
    for (let k = 0; k < R; k++) {
      const p = o[k]! * wuv[wOff + k * Dv + d]!;
      a += p;
      m += Math.abs(p);
    }
    u[d] = a;
    mag[d] = m;
  }
  return { u, mag };
}

describe('model kernels on one GPU', function () {
  this.timeout(600_000);
  before(() => {
    b.bindDevice(0);
    bound = true;
    s = b.streamCreate();
  });
  beforeEach(() => {
    rnd = seededRandom(SEED);
  });
  afterEach(freeAll);
  after(() => {
    if (!bound) return;
    try {
      freeAll();
      if (s) b.streamDestroy(s);
    } finally {
      b.releaseDevice();
      bound = false;
    }
  });

  it('gen_weights: bit-identical to the CPU generator (tiny whole at a fresh seed; small and bench slices at odd offsets; the u64-max seed)', () => {
    const slice = (
      cfg: ModelConfig,
      id: number,
      base: number,
      rows: number,
      srcCols: number,
      colStart: number,
      cols: number,
      label: string,
    ): void => {
      const spec = tensorSpecs(cfg).find((x) => x.id === id);
      assert.ok(spec, `${label}: no tensor with id ${id}`);
      const gain = spec.kind === 'gain';
      const p = out(rows * cols * 2);
      b.launchGenWeights(
        p,
        cfg.seed.toString(),
        id,
        base,
        rows,
        srcCols,
        colStart,
        cols,
        gain ? 1 : 0,
        gain ? 0 : spec.scale,
        s,
      );
      const got = down(Uint16Array, p, rows * cols);
      for (let r = 0; r < rows; r++) {
        const want = generateTensor(cfg.seed, spec, base + r * srcCols + colStart, cols);
        sameBits(
          got.subarray(r * cols, (r + 1) * cols),
          want,
          `gen_weights ${label}: ${spec.name} (id ${id}, seed ${cfg.seed}) row ${r}`,
        );
      }
    };
    const tiny = presetByName('tiny', u64());
    for (const spec of tensorSpecs(tiny)) slice(tiny, spec.id, 0, 1, spec.size, 0, spec.size, 'tiny whole');
    const small = presetByName('small');
    const { hidden: H, heads: N, latent: R, ffn: Fw } = small;
    slice(small, 16 * 1 + 1, 0, 37, N * R, 3 * R + 5, 2 * R + 3, 'small Wq column slice');
    slice(small, 16 * 2 + 8, 3 * Fw * H, 2 * Fw, H, 0, H, 'small W2 two experts');
    slice(small, 16 * 3 + 10, 0, 1, H, 0, H, 'small gain');
    const bench = presetByName('bench', 2n ** 64n - 1n);
    const { hidden: bH, ffn: bF, vocab: bV } = bench;
    slice(bench, 16 * 29 + 6, 31 * bH * bF + 4090 * bF, 6, bF, 0, bF, 'bench W1 last expert tail rows');
    slice(bench, 16 * 30 + 2, 0, 4, bV, bV / 2 + 1, 1001, 'bench Wvocab odd columns');
    slice(bench, 16 * 30 + 2, 4095 * bV, 1, bV, 0, bV, 'bench Wvocab last row');
    slice(bench, 0, (bV - 3) * bH, 3, bH, 0, bH, 'bench Emb last rows');
    slice(bench, 16 * 30 + 1, 0, 1, bH, 0, bH, 'bench gf');
  });

  it('gemv: within 2e-6 of f64 (of Σ|x·w|); t=1 rows, misaligned x and column slices bit-identical to the full product', () => {
    // ldw even: the whole product and even-start slices load weight pairs, odd starts single weights.
    const cols = 203,
      ldw = 206,
      t = 8,
      ldo = cols + 5;
    for (const K of [1000, 4096, 37, 3]) {
      const ldx = K + 4; // odd for K = 37, 3: row r's x then sits at another alignment (float4 vs scalar x path)
      const wp = genMatrix(K, ldw, 900 + K);
      const w = widenBf16(down(Uint16Array, wp, K * ldw));
      const x = randF(t * ldx);
      const xp = put(x);
      const op = out(t * ldo * 4);
      b.launchGemv(op, ldo, xp, ldx, wp, ldw, K, cols, t, false, 0, s);
      const full = down(Float32Array, op, t * ldo);
      const row = (r: number, c0 = 0, n = cols): Float32Array => full.subarray(r * ldo + c0, r * ldo + c0 + n);
      const worst = new Worst();
      for (let r = 0; r < t; r++)
        for (let j = 0; j < cols; j++) {
          let acc = 0,
            mag = 0;
          for (let k = 0; k < K; k++) {
            const p = x[r * ldx + k]! * w[k * ldw + j]!;
            acc += p;
            mag += Math.abs(p);
          }
          if (worst.worse(Math.abs(full[r * ldo + j]! - acc) / (mag || 1)))
            worst.where = `row ${r} col ${j}: GPU ${full[r * ldo + j]}, f64 ${acc}`;
        }
      worst.within(2e-6, `gemv K=${K} cols=${cols} t=${t} vs f64`);
      const o1 = alloc(cols * 4);
      for (let r = 0; r < t; r++) {
        poison(o1, cols * 4);
        b.launchGemv(o1, cols, ptrAdd(xp, r * ldx * 4), ldx, wp, ldw, K, cols, 1, false, 0, s);
        sameBits(down(Float32Array, o1, cols), row(r), `gemv K=${K}: t=1 on row ${r} vs t=${t} row ${r}`);
      }
      const xm = alloc(t * ldx * 4 + 16);
      up(ptrAdd(xm, 4), x); // one float off 16-byte alignment: the scalar x path
      poison(op, t * ldo * 4);
      b.launchGemv(op, ldo, ptrAdd(xm, 4), ldx, wp, ldw, K, cols, 3, false, 0, s);
      const mis = down(Float32Array, op, t * ldo);
      for (let r = 0; r < 3; r++)
        sameBits(mis.subarray(r * ldo, r * ldo + cols), row(r), `gemv K=${K} t=3: misaligned x vs aligned, row ${r}`);
      for (const [c0, n] of [
        [64, 139],
        [63, 77],
        [5, 1],
        [128, 75],
      ] as const) {
        const os = out(t * n * 4);
        b.launchGemv(os, n, xp, ldx, ptrAdd(wp, c0 * 2), ldw, K, n, t, false, 0, s);
        const got = down(Float32Array, os, t * n);
        for (let r = 0; r < t; r++)
          sameBits(
            got.subarray(r * n, (r + 1) * n),
            row(r, c0, n),
            `gemv K=${K}: column slice [${c0}, ${c0 + n}) row ${r} vs the full product`,
          );
      }
    }
  });

  it('gemv split: each of 1 to 8 within 2e-6 of f64; at each, column slices and t = 1 rows bit-identical to the full product; a split past 8 refused by name', () => {
    const K = 4096,
      cols = 640,
      t = 3;
    const wp = genMatrix(K, cols, 950);
    const w = widenBf16(down(Uint16Array, wp, K * cols));
    const x = randF(t * K),
      xp = put(x);
    for (let split = 1; split <= 8; split++) {
      const op = out(t * cols * 4);
      b.launchGemv(op, cols, xp, K, wp, cols, K, cols, t, false, split, s);
      const full = down(Float32Array, op, t * cols);
      const worst = new Worst();
      for (let r = 0; r < t; r++)
        for (let j = 0; j < cols; j += 7) {
          let acc = 0,
            mag = 0;
          for (let k = 0; k < K; k++) {
            const p = x[r * K + k]! * w[k * cols + j]!;
            acc += p;
            mag += Math.abs(p);
          }
          if (worst.worse(Math.abs(full[r * cols + j]! - acc) / (mag || 1)))
            worst.where = `row ${r} col ${j}: GPU ${full[r * cols + j]}, f64 ${acc}`;
        }
      worst.within(2e-6, `gemv K=${K} split ${split} vs f64`);
      const sl = out(t * 77 * 4);
      b.launchGemv(sl, 77, xp, K, ptrAdd(wp, 131 * 2), cols, K, 77, t, false, split, s);
      const got = down(Float32Array, sl, t * 77);
      for (let r = 0; r < t; r++)
        sameBits(
          got.subarray(r * 77, (r + 1) * 77),
          full.subarray(r * cols + 131, r * cols + 208),
          `gemv split ${split}: column slice [131, 208) row ${r}`,
        );
      const o1 = out(cols * 4);
      b.launchGemv(o1, cols, ptrAdd(xp, 2 * K * 4), K, wp, cols, K, cols, 1, false, split, s);
      sameBits(
        down(Float32Array, o1, cols),
        full.subarray(2 * cols, 3 * cols),
        `gemv split ${split}: t = 1 on row 2 vs t = 3`,
      );
    }
    assert.throws(() => b.launchGemv(out(cols * 4), cols, xp, K, wp, cols, K, cols, 1, false, 9, s), {
      name: 'TypeError',
      message: /launchGemv: argument 'split'/,
    });
  });

  it('gemv accumulating: out = f32(out + the product) bit for bit, at t = 1, 3 and 8, strided rows, narrow and wide; the columns past cols untouched', () => {
    for (const [K, cols, t] of [
      [4096, 4096, 1],
      [512, 203, 3],
      [4096, 1536, 8],
    ] as const) {
      const ldo = cols + 7;
      const wp = genMatrix(K, cols, 910 + t);
      const xp = put(randF(t * K));
      const h = randF(t * ldo, 4);
      const plain = out(t * ldo * 4);
      b.launchGemv(plain, ldo, xp, K, wp, cols, K, cols, t, false, 0, s);
      const y = down(Float32Array, plain, t * ldo);
      const hp = put(h);
      b.launchGemv(hp, ldo, xp, K, wp, cols, K, cols, t, true, 0, s);
      const got = down(Float32Array, hp, t * ldo);
      const want = Float32Array.from(h);
      for (let r = 0; r < t; r++)
        for (let j = 0; j < cols; j++) want[r * ldo + j] = fr(h[r * ldo + j]! + y[r * ldo + j]!);
      sameBits(got, want, `gemv accumulate K=${K} cols=${cols} t=${t} (ldo ${ldo}) vs out + gemv`);
    }
  });

  it('gemv, wide (CW 8 / 4 / 2 tiles): rows equal across t = 1, 2, 4, 8 (K = 4096, 1000, 4099 and 40: chunks a thread past a multiple of the weight ring, a row tail, threads with no chunk); sampled columns within 2e-6 of f64; t=1 slices equal the full product', () => {
    const cols = 20000,
      ldw = 20008;
    for (const K of [4096, 1000, 4099, 40]) {
      const wp = genMatrix(K, ldw, 777 + K, 1 / 64);
      const x = randF(8 * K);
      const xp = put(x);
      const outs = new Map<number, Float32Array>();
      for (const t of [1, 2, 4, 8]) {
        const op = out(t * cols * 4);
        b.launchGemv(op, cols, xp, K, wp, ldw, K, cols, t, false, 0, s);
        outs.set(t, down(Float32Array, op, t * cols));
      }
      const o8 = outs.get(8)!,
        o1 = outs.get(1)!;
      for (const t of [1, 2, 4]) {
        for (let r = 0; r < t; r++)
          sameBits(
            outs.get(t)!.subarray(r * cols, (r + 1) * cols),
            o8.subarray(r * cols, (r + 1) * cols),
            `wide gemv K=${K}: t=${t} row ${r} vs t=8 row ${r}`,
          );
      }
      const w = down(Uint16Array, wp, K * ldw); // one download of the whole matrix rather than a column at a time
      const worst = new Worst();
      const sampled = [...Array.from({ length: Math.ceil(cols / 997) }, (_, i) => i * 997), cols - 1];
      for (const j of sampled)
        for (let r = 0; r < 8; r++) {
          let acc = 0,
            mag = 0;
          for (let k = 0; k < K; k++) {
            const p = x[r * K + k]! * bf16ToF32(w[k * ldw + j]!);
            acc += p;
            mag += Math.abs(p);
          }
          if (worst.worse(Math.abs(o8[r * cols + j]! - acc) / mag))
            worst.where = `row ${r} col ${j}: GPU ${o8[r * cols + j]}, f64 ${acc}`;
        }
      worst.within(2e-6, `wide gemv K=${K} cols=${cols} t=8 vs f64 (${sampled.length} sampled columns)`);
      for (const [c0, n] of [
        [8, 4096],
        [256, 19744],
        [4, 300],
        [1, 1000],
      ] as const) {
        const op = out(n * 4);
        b.launchGemv(op, n, xp, K, ptrAdd(wp, c0 * 2), ldw, K, n, 1, false, 0, s);
        sameBits(
          down(Float32Array, op, n),
          o1.subarray(c0, c0 + n),
          `wide gemv K=${K}: slice [${c0}, ${c0 + n}) at t=1 vs the full product`,
        );
      }
    }
  });

  it('rmsnorm: within 3 ulp of f64 (a row at 1e-3 scale included); in place equals out of place', () => {
    const t = 3,
      H = 1024;
    const h = randF(t * H, 3);
    for (let i = 2 * H; i < 3 * H; i++) h[i] = h[i]! * 1e-3;
    const gp = alloc(H * 2);
    b.launchGenWeights(gp, u64().toString(), 9, 0, 1, H, 0, H, 1, 0, s);
    const g = widenBf16(down(Uint16Array, gp, H));
    const hp = put(h);
    const op = out(t * H * 4);
    b.launchRmsnorm(op, hp, gp, t, H, s);
    const got = down(Float32Array, op, t * H);
    const worst = new Worst();
    let vsOracle = 0; // the oracle sums sequentially, the kernel by blocks: reported, not bounded
    for (let r = 0; r < t; r++) {
      const ref = F.rmsnorm(h.subarray(r * H, (r + 1) * H), g, new Float32Array(H));
      let ss = 0;
      for (let i = 0; i < H; i++) ss += h[r * H + i]! ** 2;
      const rr = Math.sqrt(ss / H + F.RMS_EPS);
      for (let i = 0; i < H; i++) {
        const v = got[r * H + i]!,
          want = fr((h[r * H + i]! / rr) * g[i]!);
        vsOracle = Math.max(vsOracle, ulps(ref[i]!, v));
        if (worst.worse(ulps(want, v))) worst.where = `row ${r} index ${i}: GPU ${v}, f64 ${want}`;
      }
    }
    worst.within(3, `rmsnorm t=${t} H=${H} vs f64, in ulps (vs the f32 oracle: ${vsOracle} ulp)`);
    b.launchRmsnorm(hp, hp, gp, t, H, s);
    sameBits(down(Float32Array, hp, t * H), got, 'rmsnorm in place vs out of place');
  });

  it('quantize / dequantize: scales, e4m3 codes and dequantized values bit-exact to the oracle (zero block, eight decades, saturation, -0, tiny scale), misaligned input too', () => {
    const t = 3,
      H = 512,
      nb = (t * H) / F.QUANT_BLOCK;
    const x = randF(t * H, 2);
    x.fill(0, 128, 256); // a zero block: scale 1
    for (let i = 256; i < 384; i++) x[i] = (rnd() * 2 - 1) * 10 ** (rnd() * 8 - 6);
    x[300] = -1e4; // this block's max, by far
    x[H + 5] = -0;
    x[2 * H + 7] = 448 * 1.0000001; // rounds past 448: saturates
    for (let i = 0; i < 128; i++) x[2 * H + 384 + i] = 1e-30 * (i - 64);
    const rq = new Uint8Array(t * H),
      rs = new Float32Array(nb),
      rd = new Float32Array(t * H);
    const per = H / F.QUANT_BLOCK;
    for (let r = 0; r < t; r++)
      F.quantizeE4m3Blocks(
        x.subarray(r * H, (r + 1) * H),
        rq.subarray(r * H, (r + 1) * H),
        rs.subarray(r * per, (r + 1) * per),
        rd.subarray(r * H, (r + 1) * H),
      );
    const xq = out(t * H),
      xs = out(nb * 4),
      xd = out(t * H * 4);
    b.launchQuantize(xq, xs, put(x), t, H, s);
    b.launchDequantize(xd, xq, xs, t, H, s);
    sameBits(down(Float32Array, xs, nb), rs, 'quantize: block scales xs');
    sameBits(down(Uint8Array, xq, t * H), rq, 'quantize: e4m3 codes xq');
    sameBits(down(Float32Array, xd, t * H), rd, 'dequantize: xd');
    const bm = alloc(t * H * 4 + 16);
    up(ptrAdd(bm, 4), x); // one float off: the scalar load path
    poison(xq, t * H);
    poison(xs, nb * 4);
    b.launchQuantize(xq, xs, ptrAdd(bm, 4), t, H, s);
    sameBits(down(Uint8Array, xq, t * H), rq, 'quantize, misaligned input: codes');
    sameBits(down(Float32Array, xs, nb), rs, 'quantize, misaligned input: scales');
  });

  it('router: ids equal the oracle topk (ties to the lower index, ±0 among them, its NaN rules) and weights within 6 ulp of its softmax', () => {
    const t = 4;
    for (const [E, K] of [
      [32, 8],
      [8, 2],
      [5, 5],
      [33, 7],
      [1024, 64],
    ] as const) {
      const lg = randF(t * E, 4);
      lg[0] = Infinity; // row 0: +inf, and -0 == +0 (a tie: the lower index first)
      lg[1] = 0;
      lg[2] = -0;
      lg[E + 3] = lg[E + (9 % E)] = lg[E + 1] = 2.5; // ties in row 1
      lg[2 * E] = NaN; // row 2: a NaN at index 0, which topk admits as its first pick
      lg[3 * E + 2] = NaN; // row 3: a later NaN, which never wins
      const ip = out(t * K * 4),
        wp = out(t * K * 4);
      b.launchRouter(ip, wp, put(lg), t, E, K, s);
      const ids = down(Int32Array, ip, t * K),
        wts = down(Float32Array, wp, t * K);
      const worst = new Worst();
      for (let r = 0; r < t; r++) {
        const row = lg.subarray(r * E, (r + 1) * E);
        const want = F.topk(row, K);
        sameBits(ids.subarray(r * K, (r + 1) * K), Int32Array.from(want), `router E=${E} K=${K} row ${r}: ids`);
        const w = F.softmaxInPlace(new Float32Array(want.map((i) => row[i]!)), K);
        for (let k = 0; k < K; k++) {
          const g = wts[r * K + k]!,
            e = w[k]!;
          const err = Number.isNaN(g) !== Number.isNaN(e) ? Infinity : Number.isNaN(g) ? 0 : ulps(e, g);
          if (worst.worse(err)) worst.where = `row ${r} slot ${k}: GPU ${g}, oracle ${e}`;
        }
      }
      // CUDA's expf is within 2 ulp, the oracle's exp within half of one: each term, and the sum
      // every weight is divided by, may differ by 2.5, and the quotient rounds once more (at K = 64
      // a draw reached 5).
      worst.within(6, `router E=${E} K=${K}: weights, in ulps`);
    }
  });

  it('route_quant: ids, weights, scales, codes and the dequantized rows bit-identical to router, quantize and dequantize run apart (t = 1, 3, 8; a zero block, a NaN block and NaN logits; misaligned b)', () => {
    for (const [t, E, K, H] of [
      [1, 32, 8, 4096],
      [3, 33, 7, 640],
      [8, 1024, 64, 256],
    ] as const) {
      const nb = (t * H) / F.QUANT_BLOCK;
      const lg = randF(t * E, 4),
        x = randF(t * H, 2);
      if (t > 1) {
        lg[E] = NaN;
        x.fill(0, H, H + 128);
        x[2 * H + 5] = NaN;
      }
      const lp = put(lg),
        bp = put(x);
      const ids = out(t * K * 4),
        wts = out(t * K * 4),
        xq = out(t * H),
        xs = out(nb * 4),
        xd = out(t * H * 4);
      b.launchRouter(ids, wts, lp, t, E, K, s);
      b.launchQuantize(xq, xs, bp, t, H, s);
      b.launchDequantize(xd, xq, xs, t, H, s);
      const want = [
        down(Int32Array, ids, t * K),
        down(Float32Array, wts, t * K),
        down(Uint8Array, xq, t * H),
        down(Float32Array, xs, nb),
        down(Float32Array, xd, t * H),
      ] as const;
      for (const [bIn, what] of [
        [bp, 'aligned'],
        [ptrAdd(put(new Float32Array(t * H + 1)), 4), 'misaligned'],
      ] as const) {
        if (what === 'misaligned') up(bIn, x);
        const fused = [out(t * K * 4), out(t * K * 4), out(t * H), out(nb * 4), out(t * H * 4)] as const;
        b.launchRouteQuant(fused[0], fused[1], lp, fused[2], fused[3], fused[4], bIn, t, E, K, H, s);
        const tag = `route_quant t=${t} E=${E} K=${K} H=${H}, ${what} b`;
        sameBits(down(Int32Array, fused[0], t * K), want[0], `${tag}: ids`);
        sameBits(down(Float32Array, fused[1], t * K), want[1], `${tag}: weights`);
        sameBits(down(Uint8Array, fused[2], t * H), want[2], `${tag}: codes`);
        sameBits(down(Float32Array, fused[3], nb), want[3], `${tag}: scales`);
        sameBits(down(Float32Array, fused[4], t * H), want[4], `${tag}: dequantized`);
      }
    }
  });

  it('moe_combine: bit-exact to the slot-order f32 sum plus the residual, experts split between lo and hi at splitE', () => {
    const t = 3,
      K = 4,
      H = 256,
      E = 8;
    const wts = randF(t * K),
      lo = randF(t * K * H, 3),
      hi = randF(t * K * H, 3),
      h = randF(t * H, 2);
    const ids = Int32Array.from({ length: t * K }, () => Math.floor(rnd() * E));
    ids[0] = 0;
    ids[1] = E - 1; // both halves, whatever the draw
    const hp = put(h);
    b.launchMoeCombine(hp, put(wts), put(ids), put(lo), put(hi), E / 2, t, K, H, s);
    const want = new Float32Array(t * H);
    for (let r = 0; r < t; r++)
      for (let i = 0; i < H; i++) {
        let moe = 0;
        for (let k = 0; k < K; k++) {
          const q = r * K + k;
          moe = fr(moe + fr(wts[q]! * (ids[q]! < E / 2 ? lo : hi)[q * H + i]!));
        }
        want[r * H + i] = fr(h[r * H + i]! + moe);
      }
    sameBits(down(Float32Array, hp, t * H), want, `moe_combine t=${t} K=${K} H=${H} (ids ${ids.join(' ')})`);
  });

  it('moe_combine_norm: h and the norm bit-identical to moe_combine, then rmsnorm (t = 1, 3, 8; H = 256, 4096 and 9216, past the held elements; K = 3, 8, 13 and 64, one load group and past it; lo and hi split)', () => {
    const E = 6;
    for (const [t, H, K] of [
      [1, 4096, 8],
      [3, 256, 3],
      [8, 4096, 8],
      [2, 9216, 13],
      [1, 1024, 64],
      [3, 4096, 13],
    ] as Array<[number, number, number]>) {
      const wts = put(randF(t * K)),
        lo = put(randF(t * K * H, 3)),
        hi = put(randF(t * K * H, 3)),
        h = randF(t * H, 2);
      const ids = Int32Array.from({ length: t * K }, () => Math.floor(rnd() * E));
      ids[0] = 0;
      ids[t * K - 1] = E - 1;
      const ip = put(ids),
        gp = alloc(H * 2);
      b.launchGenWeights(gp, u64().toString(), 9, 0, 1, H, 0, H, 1, 0, s);
      const h1 = put(h),
        h2 = put(h),
        n1 = out(t * H * 4),
        n2 = out(t * H * 4);
      b.launchMoeCombine(h1, wts, ip, lo, hi, E / 2, t, K, H, s);
      b.launchRmsnorm(n1, h1, gp, t, H, s);
      b.launchMoeCombineNorm(h2, wts, ip, lo, hi, E / 2, t, K, H, n2, gp, s);
      sameBits(
        down(Float32Array, h2, t * H),
        down(Float32Array, h1, t * H),
        `moe_combine_norm t=${t} H=${H} K=${K}: h`,
      );
      sameBits(
        down(Float32Array, n2, t * H),
        down(Float32Array, n1, t * H),
        `moe_combine_norm t=${t} H=${H} K=${K}: the norm`,
      );
      freeAll();
    }
  });

  it('norm_gemv: the norm and the product bit-identical to rmsnorm, then gemv at split 8 (t = 1 to 8; K = 4096, 1000 and 9216, past the held elements; K = 1001 and 4099, a row tail past the staged chunks; K = 65536, too long to stage; 32, 7 and 64 columns, a column slice, narrow loads); 0 and 65 columns refused by name', () => {
    for (const [t, K, cols, ldw, c0] of [
      [1, 4096, 32, 32, 0],
      [8, 4096, 32, 32, 0],
      [3, 1001, 32, 32, 0],
      [8, 4099, 19, 19, 0],
      [8, 65536, 32, 32, 0],
      [1, 65536, 5, 40, 3],
      [3, 1000, 7, 7, 0],
      [5, 4096, 64, 64, 0],
      [2, 9216, 32, 32, 0],
      [4, 4096, 17, 40, 5],
      [6, 4096, 32, 32, 0],
      [7, 1000, 33, 33, 0],
    ] as Array<[number, number, number, number, number]>) {
      const x = put(randF(t * K, 3)),
        gp = alloc(K * 2),
        wp = genMatrix(K, ldw, 951 + t, 1 / Math.sqrt(K)),
        w = ptrAdd(wp, c0 * 2);
      b.launchGenWeights(gp, u64().toString(), 10, 0, 1, K, 0, K, 1, 0, s);
      const n1 = out(t * K * 4),
        n2 = out(t * K * 4),
        o1 = out(t * cols * 4),
        o2 = out(t * cols * 4);
      b.launchRmsnorm(n1, x, gp, t, K, s);
      b.launchGemv(o1, cols, n1, K, w, ldw, K, cols, t, false, 8, s);
      b.launchNormGemv(n2, o2, cols, x, gp, w, ldw, K, cols, t, s);
      const at = `norm_gemv t=${t} K=${K} cols=${cols} at column ${c0} of ${ldw}`;
      sameBits(down(Float32Array, n2, t * K), down(Float32Array, n1, t * K), `${at}: the norm`);
      sameBits(down(Float32Array, o2, t * cols), down(Float32Array, o1, t * cols), `${at}: the product`);
      freeAll();
    }
    const x = put(randF(4096)),
      g = alloc(4096 * 2),
      w = genMatrix(4096, 128, 960);
    for (const cols of [0, 65])
      assert.throws(() => b.launchNormGemv(out(4096 * 4), out(128 * 4), 128, x, g, w, 128, 4096, cols, 1, s), {
        name: 'TypeError',
        message: /launchNormGemv: argument 'cols'/,
      });
  });

  it('argmax: the lowest index on ties, NaN never wins (an all-NaN row gives 0), -0 == +0, +inf', () => {
    const V = 1000,
      t = 6;
    const x = randF(t * V);
    x[V + 17] = x[V + 5] = 5;
    x[2 * V] = NaN; // the oracle's argmax would keep this NaN; model.h documents that the GPU does not
    x[2 * V + 400] = 9;
    x.fill(NaN, 3 * V, 4 * V);
    for (let i = 0; i < V; i++) x[4 * V + i] = i % 2 ? 0 : -0;
    x[6 * V - 1] = Infinity;
    const op = out(t * 4);
    b.launchArgmax(op, put(x), t, V, s);
    const want = Int32Array.from([F.argmax(x.subarray(0, V)), 5, 400, 0, 0, V - 1]);
    sameBits(down(Int32Array, op, t), want, 'argmax, by row (random, tie, NaN at 0, all NaN, ±0, +inf last)');
  });

  it("set_i32 stores its values; embed widens valid tokens' rows bit for bit and writes NaN rows for tokens outside [0, V)", () => {
    const H = 256,
      V = 300;
    const ep = genMatrix(V, H, 0, 1);
    const emb = down(Uint16Array, ep, V * H);
    const toks = [3, 0, V - 1, V, -1, 2147483647, 7, -2147483648]; // 8 rows: the model kernels' largest t
    const tp = out(toks.length * 4);
    b.launchSetI32(tp, toks, s);
    sameBits(down(Int32Array, tp, toks.length), Int32Array.from(toks), 'set_i32');
    // NaN poison catches an unwritten valid row, zero poison an unwritten NaN row.
    for (const byte of [0xff, 0x00]) {
      const op = out(toks.length * H * 4, byte);
      b.launchEmbed(op, ep, tp, toks.length, H, V, s);
      const e = down(Float32Array, op, toks.length * H);
      toks.forEach((tok, r) => {
        const got = e.subarray(r * H, (r + 1) * H),
          what = `embed (poison 0x${byte.toString(16)}): row ${r}, token ${tok}`;
        if (tok >= 0 && tok < V) sameBits(got, widenBf16(emb.subarray(tok * H, (tok + 1) * H)), what);
        else {
          const i = got.findIndex((v) => !Number.isNaN(v));
          check(i < 0, () => `${what} outside [0, ${V}): index ${i} is ${got[i]}, expected NaN`);
        }
      });
    }
  });

  it('latent_query: the cache rows and q bit-identical to gemv, cache_write and gemv apart (t = 1, 3, 8; R = 512, 96, 32; a head half; bad positions store no c; misaligned a)', () => {
    for (const [t, K, R, nh] of [
      [1, 4096, 512, 32],
      [3, 1000, 96, 5],
      [8, 256, 32, 4],
    ] as const) {
      const P = 40,
        L = 2,
        layer = 1,
        qcols = nh * R;
      const a = randF(t * K),
        ap = put(a);
      const wd = genMatrix(K, R, 920 + t),
        wq = genMatrix(K, qcols, 930 + t);
      const pos = Array.from({ length: t }, (_, s) => (s * 7 + 3) % P);
      const pp = out(64);
      b.launchSetI32(pp, pos, s);
      const cache0 = randF(t * L * P * R);
      // apart: c, then its copy into the cache, then q
      const cRef = out(t * R * 4),
        qRef = out(t * qcols * 4),
        cacheRef = put(cache0);
      b.launchGemv(cRef, R, ap, K, wd, R, K, R, t, false, 0, s);
      b.launchCacheWrite(cacheRef, cRef, pp, t, layer, L, P, R, s);
      b.launchGemv(qRef, qcols, ap, K, wq, qcols, K, qcols, t, false, 0, s);
      const wantCache = down(Float32Array, cacheRef, cache0.length),
        wantQ = down(Float32Array, qRef, t * qcols);
      const fused = (aIn: DevicePtr, what: string): void => {
        const cacheP = put(cache0),
          qp = out(t * qcols * 4);
        b.launchLatentQuery(qp, aIn, wd, wq, ptrAdd(cacheP, layer * P * R * 4), L * P * R, pp, K, R, qcols, t, P, s);
        sameBits(down(Float32Array, cacheP, cache0.length), wantCache, `latent_query t=${t} R=${R} ${what}: the cache`);
        sameBits(down(Float32Array, qp, t * qcols), wantQ, `latent_query t=${t} R=${R} ${what}: q`);
      };
      fused(ap, 'aligned a');
      const am = alloc(a.byteLength + 16);
      up(ptrAdd(am, 4), a);
      fused(ptrAdd(am, 4), 'misaligned a');
      // the second half of the heads alone: q's columns [qcols/2, qcols) of the full launch
      if (nh % 2 === 0) {
        // a rank holds its heads' columns of Wq densely, as the weight loader generates them
        const half = qcols / 2,
          full = down(Uint16Array, wq, K * qcols),
          dense = new Uint16Array(K * half);
        for (let k = 0; k < K; k++) dense.set(full.subarray(k * qcols + half, (k + 1) * qcols), k * half);
        const qh = out(t * half * 4),
          ch = put(cache0);
        b.launchLatentQuery(qh, ap, wd, put(dense), ptrAdd(ch, layer * P * R * 4), L * P * R, pp, K, R, half, t, P, s);
        const got = down(Float32Array, qh, t * half);
        for (let r = 0; r < t; r++)
          sameBits(
            got.subarray(r * half, (r + 1) * half),
            wantQ.subarray(r * qcols + half, (r + 1) * qcols),
            `latent_query t=${t}: heads' second half, row ${r}`,
          );
      }
    }
    // positions outside [0, P): no c stored anywhere
    const K = 256,
      R = 64,
      P = 8,
      t = 2;
    const bad = out(16);
    b.launchSetI32(bad, [P, -1], s);
    const cache0 = randF(t * P * R),
      cp = put(cache0),
      qp = out(t * R * 4);
    b.launchLatentQuery(
      qp,
      put(randF(t * K)),
      genMatrix(K, R, 940),
      genMatrix(K, R, 941),
      cp,
      P * R,
      bad,
      K,
      R,
      R,
      t,
      P,
      s,
    );
    sameBits(down(Float32Array, cp, cache0.length), cache0, `latent_query at positions ${P} and -1 must store no c`);
  });

  /** u = attention of nh heads of t rows (this layer of an [t][L][P][R] cache), into a fresh poisoned buffer. */
  function attend(
    t: number,
    nh: number,
    ldu: number,
    q: DevicePtr,
    ldq: number,
    cache: DevicePtr,
    layer: number,
    L: number,
    P: number,
    R: number,
    pos: DevicePtr,
    wuv: DevicePtr,
    Dv: number,
  ): Float32Array {
    const u = out(t * ldu * 4);
    const work = out(b.mlaWorkspaceBytes(t, nh, P, R));
    b.launchMlaAttention(
      u,
      ldu,
      q,
      ldq,
      ptrAdd(cache, layer * P * R * 4),
      L * P * R,
      pos,
      wuv,
      work,
      t,
      nh,
      P,
      R,
      Dv,
      s,
    );
    return down(Float32Array, u, t * ldu);
  }

  /**
   * Heads [33, 36) of an nh-head launch over one layer (u: rows of nh * Dv; q: rows of nh * R),
   * launched alone: each row's u bit-identical to the full launch's.
   */
  function heads33Alone(
    u: Float32Array,
    t: number,
    nh: number,
    q: DevicePtr,
    cache: DevicePtr,
    P: number,
    R: number,
    pos: DevicePtr,
    wuv: DevicePtr,
    Dv: number,
    where: (r: number) => string,
  ): void {
    const alone = attend(
      t,
      3,
      3 * Dv,
      ptrAdd(q, 33 * R * 4),
      nh * R,
      cache,
      0,
      1,
      P,
      R,
      pos,
      ptrAdd(wuv, 33 * R * Dv * 2),
      Dv,
    );
    for (let r = 0; r < t; r++)
      sameBits(
        alone.subarray(r * 3 * Dv, (r + 1) * 3 * Dv),
        u.subarray(r * nh * Dv + 33 * Dv, r * nh * Dv + 36 * Dv),
        `mla_attention heads [33, 36) vs ${nh} heads ${where(r)}`,
      );
  }

  /** Worst error of heads [n0, n0 + nh) of rows < t against attentionF64 (relative to Σ|o·w|). */
  function attentionError(
    u: Float32Array,
    ldu: number,
    t: number,
    nh: number,
    n0: number,
    q: Float32Array,
    ldq: number,
    cache: Float32Array,
    layer: number,
    L: number,
    P: number,
    R: number,
    pos: readonly number[],
    wuv: Float32Array,
    Dv: number,
  ): Worst {
    const worst = new Worst();
    for (let r = 0; r < t; r++)
      for (let n = 0; n < nh; n++) {
        const ref = attentionF64(
          q,
          r * ldq + (n0 + n) * R,
          cache,
          (r * L + layer) * P * R,
          pos[r]! + 1,
          R,
          wuv,
          (n0 + n) * R * Dv,
          Dv,
        );
        for (let d = 0; d < Dv; d++) {
          const g = u[r * ldu + n * Dv + d]!;
          if (worst.worse(Math.abs(g - ref.u[d]!) / (ref.mag[d]! || 1)))
            worst.where = `row ${r} head ${n0 + n} d ${d} (position ${pos[r]}): GPU ${g}, f64 ${ref.u[d]}`;
        }
      }
    return worst;
  }

  it('cache_write and mla_attention (position tiles): within 1e-5 of f64 at every tile edge, at R = 64, 96 and 1024 and 40 heads (8, 16 and 32 heads a tile item, at R = 64 and 384); head slices, t = 1 and misaligned inputs bit-identical; bad positions give NaN and write nothing; 65536 positions within 1e-4', () => {
    const t = 3,
      nh = 4,
      R = 64,
      Dv = 32,
      L = 2,
      layer = 1,
      P = 300;
    const ldq = nh * R + 8,
      ldu = nh * Dv + 3;
    const pos = [0, 150, P - 1];
    const cache = randF(t * L * P * R),
      q = randF(t * ldq, 2),
      c = randF(t * R);
    const cp = put(cache),
      qp = put(q),
      cwp = put(c);
    const pp = out(64);
    b.launchSetI32(pp, pos, s);
    const wp = genMatrix(nh * R, Dv, 34, 1 / Math.sqrt(R));
    const wuv = widenBf16(down(Uint16Array, wp, nh * R * Dv));
    b.launchCacheWrite(cp, cwp, pp, t, layer, L, P, R, s);
    for (let r = 0; r < t; r++) cache.set(c.subarray(r * R, (r + 1) * R), ((r * L + layer) * P + pos[r]!) * R);
    sameBits(down(Float32Array, cp, cache.length), cache, 'cache_write: the whole cache');
    const u = attend(t, nh, ldu, qp, ldq, cp, layer, L, P, R, pp, wp, Dv);
    attentionError(u, ldu, t, nh, 0, q, ldq, cache, layer, L, P, R, pos, wuv, Dv).within(
      1e-5,
      `mla_attention t=${t} nh=${nh} R=${R} Dv=${Dv} positions ${pos.join(', ')} vs f64`,
    );
    // heads [1, 3) alone: q, wuv and u offset, another ldu
    const u2 = attend(t, 2, 2 * Dv, ptrAdd(qp, R * 4), ldq, cp, layer, L, P, R, pp, ptrAdd(wp, R * Dv * 2), Dv);
    for (let r = 0; r < t; r++)
      sameBits(
        u2.subarray(r * 2 * Dv, (r + 1) * 2 * Dv),
        u.subarray(r * ldu + Dv, r * ldu + 3 * Dv),
        `mla_attention heads [1, 3) vs all heads, row ${r}`,
      );
    // one float off: the scalar staging of the cache, then of q
    const cpm = alloc(cache.byteLength + 16);
    up(ptrAdd(cpm, 4), cache);
    sameBits(
      attend(t, nh, ldu, qp, ldq, ptrAdd(cpm, 4), layer, L, P, R, pp, wp, Dv),
      u,
      'mla_attention, misaligned cache (scalar staging) vs aligned',
    );
    const qpm = alloc(q.byteLength + 16);
    up(ptrAdd(qpm, 4), q);
    sameBits(
      attend(t, nh, ldu, ptrAdd(qpm, 4), ldq, cp, layer, L, P, R, pp, wp, Dv),
      u,
      'mla_attention, misaligned q (scalar staging) vs aligned',
    );
    // row 2 alone: slot 2 becomes slot 0 by shifting the cache
    const u3 = attend(
      1,
      nh,
      nh * Dv,
      ptrAdd(qp, 2 * ldq * 4),
      ldq,
      ptrAdd(cp, 2 * L * P * R * 4),
      layer,
      L,
      P,
      R,
      ptrAdd(pp, 8),
      wp,
      Dv,
    );
    sameBits(u3, u.subarray(2 * ldu, 2 * ldu + nh * Dv), 'mla_attention t=1 (row 2) vs t=3 row 2');
    const bad = out(16);
    b.launchSetI32(bad, [P, -1], s);
    const ub = out(2 * Dv * 4, 0x00); // zero poison: NaN must be written
    b.launchMlaAttention(
      ub,
      Dv,
      qp,
      ldq,
      ptrAdd(cp, layer * P * R * 4),
      L * P * R,
      bad,
      wp,
      out(b.mlaWorkspaceBytes(2, 1, P, R)),
      2,
      1,
      P,
      R,
      Dv,
      s,
    );
    const gb = down(Float32Array, ub, 2 * Dv),
      nb = gb.findIndex((v) => !Number.isNaN(v));
    check(nb < 0, () => `mla_attention at positions ${P} and -1: index ${nb} is ${gb[nb]}, expected NaN`);
    b.launchCacheWrite(cp, cwp, bad, 2, layer, L, P, R, s);
    sameBits(down(Float32Array, cp, cache.length), cache, `cache_write at positions ${P} and -1 must write nothing`);

    // Every tile edge (32 positions up to R = 512, 8 above): one head, one row, each position count.
    for (const [Re, Pe, counts] of [
      [64, 200, [1, 2, 31, 32, 33, 63, 64, 65, 97, 200]],
      [96, 80, [1, 32, 33, 80]],
      [1024, 40, [1, 7, 8, 9, 16, 17, 40]],
    ] as Array<[number, number, number[]]>) {
      const ce = randF(Pe * Re),
        qe = randF(Re, 2),
        we = genMatrix(Re, Dv, 36, 1 / Math.sqrt(Re));
      const wve = widenBf16(down(Uint16Array, we, Re * Dv));
      const cep = put(ce),
        qep = put(qe),
        pe = out(16);
      for (const np of counts) {
        b.launchSetI32(pe, [np - 1], s);
        const ue = attend(1, 1, Dv, qep, Re, cep, 0, 1, Pe, Re, pe, we, Dv);
        attentionError(ue, Dv, 1, 1, 0, qe, Re, ce, 0, 1, Pe, Re, [np - 1], wve, Dv).within(
          1e-5,
          `mla_attention R=${Re} over ${np} positions vs f64`,
        );
      }
    }

    // 40 heads: a second head group of 8; heads [33, 36) alone bit-identical to the full launch.
    const nh4 = 40,
      R4 = 64,
      P4 = 70;
    const c4 = randF(P4 * R4),
      q4 = randF(nh4 * R4, 2),
      w4 = genMatrix(nh4 * R4, Dv, 37, 1 / Math.sqrt(R4));
    const wv4 = widenBf16(down(Uint16Array, w4, nh4 * R4 * Dv));
    const c4p = put(c4),
      q4p = put(q4),
      p4 = out(16);
    b.launchSetI32(p4, [P4 - 1], s);
    const u4 = attend(1, nh4, nh4 * Dv, q4p, nh4 * R4, c4p, 0, 1, P4, R4, p4, w4, Dv);
    attentionError(u4, nh4 * Dv, 1, nh4, 0, q4, nh4 * R4, c4, 0, 1, P4, R4, [P4 - 1], wv4, Dv).within(
      1e-5,
      `mla_attention ${nh4} heads vs f64`,
    );
    heads33Alone(u4, 1, nh4, q4p, c4p, P4, R4, p4, w4, Dv, () => `at R = ${R4}, position ${P4 - 1}`);

    // 40 heads over a long context: the tile kernel's items take 8 heads while a row's items fit
    // its share of the blocks (on 132 SMs, 44 a row: row 0, 4 tiles, 20 items), then 16 (row 1, 13
    // tiles, 39 items), then 32 (row 2, 63 tiles, 126 items, three a block); each row within 1e-5
    // of f64, and heads [33, 36) alone (8 heads an item throughout) bit-identical. At R = 384 a
    // 32-head item's lanes hold two r groups for some of its r and one for the rest.
    const t6 = 3,
      P6 = 2000,
      pos6 = [100, 399, P6 - 1];
    const p6 = out(16);
    b.launchSetI32(p6, pos6, s);
    for (const R6 of [R4, 384]) {
      const c6 = randF(t6 * P6 * R6),
        q6 = randF(t6 * nh4 * R6, 2),
        w6 = genMatrix(nh4 * R6, Dv, 38, 1 / Math.sqrt(R6));
      const wv6 = widenBf16(down(Uint16Array, w6, nh4 * R6 * Dv));
      const c6p = put(c6),
        q6p = put(q6);
      const u6 = attend(t6, nh4, nh4 * Dv, q6p, nh4 * R6, c6p, 0, 1, P6, R6, p6, w6, Dv);
      attentionError(u6, nh4 * Dv, t6, nh4, 0, q6, nh4 * R6, c6, 0, 1, P6, R6, pos6, wv6, Dv).within(
        1e-5,
        `mla_attention ${nh4} heads at R = ${R6}, positions ${pos6.join(', ')} vs f64`,
      );
      heads33Alone(u6, t6, nh4, q6p, c6p, P6, R6, p6, w6, Dv, (r) => `at R = ${R6}, row ${r} at position ${pos6[r]}`);
    }

    const P2 = 65536,
      R2 = 512,
      Dv2 = 128; // the longest context at the largest position
    const cache2 = randF(P2 * R2),
      q2 = randF(R2);
    const p2 = out(16);
    b.launchSetI32(p2, [P2 - 1], s);
    const w2p = genMatrix(R2, Dv2, 35, 1 / Math.sqrt(R2));
    const wv2 = widenBf16(down(Uint16Array, w2p, R2 * Dv2));
    const gu = attend(1, 1, Dv2, put(q2), R2, put(cache2), 0, 1, P2, R2, p2, w2p, Dv2);
    attentionError(gu, Dv2, 1, 1, 0, q2, R2, cache2, 0, 1, P2, R2, [P2 - 1], wv2, Dv2).within(
      1e-4,
      `mla_attention P=${P2} R=${R2} Dv=${Dv2} at position ${P2 - 1} vs f64`,
    );
  });

  it("mla_attention at R = 512 and 40 heads either side of 2048 positions (where a build with -DMEMRA_MLA_MMA_FROM=2048 takes the tensor cores' item): each row within 1e-5 of f64; head slices, t = 1 and misaligned inputs bit-identical", () => {
    // cu/mla_tile_mma.cuh kFrom: in such a build a row of at least 2048 positions takes the item
    // on the tensor cores, the row below it the f32 item, whatever rows share the launch. 40
    // heads: at 3001 positions a row's items are 32 heads, the second group 8 of them (in the
    // tensor cores' item, half of an m16 tile empty, its query rows zeroed).
    const t = 3,
      nh = 40,
      R = 512,
      Dv = 32,
      P = 3001,
      pos = [2046, 2047, P - 1];
    const cache = randF(t * P * R),
      q = randF(t * nh * R, 2),
      wp = genMatrix(nh * R, Dv, 39, 1 / Math.sqrt(R));
    const wuv = widenBf16(down(Uint16Array, wp, nh * R * Dv));
    const cp = put(cache),
      qp = put(q),
      pp = out(16);
    b.launchSetI32(pp, pos, s);
    const ldq = nh * R,
      ldu = nh * Dv;
    const u = attend(t, nh, ldu, qp, ldq, cp, 0, 1, P, R, pp, wp, Dv);
    attentionError(u, ldu, t, nh, 0, q, ldq, cache, 0, 1, P, R, pos, wuv, Dv).within(
      1e-5,
      `mla_attention ${nh} heads at R = ${R}, positions ${pos.join(', ')} vs f64`,
    );
    heads33Alone(u, t, nh, qp, cp, P, R, pp, wp, Dv, (r) => `at R = ${R}, row ${r} at position ${pos[r]}`);
    for (let r = 0; r < t; r++) {
      const alone = attend(
        1,
        nh,
        ldu,
        ptrAdd(qp, r * ldq * 4),
        ldq,
        ptrAdd(cp, r * P * R * 4),
        0,
        1,
        P,
        R,
        ptrAdd(pp, 4 * r),
        wp,
        Dv,
      );
      sameBits(alone, u.subarray(r * ldu, (r + 1) * ldu), `mla_attention t=1 vs t=3 row ${r} at position ${pos[r]}`);
    }
    // one float off: the scalar staging of the cache, then of q
    const cpm = alloc(cache.byteLength + 16);
    up(ptrAdd(cpm, 4), cache);
    sameBits(
      attend(t, nh, ldu, qp, ldq, ptrAdd(cpm, 4), 0, 1, P, R, pp, wp, Dv),
      u,
      `mla_attention at R = ${R}, misaligned cache vs aligned`,
    );
    const qpm = alloc(q.byteLength + 16);
    up(ptrAdd(qpm, 4), q);
    sameBits(
      attend(t, nh, ldu, ptrAdd(qpm, 4), ldq, cp, 0, 1, P, R, pp, wp, Dv),
      u,
      `mla_attention at R = ${R}, misaligned q vs aligned`,
    );
  });

  it('mla_attention in one kernel (P <= mlaShortPositions): bit-identical to the tiled form at every position count to 128 and at P of 32, 64 and 96, R = 64, 96, 128 and 512, odd heads and a ragged Dv; rows at or past P give NaN; misaligned inputs fall back to the same bits', () => {
    const t = 3,
      L = 2,
      layer = 1,
      Pc = 300; // the cache's length: the tiled form's P
    for (const [R, nh, Dv] of [
      [64, 4, 32],
      [96, 5, 96],
      [128, 3, 72],
      [512, 32, 128],
    ] as Array<[number, number, number]>) {
      const Ps = b.mlaShortPositions(R);
      check(Ps === 128, () => `mlaShortPositions(${R}) is ${Ps}, expected 128`);
      const ldq = nh * R + 4,
        ldu = nh * Dv + 5;
      const cp = put(randF(t * L * Pc * R)),
        qp = put(randF(t * ldq, 2)),
        wp = genMatrix(nh * R, Dv, 38, 1 / Math.sqrt(R)),
        pp = out(16);
      const at = (c: DevicePtr, q: DevicePtr, P: number): Float32Array => {
        const u = out(t * ldu * 4);
        const work = out(b.mlaWorkspaceBytes(t, nh, Pc, R));
        b.launchMlaAttention(
          u,
          ldu,
          q,
          ldq,
          ptrAdd(c, layer * Pc * R * 4),
          L * Pc * R,
          pp,
          wp,
          work,
          t,
          nh,
          P,
          R,
          Dv,
          s,
        );
        return down(Float32Array, u, t * ldu);
      };
      const counts = [1, 2, 3, 31, 32, 33, 63, 64, 65, 96, 97, 127, 128];
      for (let i = 0; i < counts.length; i += 2) {
        const pos = [counts[i]! - 1, counts[(i + 1) % counts.length]! - 1, (counts[i]! * 37) % Ps];
        b.launchSetI32(pp, pos, s);
        const short = at(cp, qp, Ps);
        for (let r = 0; r < t; r++)
          check(
            !short.subarray(r * ldu, r * ldu + nh * Dv).some(Number.isNaN),
            () => `one-kernel attention R=${R}: NaN in row ${r} at position ${pos[r]}`,
          );
        sameBits(short, at(cp, qp, Pc), `mla_attention R=${R} nh=${nh} Dv=${Dv} positions ${pos}: one kernel vs tiled`);
      }
      // P below the bound, as a caller may pass it: a block holds at most P rows, the newest at
      // P - 1 among them where its share of the rows allows
      for (const P of [32, 64, 96]) {
        const pos = [P - 1, P / 2, P - 2];
        b.launchSetI32(pp, pos, s);
        sameBits(at(cp, qp, P), at(cp, qp, Pc), `mla_attention R=${R} P=${P} positions ${pos}: one kernel vs tiled`);
      }
      // a row at P, another past it: NaN in theirs only; the third row as the tiled form has it
      b.launchSetI32(pp, [Ps, 2 * Ps, 5], s);
      const edge = at(cp, qp, Ps),
        tiled = at(cp, qp, Pc);
      for (let r = 0; r < 2; r++) {
        const bad = edge.subarray(r * ldu, r * ldu + nh * Dv).findIndex((v) => !Number.isNaN(v));
        check(bad < 0, () => `one-kernel attention R=${R}: row ${r} at or past P=${Ps}: index ${bad} not NaN`);
      }
      sameBits(
        edge.subarray(2 * ldu, 2 * ldu + nh * Dv),
        tiled.subarray(2 * ldu, 2 * ldu + nh * Dv),
        `row 2 beside rows past P, R=${R}`,
      );
      // one float off: the tiled form's scalar staging, the same bits
      b.launchSetI32(pp, [0, 64, 127], s);
      const want = at(cp, qp, Ps);
      const cm = alloc(t * L * Pc * R * 4 + 16),
        qm = alloc(t * ldq * 4 + 16);
      b.memcpyAsync(ptrAdd(cm, 4), cp, t * L * Pc * R * 4, s);
      b.memcpyAsync(ptrAdd(qm, 4), qp, t * ldq * 4, s);
      sameBits(at(ptrAdd(cm, 4), qp, Ps), want, `mla_attention R=${R}, misaligned cache at P=${Ps}`);
      sameBits(at(cp, ptrAdd(qm, 4), Ps), want, `mla_attention R=${R}, misaligned q at P=${Ps}`);
      freeAll();
    }
    // A latent width the score lanes cannot fill (R % 16 != 0) is refused before any launch.
    for (const R of [4, 20, 100]) {
      const u = out(64 * 4),
        cp = out(8 * R * 4),
        pp = out(16),
        work = out(b.mlaWorkspaceBytes(1, 1, 8, R));
      assert.throws(
        () => b.launchMlaAttention(u, 64, cp, R, cp, 8 * R, pp, cp, work, 1, 1, 8, R, 8, s),
        { name: 'RangeError', message: new RegExp(`launchMlaAttention: R \\(${R}\\) must be a multiple of 16`) },
        `R = ${R}`,
      );
      freeAll();
    }
  });

  it('mla_attention in one kernel at t = 8 (past two 64-column blocks an SM, on a GPU of under 160 SMs: 128 columns a block): bit-identical to the tiled form, R = 512 and 128, a ragged Dv', () => {
    const t = 8,
      Pc = 200;
    for (const [R, nh, Dv] of [
      [512, 32, 128],
      [128, 20, 72],
    ] as Array<[number, number, number]>) {
      const Ps = b.mlaShortPositions(R),
        ldq = nh * R + 4,
        ldu = nh * Dv + 5;
      const cp = put(randF(t * Pc * R)),
        qp = put(randF(t * ldq, 2)),
        wp = genMatrix(nh * R, Dv, 39, 1 / Math.sqrt(R)),
        pp = out(t * 4);
      const at = (P: number): Float32Array => {
        const u = out(t * ldu * 4);
        const work = out(b.mlaWorkspaceBytes(t, nh, Pc, R));
        b.launchMlaAttention(u, ldu, qp, ldq, cp, Pc * R, pp, wp, work, t, nh, P, R, Dv, s);
        return down(Float32Array, u, t * ldu);
      };
      for (const pos of [
        [0, 1, 31, 32, 63, 64, 100, 127],
        [127, 96, 65, 33, 2, 50, 17, 126],
      ]) {
        b.launchSetI32(pp, pos, s);
        const short = at(Ps);
        for (let r = 0; r < t; r++)
          check(
            !short.subarray(r * ldu, r * ldu + nh * Dv).some(Number.isNaN),
            () => `one-kernel attention t=8 R=${R}: NaN in row ${r} at position ${pos[r]}`,
          );
        sameBits(short, at(Pc), `mla_attention t=8 R=${R} nh=${nh} Dv=${Dv} positions ${pos}: one kernel vs tiled`);
      }
      freeAll();
    }
  });

  it('expert_up / expert_down: within 1e-4 / 2e-6 of f64; an EP half bit-identical to the full launch, its unowned slots untouched', () => {
    const t = 2,
      K = 3,
      E = 6,
      H = 256,
      Fw = 384;
    const x = randF(t * H);
    const ids = Int32Array.from([0, 4, 2, 5, 3, 1]);
    const xp = put(x),
      ip = put(ids);
    const w1p = genMatrix(E * H, Fw, 40, 1 / 16),
      w3p = genMatrix(E * H, Fw, 41, 1 / 16),
      w2p = genMatrix(E * Fw, H, 42, 1 / Math.sqrt(Fw));
    const w1 = widenBf16(down(Uint16Array, w1p, E * H * Fw)),
      w3 = widenBf16(down(Uint16Array, w3p, E * H * Fw)),
      w2 = widenBf16(down(Uint16Array, w2p, E * Fw * H));
    const ap = out(t * K * Fw * 4),
      cp = out(t * K * H * 4);
    b.launchExpertUp(ap, xp, ip, w1p, w3p, 0, E, t, K, H, Fw, s);
    b.launchExpertDown(cp, ap, ip, w2p, 0, E, t, K, H, Fw, s);
    const act = down(Float32Array, ap, t * K * Fw),
      con = down(Float32Array, cp, t * K * H);
    const wa = new Worst(),
      wc = new Worst();
    for (let q = 0; q < t * K; q++) {
      const e = ids[q]!,
        r = Math.floor(q / K);
      for (let f = 0; f < Fw; f++) {
        let g = 0,
          u = 0;
        for (let k = 0; k < H; k++) {
          g += x[r * H + k]! * w1[e * H * Fw + k * Fw + f]!;
          u += x[r * H + k]! * w3[e * H * Fw + k * Fw + f]!;
        }
        const a = (g / (1 + Math.exp(-g))) * u,
          v = act[q * Fw + f]!;
        if (wa.worse(Math.abs(v - a) / (Math.abs(a) + 1e-3)))
          wa.where = `slot ${q} (expert ${e}) f ${f}: GPU ${v}, f64 ${a}`;
      }
      // down from the GPU's own act, so its error is down's alone
      for (let i = 0; i < H; i++) {
        let c = 0,
          mag = 0;
        for (let f = 0; f < Fw; f++) {
          const p = act[q * Fw + f]! * w2[e * Fw * H + f * H + i]!;
          c += p;
          mag += Math.abs(p);
        }
        if (wc.worse(Math.abs(con[q * H + i]! - c) / (mag || 1)))
          wc.where = `slot ${q} (expert ${e}) i ${i}: GPU ${con[q * H + i]}, f64 ${c}`;
      }
    }
    wa.within(1e-4, 'expert_up vs f64 (|err| / (|a| + 1e-3))');
    wc.within(2e-6, 'expert_down vs f64 on the GPU act (|err| / Σ|a·w|)');
    // EP rank 1 owns experts [3, 6) and is handed only its own matrices.
    const a1 = out(t * K * Fw * 4),
      c1 = out(t * K * H * 4);
    b.launchExpertUp(a1, xp, ip, ptrAdd(w1p, 3 * H * Fw * 2), ptrAdd(w3p, 3 * H * Fw * 2), 3, 3, t, K, H, Fw, s);
    b.launchExpertDown(c1, a1, ip, ptrAdd(w2p, 3 * Fw * H * 2), 3, 3, t, K, H, Fw, s);
    const ga = down(Float32Array, a1, t * K * Fw),
      gc = down(Float32Array, c1, t * K * H);
    for (let q = 0; q < t * K; q++) {
      const owned = ids[q]! >= 3,
        what = `EP half [3, 6): slot ${q} (expert ${ids[q]}${owned ? '' : ', not owned, must stay untouched'})`;
      sameBits(
        ga.subarray(q * Fw, (q + 1) * Fw),
        owned ? act.subarray(q * Fw, (q + 1) * Fw) : untouched(Fw),
        `expert_up ${what}`,
      );
      sameBits(
        gc.subarray(q * H, (q + 1) * H),
        owned ? con.subarray(q * H, (q + 1) * H) : untouched(H),
        `expert_down ${what}`,
      );
    }
  });

  it('expert_up / expert_down at bench shape (CW 8 tiles): down equals gemv on the same act bit for bit, up within 4 ulp of silu(gemv W1) * gemv W3; unowned slots untouched', () => {
    const H = 4096,
      Fw = 1536,
      nE = 4,
      t = 1,
      K = 8;
    const w1 = genMatrix(nE * H, Fw, 780, 1 / 64),
      w3 = genMatrix(nE * H, Fw, 781, 1 / 64),
      w2 = genMatrix(nE * Fw, H, 782, 1 / Math.sqrt(Fw));
    const ids = Int32Array.from([2, 0, 3, 1, 5, 6, 7, 1]);
    const ip = put(ids),
      xd = put(randF(H));
    const act = out(K * Fw * 4),
      con = out(K * H * 4);
    b.launchExpertUp(act, xd, ip, w1, w3, 0, nE, t, K, H, Fw, s);
    b.launchExpertDown(con, act, ip, w2, 0, nE, t, K, H, Fw, s);
    const ga = down(Float32Array, act, K * Fw),
      gc = down(Float32Array, con, K * H);
    const g = alloc(Fw * 4),
      u = alloc(Fw * 4),
      c1 = alloc(H * 4);
    const worst = new Worst();
    for (let q = 0; q < K; q++) {
      const e = ids[q]!;
      if (e >= nE) {
        sameBits(
          ga.subarray(q * Fw, (q + 1) * Fw),
          untouched(Fw),
          `expert_up bench shape: slot ${q} (expert ${e}, not owned) must stay untouched`,
        );
        sameBits(
          gc.subarray(q * H, (q + 1) * H),
          untouched(H),
          `expert_down bench shape: slot ${q} (expert ${e}, not owned) must stay untouched`,
        );
        continue;
      }
      poison(c1, H * 4);
      b.launchGemv(c1, H, ptrAdd(act, q * Fw * 4), Fw, ptrAdd(w2, e * Fw * H * 2), H, Fw, H, 1, false, 0, s);
      sameBits(
        gc.subarray(q * H, (q + 1) * H),
        down(Float32Array, c1, H),
        `expert_down bench shape: slot ${q} (expert ${e}) vs gemv (CW 2) on its act`,
      );
      poison(g, Fw * 4);
      poison(u, Fw * 4);
      // split 1: expert_up's own for H = 4096 rows (one block a tile)
      b.launchGemv(g, Fw, xd, H, ptrAdd(w1, e * H * Fw * 2), Fw, H, Fw, 1, false, 1, s);
      b.launchGemv(u, Fw, xd, H, ptrAdd(w3, e * H * Fw * 2), Fw, H, Fw, 1, false, 1, s);
      const gg = down(Float32Array, g, Fw),
        uu = down(Float32Array, u, Fw);
      for (let f = 0; f < Fw; f++) {
        // expf vs Math.exp in silu, then the product's rounding: a few ulp apart, never more than 4
        const want = fr(F.silu(gg[f]!) * uu[f]!),
          v = ga[q * Fw + f]!;
        if (worst.worse(ulps(want, v)))
          worst.where = `slot ${q} (expert ${e}) f ${f}: GPU ${v}, silu(gemv) * gemv ${want}`;
      }
    }
    worst.within(4, 'expert_up bench shape vs silu(gemv W1) * gemv W3, in ulps');
  });

  // The groups are found two ways (cu/model_experts.cu FindGroup): one warp's registers while the
  // slots are at most 64 and a rank's experts at most 32, shared-memory masks past either. E = 8
  // takes the first throughout; E = 40 with K = 9 the second for the full launch (40 experts, and
  // 72 slots at t = 8) and, at t <= 5, the first for its halves of 20, so each form is held to the other.
  it('expert_up / expert_down group slots by expert: t = 2, 3, 5, 8 with experts shared across rows and one named twice in a row, E = 8 and 40; every slot bit-identical to its row launched alone, and to the EP halves; unowned slots untouched', () => {
    for (const [E, K] of [
      [8, 4],
      [40, 9],
    ] as const)
      groupedExperts(E, K, [2, 3, 5, 8], 0);
  });

  // A group of five to eight slots is one pass of eight rows over each half of its tile (the
  // launches at t > 4 whose tiles have halves: cu/model_experts.cu kWholeGroups). E = 32 and K = 8
  // (bench's routing) at these widths give both products such tiles; experts 0-3 are named by
  // the first t, t - 1, t - 2 and t - 3 rows, so every size from 5 to 8 is a group at t = 8.
  it('expert_up / expert_down groups of five to eight slots (one pass of eight rows a half tile): t = 5, 6, 7, 8, E = 32, K = 8; every slot bit-identical to its row launched alone, and to the EP halves', () => {
    groupedExperts(32, 8, [5, 6, 7, 8], 4);
  });

  // shared: experts 0 .. shared - 1 named by the first t, t - 1, ... rows; 0: row 0 names one
  // expert twice instead (a group past two passes at t = 8 with E = 8).
  function groupedExperts(E: number, K: number, ts: readonly number[], shared: number): void {
    const H = 512,
      Fw = 384;
    const w1p = genMatrix(E * H, Fw, 43, 1 / 16),
      w3p = genMatrix(E * H, Fw, 44, 1 / 16),
      w2p = genMatrix(E * Fw, H, 45, 1 / Math.sqrt(Fw));
    const half = E / 2;
    for (const t of ts) {
      const ids = new Int32Array(t * K);
      for (let r = 0; r < t; r++) {
        const forced = Array.from({ length: shared }, (_, e) => e).filter((e) => r < t - e);
        const pool = Array.from({ length: E - shared }, (_, e) => e + shared);
        for (let k = 0; k < K; k++) {
          ids[r * K + k] = k < forced.length ? forced[k]! : pool.splice(Math.floor(rnd() * pool.length), 1)[0]!;
        }
      }
      if (shared === 0) ids[2] = ids[0]!; // row 0 names one expert twice
      const xp = put(randF(t * H)),
        ip = put(ids);
      const act = out(t * K * Fw * 4),
        con = out(t * K * H * 4);
      b.launchExpertUp(act, xp, ip, w1p, w3p, 0, E, t, K, H, Fw, s);
      b.launchExpertDown(con, act, ip, w2p, 0, E, t, K, H, Fw, s);
      const ga = down(Float32Array, act, t * K * Fw),
        gc = down(Float32Array, con, t * K * H);
      for (let r = 0; r < t; r++) {
        const a1 = out(K * Fw * 4),
          c1 = out(K * H * 4);
        b.launchExpertUp(a1, ptrAdd(xp, r * H * 4), ptrAdd(ip, r * K * 4), w1p, w3p, 0, E, 1, K, H, Fw, s);
        b.launchExpertDown(c1, a1, ptrAdd(ip, r * K * 4), w2p, 0, E, 1, K, H, Fw, s);
        sameBits(
          down(Float32Array, a1, K * Fw),
          ga.subarray(r * K * Fw, (r + 1) * K * Fw),
          `expert_up t=${t} row ${r} alone vs grouped (ids ${Array.from(ids.subarray(r * K, (r + 1) * K)).join(', ')})`,
        );
        sameBits(
          down(Float32Array, c1, K * H),
          gc.subarray(r * K * H, (r + 1) * K * H),
          `expert_down t=${t} row ${r} alone vs grouped`,
        );
      }
      for (const e0 of [0, half]) {
        const ah = out(t * K * Fw * 4),
          ch = out(t * K * H * 4);
        b.launchExpertUp(
          ah,
          xp,
          ip,
          ptrAdd(w1p, e0 * H * Fw * 2),
          ptrAdd(w3p, e0 * H * Fw * 2),
          e0,
          half,
          t,
          K,
          H,
          Fw,
          s,
        );
        b.launchExpertDown(ch, ah, ip, ptrAdd(w2p, e0 * Fw * H * 2), e0, half, t, K, H, Fw, s);
        const ha = down(Float32Array, ah, t * K * Fw),
          hc = down(Float32Array, ch, t * K * H);
        for (let q = 0; q < t * K; q++) {
          const owned = ids[q]! >= e0 && ids[q]! < e0 + half,
            what = `t=${t} EP half [${e0}, ${e0 + half}): slot ${q} (expert ${ids[q]}${owned ? '' : ', not owned, must stay untouched'})`;
          sameBits(
            ha.subarray(q * Fw, (q + 1) * Fw),
            owned ? ga.subarray(q * Fw, (q + 1) * Fw) : untouched(Fw),
            `expert_up ${what}`,
          );
          sameBits(
            hc.subarray(q * H, (q + 1) * H),
            owned ? gc.subarray(q * H, (q + 1) * H) : untouched(H),
            `expert_down ${what}`,
          );
        }
      }
    }
  }
});
