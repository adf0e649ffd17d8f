/**
 * The transport battery, shared by the CPU unit suite and the GPU suite, in the manner of
 * nccl-tests: fresh small-integer inputs (every sum exact), outputs poisoned first, buffer
 * offsets shifted every op (so 16-byte alignment comes and goes), ops enqueued back to back, and
 * every result of every op checked. Out-of-place ops overwrite their input right after the join
 * is enqueued: the result must not change.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { type DevicePtr, ptrAdd } from '../../src/runtime/binding.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import type { Transport } from '../../src/runtime/transports/transport.js';
import { randomF32Ints } from './random.js';

export type CollectiveOp = 'broadcast' | 'allGather' | 'gather' | 'allReduce';
export const COLLECTIVE_OPS: CollectiveOp[] = ['broadcast', 'allGather', 'gather', 'allReduce'];

export interface BatteryCase {
  /** The op, or one per op enqueued (a mixed sequence: `ops` long). */
  op: CollectiveOp | CollectiveOp[];
  /** f32 elements per rank part (span for gathers). */
  n: number;
  /** Tokens for the gathers: > 1 is the strided gather. */
  rows: number;
  inPlace: boolean;
  /** Ops enqueued back to back before one read-back. */
  ops: number;
}

const POISON = 0xffc00bad; // a NaN no arithmetic here produces
const OVERWRITE = -7777;

interface Layout {
  partFloats: number;
  fullFloats: number;
  stride: number;
}

const gathers = (op: CollectiveOp): boolean => op === 'allGather' || op === 'gather';
const opAt = (c: BatteryCase, k: number): CollectiveOp => (Array.isArray(c.op) ? c.op[k]! : c.op);

function layoutOf(c: BatteryCase): Layout {
  // A mixed sequence takes the gathers' room for every op (rows apply to the gathers alone).
  const roomy = Array.isArray(c.op) || gathers(c.op);
  const part = roomy ? c.n * c.rows : c.n;
  const full = roomy ? 2 * c.n * c.rows : c.n;
  // +5 floats of room: each op's slot starts (k mod 5) floats in, so alignment varies.
  return { partFloats: part, fullFloats: full, stride: full + 5 };
}

export interface BatteryResult {
  ops: number;
  outputs: Uint8Array[];
}

/**
 * Run one case: returns how many ops were checked and the raw output bytes of both ranks (for
 * byte-for-byte comparison with another backend).
 */
export async function runCase(
  rt: Runtime,
  t: Transport,
  c: BatteryCase,
  inputs?: Float32Array[][],
): Promise<BatteryResult> {
  if (Array.isArray(c.op) && c.op.length !== c.ops)
    throw new RangeError(`runCase: ${c.op.length} ops listed for a case of ${c.ops}`);
  const [a, b] = rt.pair('the transport battery');
  const ranks = [a, b];
  const L = layoutOf(c);
  const bytes = c.ops * L.stride * 4;
  const inBuf = [await a.alloc(bytes), await b.alloc(bytes)];
  const outBuf = [await a.alloc(bytes), await b.alloc(bytes)];
  try {
    const shift = (k: number): number => k * L.stride + (k % 5);
    // Per op k and rank r: the part that rank contributes (fresh draws).
    const parts: Float32Array[][] =
      inputs ??
      Array.from({ length: c.ops }, () => [randomF32Ints(L.partFloats, 1000), randomF32Ints(L.partFloats, 1000)]);
    const hostIn = [new Float32Array(c.ops * L.stride), new Float32Array(c.ops * L.stride)];
    const hostOut = [new Float32Array(c.ops * L.stride), new Float32Array(c.ops * L.stride)];
    new Uint32Array(hostOut[0]!.buffer).fill(POISON);
    new Uint32Array(hostOut[1]!.buffer).fill(POISON);
    for (let k = 0; k < c.ops; k++) {
      for (const r of [0, 1]) {
        const p = parts[k]![r]!;
        hostIn[r]!.set(p, shift(k));
        if (c.inPlace) placeInPlace(c, opAt(c, k), k, r, p, hostOut[r]!, shift(k));
      }
    }
    for (const r of [0, 1]) {
      await ranks[r]!.upload(inBuf[r]!, hostIn[r]!);
      await ranks[r]!.upload(outBuf[r]!, hostOut[r]!);
    }
    const at = (buf: DevicePtr[], r: number, k: number, floats = 0): DevicePtr =>
      ptrAdd(buf[r]!, (shift(k) + floats) * 4);
    for (let k = 0; k < c.ops; k++) {
      const src = c.inPlace ? outBuf : inBuf;
      const from = k % 2;
      switch (opAt(c, k)) {
        case 'broadcast':
          t.broadcast(
            from,
            c.inPlace ? at(outBuf, from, k) : at(inBuf, from, k),
            [at(outBuf, 0, k), at(outBuf, 1, k)],
            c.n,
          );
          break;
        case 'allGather':
          t.allGather(
            c.inPlace ? [at(outBuf, 0, k, 0), at(outBuf, 1, k, c.n)] : [at(src, 0, k), at(src, 1, k)],
            [at(outBuf, 0, k), at(outBuf, 1, k)],
            c.n,
            c.rows,
          );
          break;
        case 'gather':
          t.gather(
            from,
            c.inPlace ? [at(outBuf, 0, k, 0), at(outBuf, 1, k, c.n)] : [at(src, 0, k), at(src, 1, k)],
            at(outBuf, from, k),
            c.n,
            c.rows,
          );
          break;
        case 'allReduce':
          if (c.inPlace) t.allReduce([at(outBuf, 0, k), at(outBuf, 1, k)], c.n);
          else t.allReduce([at(inBuf, 0, k), at(inBuf, 1, k)], c.n, [at(outBuf, 0, k), at(outBuf, 1, k)]);
          break;
      }
      if (!c.inPlace) for (const r of [0, 1]) ranks[r]!.fill(at(inBuf, r, k), L.partFloats, OVERWRITE);
    }
    await rt.drain();
    if (rt.failure) throw rt.failure;
    const outputs = await Promise.all([a.download(outBuf[0]!, bytes), b.download(outBuf[1]!, bytes)]);
    const got = outputs.map((o) => new Float32Array(o.buffer, o.byteOffset, c.ops * L.stride));
    for (let k = 0; k < c.ops; k++) check(c, opAt(c, k), k, parts[k]!, got, shift(k));
    return { ops: c.ops, outputs };
  } finally {
    for (const r of [0, 1]) {
      await ranks[r]!.free(inBuf[r]!);
      await ranks[r]!.free(outBuf[r]!);
    }
  }
}

