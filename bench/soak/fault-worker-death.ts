/**
 * A worker dies mid-step. Each rank's stream is first given a spin kernel, so the step's records
 * are queued behind work the GPU is still doing; then the step is issued and one worker ends:
 * by an uncaught error on its thread (the `crash` hook) or by `Worker.terminate()` from the main
 * thread, alternately, on rank 0 and (in loopback) rank 1 in turn. The step must reject within
 * 1 s with an error naming that worker's rank, and the session and its runtime close.
 *
 * On the CPU reference the worker's thread is the device: it runs the step's records itself and
 * reads its control port only between batches of them, so a `crash` call arrives after the step
 * has finished. There the worker is ended by `terminate()` alone, which stops it mid-record.
 */
import type { Session } from '../../src/decode/session.js';
import type { ControlError } from '../../src/workers/worker-handle.js';
import type { RepCheck } from './fault-loop.js';
import { stepChecked, type Reference } from './reference.js';
import { openVariant, type Variant } from './variants.js';
import type { BackendKind } from '../../src/runtime/device-api.js';

/** How long a step's rejection may take once its worker is gone. */
export const DEATH_REPORTED_MS = 1000;

export function workerDeath(
  backend: BackendKind,
  preset: string,
  variant: Variant,
  ref: Reference,
  spinMicros: number,
): (rep: number) => Promise<RepCheck[]> {
  return async (rep) => {
    const s: Session = await openVariant(backend, preset, variant, { faultHooks: true });
    try {
      const checks: RepCheck[] = [];
      const first = await stepChecked(s, ref);
      checks.push({ name: 'new session decodes', pass: first.ok, limit: "the window's token" });
      const rt = s.runtime;
      const r = variant.loopback ? rep % 2 : 0;
      const kinds = backend === 'cuda' ? (['crash', 'terminate'] as const) : (['terminate'] as const);
      const how = kinds[(variant.loopback ? rep >> 1 : rep) % kinds.length];
      const victim = rt.ranks[r]!;
      for (const k of rt.ranks) k.spin(spinMicros);
      const step = s.step([ref.inputs[first.p + 1]!]).then(
        () => undefined,
        (e: Error) => e,
      );
      await new Promise((res) => setTimeout(res, 1));
      const t = performance.now();
      if (how === 'crash')
        void victim.control.call('crash', `injected: worker ${r} dies mid-step`).catch(() => undefined);
      else void victim.control.terminate();
      const err = await step;
      const ms = performance.now() - t;
      checks.push({
        name: 'step rejects',
        pass: err !== undefined,
        limit: 'the step in flight rejects',
        detail: 'it resolved: the worker died after the step',
      });
      checks.push({
        name: `rejects within ${DEATH_REPORTED_MS / 1000} s`,
        pass: err !== undefined && ms <= DEATH_REPORTED_MS,
        limit: `≤ ${DEATH_REPORTED_MS} ms after the death`,
        ms,
      });
      const named =
        err !== undefined &&
        (err as ControlError).rank === r &&
        err.message.startsWith(`worker ${r} (device ${victim.ordinal})`);
      checks.push({
        name: 'names the rank',
        pass: named,
        limit: "the dead worker's own error, with its rank",
        detail: err?.message,
      });
      await s.close();
      checks.push({
        name: 'session closed',
        pass: await s.step([0]).then(
          () => false,
          (e: Error) => /the session is closed/.test(e.message),
        ),
        limit: 'later calls say the session is closed',
      });
      return checks;
    } finally {
      await s.close();
    }
  };
}
