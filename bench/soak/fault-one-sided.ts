/**
 * A one-sided barrier: one rank's `ll` or `oneshot` kernel of a step is never launched, so the
 * other rank's half waits for a partner that never comes. It must refuse within its spin bound
 * (the word 40043 or 40044, no hang), the step must fail by name (barrier-watch.ts), and then,
 * as documented, the session is usable (it drained both ranks and reset the barrier: a retried
 * step gives the token the same step gave before the fault) or closes cleanly; repetitions
 * alternate the two and the rank that skips; an `ll` skip moves through the layers.
 *
 * A one-shot is skipped in the last layer only. Skipped earlier, the ranks' remaining one-shots
 * pair up one layer apart: the later pairs meet at their barriers, but each stages its operand
 * while the other rank may still be reading the one staged before, a race the CPU reference's
 * ordering check reports as a refused record (and closes the session). An LL join that refuses
 * does not advance its epoch, so the ranks stay paired after it.
 *
 * The skip is a test hook on the rank's handle: its `ll` (or `oneShot`) method, which writes the
 * join's ring record, is shadowed for one call that writes nothing. Nothing in the runtime
 * changes; the other rank's kernel is launched as usual.
 */
import { BarrierRefusal } from '../../src/decode/barrier-watch.js';
import { HOPS } from '../../src/decode/join-profile.js';
import { presetByName } from '../../src/decode/model-config.js';
import { Rank } from '../../src/runtime/rank.js';
import { TICKS_PER_MS } from '../../src/runtime/cpu-world.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { RepCheck } from './fault-loop.js';
import { HIDDEN_REL_L2, askOracle, type Reference } from './reference.js';
import { openVariant, type Variant } from './variants.js';

type Launch = 'll' | 'oneShot';

/** Shadow `rank[method]` so that its `index`-th call from now writes no record; returns "undo, and did it skip?". */
export function skipOnce(rank: Rank, method: Launch, index: number): () => boolean {
  const own = rank as unknown as Record<string, unknown>;
  const real = Rank.prototype[method] as (...a: unknown[]) => number;
  let calls = 0,
    skipped = false;
  own[method] = function (this: Rank, ...args: unknown[]): number {
    if (calls++ !== index) return real.apply(this, args);
    skipped = true;
    delete own[method];
    return -1;
  };
  return () => {
    delete own[method];
    return skipped;
  };
}

export function oneSided(
  backend: BackendKind,
  preset: string,
  variant: Variant,
  ref: Reference,
): (rep: number) => Promise<RepCheck[]> {
  const L = presetByName(preset).layers;
  const ll = variant.transport === 'll';
  // A step's device-barrier joins: every hop of every layer for ll; the wo all-reduce alone for oneshot.
  const joins = ll ? L * HOPS.length : L;
  const boundMs = variant.spinTicks! / TICKS_PER_MS;
  const limitMs = joins * boundMs + 1000;
  return async (rep) => {
    const s = await openVariant(backend, preset, variant);
    try {
      const checks: RepCheck[] = [];
      const first = await s.stepDetailed([ref.inputs[0]!], { hidden: true });
      const v = askOracle(ref, 0, first.next[0]!, first.hidden!);
      checks.push({
        name: 'new session decodes',
        pass: v.token !== 'wrong' && v.relL2 <= HIDDEN_REL_L2,
        limit: "the oracle's token, hidden state within its bound",
      });
      const want = first.next[0]!;
      s.reset();
      const r = rep % 2;
      const l = ll ? Math.floor(rep / 2) % L : L - 1;
      // The layer's head all-gather (both ranks send and wait), or its wo all-reduce.
      const undo = skipOnce(
        s.runtime.ranks[r]!,
        ll ? 'll' : 'oneShot',
        ll ? l * HOPS.length + HOPS.indexOf('head all-gather') : l,
      );
      const t = performance.now();
      const err = await s.step([ref.inputs[0]!]).then(
        () => undefined,
        (e: Error) => e,
      );
      const ms = performance.now() - t;
      checks.push({ name: 'skipped', pass: undo(), limit: `rank ${r}'s launch was left out` });
      checks.push({
        name: 'fails by name',
        pass:
          err instanceof BarrierRefusal &&
          err.ranks.length > 0 &&
          /device barrier refused on rank \d/.test(err.message),
        limit: 'ERR_BARRIER_REFUSED naming the rank(s) and the word',
        detail: err?.message ?? 'the step resolved',
      });
      checks.push({ name: 'within the spin bound', pass: ms <= limitMs, limit: `≤ ${limitMs.toFixed(0)} ms`, ms });
      if (rep % 2 === 0) {
        const again = await s.step([ref.inputs[0]!]).catch((e: Error) => e);
        checks.push({
          name: 'usable after the reset',
          pass: Array.isArray(again) && again[0] === want,
          limit: 'the retried step gives the token it gave before the fault',
          detail: again instanceof Error ? again.message : `token ${again[0]}, before the fault ${want}`,
        });
      } else {
        checks.push({
          name: 'closes cleanly',
          pass: await s.close().then(
            () => true,
            () => false,
          ),
          limit: 'close() resolves',
        });
      }
      return checks;
    } finally {
      await s.close();
    }
  };
}
