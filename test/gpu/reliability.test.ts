/**
 * The soak's loops on the GPU at a few repetitions each, on `tiny` (the full counts are
 * `npm run soak`'s): a worker that dies mid-step, a one-sided barrier, `close()` with a step in
 * flight and random invalid input, then a short long decode and a few open/close cycles, one GPU
 * and loopback. Every check must hold except RSS and step-time drift, which a run this short
 * cannot judge. Fails (does not skip) without a GPU.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { presetByName } from '../../src/decode/model-config.js';
import { Deadline } from '../../bench/soak/budget.js';
import { cycles } from '../../bench/soak/cycles.js';
import { closeInFlight } from '../../bench/soak/fault-close-in-flight.js';
import { faultLoop, type RepCheck } from '../../bench/soak/fault-loop.js';
import { oneSided } from '../../bench/soak/fault-one-sided.js';
import { workerDeath } from '../../bench/soak/fault-worker-death.js';
import { invalidInputs } from '../../bench/soak/invalid-loop.js';
import { longDecode } from '../../bench/soak/long-decode.js';
import type { LoopResult } from '../../bench/soak/loop-result.js';
import { buildReference, type Reference } from '../../bench/soak/reference.js';
import { GPU_PLAN } from '../../bench/soak/run-soak.js';
import type { Variant } from '../../bench/soak/variants.js';
import { gpuSuite } from '../support/gpu-machine.js';
import { assertHeld, quietProgress as quiet } from '../support/soak-held.js';

gpuSuite();

const PRESET = 'tiny';
function held(l: LoopResult): void {
  assertHeld(l);
  console.log(`      ${l.loop}, ${l.variant}: ${l.checks.map((c) => `${c.name} ${c.value}`).join('; ')}`);
}

describe('reliability on the GPU (the soak, briefly)', function () {
  this.timeout(300_000);
  let ref: Reference;
  before(async () => {
    const built = await buildReference('cuda', PRESET, randomInt(0, presetByName(PRESET).vocab));
    assert.equal(built.agreement.wrong, 0, 'the reference window agrees with the oracle');
    ref = built.ref;
  });
  const fault = (loop: string, variant: Variant, rep: (i: number) => Promise<RepCheck[]>, after?: Variant) =>
    faultLoop(
      { backend: 'cuda', preset: PRESET, variant, reps: 4, machine: 'gpu', loop, ref, ...(after ? { after } : {}) },
      new Deadline(120),
      quiet(),
      rep,
    );
  const ONE: Variant = { loopback: false };
  const LL: Variant = { loopback: true, transport: 'll' };

  for (const v of [ONE, { loopback: true, transport: 'push' } as Variant])
    it(`a worker that dies mid-step (${v.transport ?? 'one GPU'}): the step rejects within 1 s naming the rank, every byte is freed`, async () => {
      held(await fault('fault: worker death', v, workerDeath('cuda', PRESET, v, ref, GPU_PLAN.busyMicros)));
    });

  for (const transport of ['ll', 'oneshot'] as const)
    it(`a one-sided ${transport} barrier: the step fails by name within the bound, then the session is usable or closes cleanly`, async () => {
      const v: Variant = { loopback: true, transport, spinTicks: GPU_PLAN.oneSidedTicks };
      held(await fault('fault: one-sided barrier', v, oneSided('cuda', PRESET, v, ref), LL));
    });

  for (const v of [ONE, LL])
    it(`close() with a step in flight (${v.transport ?? 'one GPU'}): the step finishes, then everything is freed`, async () => {
      held(await fault('fault: close in flight', v, closeInFlight('cuda', PRESET, v, ref, GPU_PLAN.busyMicros)));
    });

  it('300 random invalid inputs: each refused by name, the session unchanged and still decoding', async () => {
    held(
      await invalidInputs(
        { backend: 'cuda', preset: PRESET, variant: LL, cases: 300, machine: 'gpu' },
        ref,
        new Deadline(120),
        quiet(),
      ),
    );
  });

  for (const v of [ONE, { loopback: false, stepGraph: true }, LL, { ...LL, stepGraph: true }] as Variant[])
    it(`500 steps (${v.transport ?? 'one GPU'}${v.stepGraph ? ', step graph' : ''}): every token the window's, the oracle's every 100th, memory flat`, async () => {
      const { result } = await longDecode(
        { backend: 'cuda', preset: PRESET, variant: v, steps: 500, checkEvery: 100, machine: 'gpu' },
        ref,
        new Deadline(120),
        quiet(),
      );
      held(result);
    });

  for (const v of [ONE, LL])
    it(`10 open/close cycles (${v.transport ?? 'one GPU'}): device memory, descriptors and threads back where they started`, async () => {
      held(
        await cycles(
          { backend: 'cuda', preset: PRESET, variant: v, cycles: 10, machine: 'gpu' },
          ref,
          new Deadline(120),
          quiet(),
        ),
      );
    });
});
