/** The CPU reference refuses the attention shapes the GPU's kernels refuse, in the same words. */
import { strict as assert } from 'node:assert';
import { mlaAttention } from '../../src/runtime/cpu-model-kernels.js';
import type { KernelMemory } from '../../src/runtime/cpu-model-kernels.js';

describe('cpu reference: launchMlaAttention contract', () => {
  // Refused before any memory is touched, so a memory that throws on every read stands in.
  const untouched = new Proxy({} as KernelMemory, {
    get: () => {
      throw new Error('memory read before the shape was checked');
    },
  });

  it('refuses a latent width that is not a multiple of 16 (the GPU score lanes sum R / 16 float4s)', () => {
    for (const R of [4, 8, 20, 100, 1000]) {
      assert.throws(() => mlaAttention(untouched, 0, 64, 0, R, 0, 8 * R, 0, 0, 1, 1, 8, R, 8), {
        name: 'RangeError',
        message: new RegExp(`^launchMlaAttention: R \\(${R}\\) must be a multiple of 16`),
      });
    }
  });

  it('takes a multiple of 16 past the shape check (the memory is then read)', () => {
    for (const R of [16, 32, 512])
      assert.throws(() => mlaAttention(untouched, 0, 64, 0, R, 0, 8 * R, 0, 0, 1, 1, 8, R, 8), /memory read before/);
  });
});
