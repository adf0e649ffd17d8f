/**
 * What a one-worker runtime must do as a rank of two does: kernels through its ring, checked
 * against the host at each size (odd ones included), a copy into its mailbox read without a
 * control call, and the completion counter its device writes. Shared by the CPU and GPU suites.
 */
import { strict as assert } from 'node:assert';
import type { Runtime } from '../../src/runtime/runtime.js';
import { ModelOps } from '../../src/decode/model-ops.js';
import { randomF32Ints } from './random.js';

export async function checkOneWorker(rt: Runtime, sizes: readonly number[]): Promise<void> {
  assert.equal(rt.ranks.length, 1);
  assert.equal(rt.peer, undefined, 'one rank: nothing to probe');
  assert.equal(rt.placement.length, 1);
  const a = rt.ranks[0];
  for (const n of sizes) {
    const x = await a.alloc(n * 4);
    const y = await a.alloc(n * 4);
    const hx = randomF32Ints(n, 1000);
    const hy = randomF32Ints(n, 1000);
    await a.upload(x, hx);
    await a.upload(y, hy);
    const k = 1 + Math.floor(Math.random() * 7);
    a.axpy(y, x, n, k);
    const boxed = Math.min(n, 64);
    new ModelOps(a).toMailbox(y, 0, boxed * 4);
    const v = (rt.counter(0, 9) + 1) >>> 0;
    a.signal(9, v);
    await rt.waitCompleted(0, 9, v);
    const box = new Float32Array(rt.mailboxes[0]!.buffer, rt.mailboxes[0]!.byteOffset, boxed);
    for (let i = 0; i < boxed; i++) assert.equal(box[i], hy[i]! + k * hx[i]!, `n ${n}: mailbox element ${i}`);
    const got = await a.downloadF32(y, n);
    for (let i = 0; i < n; i++) assert.equal(got[i], hy[i]! + k * hx[i]!, `n ${n} element ${i}`);
    await a.free(x);
    await a.free(y);
  }
  assert.equal(rt.failure, undefined);
}
