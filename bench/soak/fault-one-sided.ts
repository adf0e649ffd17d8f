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
 * The skip is a test hook, armed inside the join it targets: the join's method on WalkJoins
 * (`headAllGather` of layer l, or `woAllReduce` of the last layer) is shadowed for the faulted
 * step, and while the real one issues that join, the rank's `ll` (or `oneShot`) method, which
 * writes the join's ring record, is shadowed for its one call there, writing nothing. Nothing in
 * the runtime changes; the other rank's kernel is launched as usual.
 *
 * It used to be aimed by counting: the rank's (l · HOPS.length + 1)-th `ll` launch of the step,
 * HOPS being every walk's seven hops. The seed walk issues five a layer (SEED_HOPS), so on
 * `small` (4 layers, 20 launches a rank a step) layer 3's index, 22, was past the step's last
 * launch: nothing was left out, the step resolved, and the repetitions aimed there (6, 7, 14
 * and 15 of 20) were not armed. Layers 1 and 2 hit layer 1's ep fan-out and layer 3's fan-out
 * instead of a head all-gather. On `tiny` (2 layers, 10 launches) both indices, 1 and 8, fall
 * inside the step, which is why the CPU run never missed.
 */
import { BarrierRefusal } from '../../src/decode/barrier-watch.js';
import { SEED_HOPS } from '../../src/profile/profile-data.js';
import { presetByName } from '../../src/decode/model-config.js';
import { Rank } from '../../src/runtime/rank.js';
import { TICKS_PER_MS } from '../../src/runtime/cpu-world.js';
import { WalkJoins } from '../../src/decode/walk-joins.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { RepCheck } from './fault-loop.js';
import { HIDDEN_REL_L2, askOracle, type Reference } from './reference.js';
import { openVariant, type Variant } from './variants.js';

type Launch = 'll' | 'oneShot';
/** The joins a one-sided fault targets: the seed walk's head all-gather (ll), its wo all-reduce (oneshot). */
type Join = 'headAllGather' | 'woAllReduce';
type JoinMethod = (this: WalkJoins, l: number, ...rest: unknown[]) => void;

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

/**
 * Leave out `rank`'s launch (`method`) in the first `join` of layer `layer` issued from now: the
 * join is shadowed on WalkJoins' prototype (one session steps at a time in the soak) and the
 * rank's method inside it. Returns "undo, and was that launch left out?".
 */
export function skipInJoin(rank: Rank, method: Launch, join: Join, layer: number): () => boolean {
  const proto = WalkJoins.prototype as unknown as Record<Join, JoinMethod>;
  const real = proto[join];
  let reached = false,
    skipped = false;
  proto[join] = function (this: WalkJoins, l: number, ...rest: unknown[]): void {
    if (l !== layer || reached) {
      real.call(this, l, ...rest);
      return;
    }
    reached = true;
    const undo = skipOnce(rank, method, 0);
    try {
      real.call(this, l, ...rest);
    } finally {
      skipped = undo();
    }
  };
  return () => {
    proto[join] = real;
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
  // A step's device-barrier joins: every hop of every layer of the seed walk for ll; the wo all-reduce alone for oneshot.
  const joins = ll ? L * SEED_HOPS.length : L;
  const boundMs = variant.spinTicks! / TICKS_PER_MS;
  const limitMs = joins * boundMs + 1000;
  return async (rep) => {
    const s = await openVariant(backend, preset, variant);
    let undo: (() => boolean) | undefined;
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
      undo = skipInJoin(s.runtime.ranks[r]!, ll ? 'll' : 'oneShot', ll ? 'headAllGather' : 'woAllReduce', l);
      const t = performance.now();
      const err = await s.step([ref.inputs[0]!]).then(
        () => undefined,
        (e: Error) => e,
      );
      const ms = performance.now() - t;
      checks.push({
        name: 'skipped',
        pass: undo(),
        limit: `one rank's launch of ${ll ? "a layer's head all-gather" : "the last layer's wo all-reduce"} left out`,
        detail: `rank ${r}, layer ${l}`,
      });
      checks.push({
        name: 'fails by name',
        pass:
          err instanceof BarrierRefusal &&
          err.ranks.length > 0 &&
          /device barrier refused on rank \d/.test(err.message),
        limit: 'ERR_BARRIER_REFUSED naming the rank(s) and the word',
        detail: err?.message ?? 'the step resolved',
      });
      const counts = new RegExp(`rank ${r} issued (\\d+) and rank ${1 - r} (\\d+)`).exec(err?.message ?? '');
      checks.push({
        name: 'says whose half is missing',
        pass: counts !== null && Number(counts[2]) === Number(counts[1]) + 1,
        limit: "the refusal counts each rank's joins that wait on the device, the skipping rank's one fewer",
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
      undo?.();
      await s.close();
    }
  };
}