/** For in-place cases the inputs start inside the output buffers, where the op expects them. */
function placeInPlace(
  c: BatteryCase,
  op: CollectiveOp,
  k: number,
  r: number,
  p: Float32Array,
  out: Float32Array,
  base: number,
): void {
  switch (op) {
    case 'broadcast':
      if (r === k % 2) out.set(p, base);
      break;
    case 'allGather':
    case 'gather':
      out.set(p, base + r * c.n);
      break;
    case 'allReduce':
      out.set(p, base);
      break;
  }
}

function check(
  c: BatteryCase,
  op: CollectiveOp,
  k: number,
  parts: Float32Array[],
  got: Float32Array[],
  base: number,
): void {
  const where = (r: number, i: number): string =>
    `${op}${Array.isArray(c.op) ? ' (mixed)' : ''} n=${c.n} rows=${c.rows} ${c.inPlace ? 'in place' : 'out of place'} op ${k} rank ${r} element ${i}`;
  const from = k % 2;
  if (op === 'broadcast') {
    for (const r of [0, 1])
      for (let i = 0; i < c.n; i++) {
        if (got[r]![base + i] !== parts[from]![i])
          assert.fail(`${where(r, i)}: got ${got[r]![base + i]}, want ${parts[from]![i]}`);
      }
  } else if (op === 'allReduce') {
    const g0 = got[0]!,
      g1 = got[1]!;
    for (let i = 0; i < c.n; i++) {
      const want = parts[0]![i]! + parts[1]![i]!;
      if (g0[base + i] !== want) assert.fail(`${where(0, i)}: got ${g0[base + i]}, want ${want}`);
      if (!Object.is(g0[base + i], g1[base + i]))
        assert.fail(`${where(1, i)}: the ranks disagree (${g0[base + i]} vs ${g1[base + i]})`);
    }
  } else {
    const targets = op === 'allGather' ? [0, 1] : [from];
    for (const r of targets) {
      for (let t = 0; t < c.rows; t++)
        for (const q of [0, 1])
          for (let i = 0; i < c.n; i++) {
            const at = base + t * 2 * c.n + q * c.n + i;
            const want = parts[q]![t * c.n + i]!;
            if (got[r]![at] !== want)
              assert.fail(`${where(r, at - base)} (row ${t}, part ${q}): got ${got[r]![at]}, want ${want}`);
          }
    }
  }
}

/** The sizes the issue asks for, in f32 elements: 4 B to 4 MB, odd ones included. */
export const SWEEP_FLOATS = [1, 2, 3, 7, 64, 255, 1000, 1024, 2049, 4099, 16_384, 65_537, 262_144, 1_048_576];

/**
 * Every op over `sizes` (SWEEP_FLOATS), strided gathers at 3 rows, in place and out of place;
 * each case enqueues up to `maxOps` ops (fewer for big sizes, so a case stays near
 * `budgetFloats`). Returns how many ops were checked.
 */
export async function sweep(
  rt: Runtime,
  t: Transport,
  budgetFloats: number,
  maxOps: number,
  sizes: readonly number[] = SWEEP_FLOATS,
): Promise<number> {
  let ops = 0;
  for (const op of COLLECTIVE_OPS) {
    for (const n of sizes) {
      for (const rows of op === 'allGather' || op === 'gather' ? [1, 3] : [1]) {
        for (const inPlace of rows === 1 ? [false, true] : [false]) {
          const count = Math.max(1, Math.min(maxOps, Math.floor(budgetFloats / (n * rows))));
          ops += (await runCase(rt, t, { op, n, rows, inPlace, ops: count })).ops;
        }
      }
    }
  }
  return ops;
}

/**
 * 10,000 small ops back to back (2,500 of each op), then 2,000 in a random mix of ops and roots
 * (one-way joins each way between two-way ones: the mix the LL protocol's slot reuse must
 * survive, cu/tp_ll_chunks.cuh), every result checked.
 */
const MIXED_OPS = 2000;

export async function backToBack(rt: Runtime, t: Transport): Promise<number> {
  let ops = 0;
  for (const op of COLLECTIVE_OPS) {
    ops += (await runCase(rt, t, { op, n: 37, rows: op === 'allGather' ? 2 : 1, inPlace: false, ops: 2500 })).ops;
  }
  const mix = Array.from({ length: MIXED_OPS }, () => COLLECTIVE_OPS[randomInt(0, COLLECTIVE_OPS.length)]!);
  return ops + (await runCase(rt, t, { op: mix, n: 37, rows: 1, inPlace: false, ops: MIXED_OPS })).ops;
}
