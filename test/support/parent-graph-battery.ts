/**
 * A small EP-shaped parent graph (seed 003) over fill/copy/axpy records, shared by the CPU unit
 * suite and the GPU suite: rank 0 sends four buffers, each half computes from them, rank 1's
 * result comes back and rank 0 adds the two. Inputs are fresh small integers (every sum exact),
 * the output is poisoned before each launch.
 */
import { strict as assert } from 'node:assert';
import type { DevicePtr } from '../../src/runtime/binding.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import type { ParentGraph, ParentGraphParts } from '../../src/runtime/parent-graph.js';
import { randomF32Ints } from './random.js';

export interface ParentGraphRig {
  /** Rank 0: tx sources [0..3], owner result [4], returned [5], post output [6]. */
  a0: DevicePtr[];
  /** Rank 1: tx destinations [0..3], peer result [4]. */
  b1: DevicePtr[];
  parts(over?: Partial<ParentGraphParts>): ParentGraphParts;
  free(): Promise<void>;
}

export async function parentGraphRig(rt: Runtime, n: number): Promise<ParentGraphRig> {
  const [a, b] = rt.pair('the parent graph rig');
  const a0 = await Promise.all(Array.from({ length: 7 }, () => a.alloc(n * 4)));
  const b1 = await Promise.all(Array.from({ length: 5 }, () => b.alloc(n * 4)));
  return {
    a0,
    b1,
    parts: (over = {}) => ({
      tx: [0, 1, 2, 3].map((i) => ({ src: a0[i]!, dst: b1[i]!, bytes: n * 4 })),
      // owner: a0[4] = a0[0] + a0[1]
      owner: () => {
        a.copy(a0[4]!, a0[0]!, n * 4);
        a.axpy(a0[4]!, a0[1]!, n, 1);
      },
      // peer: b1[4] = b1[0] + 2·b1[2] + b1[3] (three of the four copies)
      peer: () => {
        b.copy(b1[4]!, b1[0]!, n * 4);
        b.axpy(b1[4]!, b1[2]!, n, 2);
        b.axpy(b1[4]!, b1[3]!, n, 1);
      },
      rx: { src: b1[4]!, dst: a0[5]!, bytes: n * 4 },
      // post: a0[6] = owner's + returned
      post: () => {
        a.copy(a0[6]!, a0[4]!, n * 4);
        a.axpy(a0[6]!, a0[5]!, n, 1);
      },
      ...over,
    }),
    free: async () => {
      await rt.drain();
      for (const p of a0) await a.free(p);
      for (const p of b1) await b.free(p);
    },
  };
}

/** `rounds` launches, each on fresh inputs with a poisoned output, every element checked. */
export async function checkReplays(
  rt: Runtime,
  rig: ParentGraphRig,
  g: ParentGraph,
  n: number,
  rounds: number,
): Promise<void> {
  const a = rt.ranks[0];
  for (let round = 0; round < rounds; round++) {
    const x = [0, 1, 2, 3].map(() => randomF32Ints(n, 1000));
    for (let i = 0; i < 4; i++) await a.upload(rig.a0[i]!, x[i]!);
    await a.upload(rig.a0[6]!, new Float32Array(n).fill(NaN));
    g.launch();
    await rt.drain();
    assert.equal(rt.failure, undefined, String(rt.failure));
    const got = await a.downloadF32(rig.a0[6]!, n);
    for (let j = 0; j < n; j++) {
      const want = x[0]![j]! + x[1]![j]! + (x[0]![j]! + 2 * x[2]![j]! + x[3]![j]!);
      if (got[j] !== want) assert.fail(`round ${round} element ${j}: got ${got[j]}, want ${want}`);
    }
  }
}
