/**
 * `close()` with a step in flight. The ranks' streams are given a spin kernel first, so the step
 * is still queued behind device work when close() is called. close() must let the step run to
 * its end (it resolves, with the window's token) and only then free: it resolves after the step,
 * and what it freed was nothing a kernel still used (the token came back right, and the probe
 * after it finds every byte returned).
 */
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { RepCheck } from './fault-loop.js';
import { stepChecked, type Reference } from './reference.js';
import { openVariant, type Variant } from './variants.js';

export function closeInFlight(
  backend: BackendKind,
  preset: string,
  variant: Variant,
  ref: Reference,
  spinMicros: number,
): (rep: number) => Promise<RepCheck[]> {
  return async () => {
    const s = await openVariant(backend, preset, variant);
    try {
      const first = await stepChecked(s, ref);
      for (const k of s.runtime.ranks) k.spin(spinMicros);
      const p = first.p + 1;
      let stepDone = NaN;
      const step = s.step([ref.inputs[p]!]).then(
        (next) => {
          stepDone = performance.now();
          return next[0];
        },
        (e: Error) => e,
      );
      const asked = performance.now();
      await s.close();
      const closed = performance.now();
      const got = await step;
      return [
        { name: 'new session decodes', pass: first.ok, limit: "the window's token" },
        { name: 'in flight', pass: stepDone > asked, limit: 'the step was still running when close() was called' },
        { name: 'step finishes', pass: got === ref.outputs[p], limit: "it resolves with the window's token" },
        {
          name: 'close after the step',
          pass: closed >= stepDone,
          limit: 'close() resolves only once the step has',
          ms: closed - asked,
        },
      ];
    } finally {
      await s.close();
    }
  };
}
