/**
 * The soak's one-sided barrier fault on the CPU reference, aimed at every layer from both ranks:
 * every repetition armed (the launch it names left out, and no other), and every check held.
 * Each rank's launches are recorded with the join that issued them, so the faulted step shows
 * which one the fault left out: the head all-gather of the repetition's layer (`ll`), or the
 * last layer's wo all-reduce (`oneshot`). Aimed by counting launches, layer 1's repetitions of
 * `tiny` left out its ep fan-out, and on `small` layer 3's left nothing out.
 */
import { strict as assert } from 'node:assert';
import { oneSided } from '../../bench/soak/fault-one-sided.js';
import type { RepCheck } from '../../bench/soak/fault-loop.js';
import { buildReference, type Reference } from '../../bench/soak/reference.js';
import { CPU_PLAN } from '../../bench/soak/run-soak.js';
import type { Variant } from '../../bench/soak/variants.js';
import { presetByName } from '../../src/decode/model-config.js';
import { Session } from '../../src/decode/session.js';
import { WalkJoins } from '../../src/decode/walk-joins.js';
import { Rank } from '../../src/runtime/rank.js';

const PRESET = 'tiny';
const HOP_OF: Record<string, string> = {
  fanOut: 'fan-out',
  headAllGather: 'head all-gather',
  woGather: 'wo',
  woAllGather: 'wo all-gather',
  woAllReduce: 'wo',
  epFanOut: 'ep fan-out',
  epExchange: 'ep exchange',
  epReturn: 'ep return',
};

interface Launch {
  step: number;
  rank: number;
  join: string;
}

describe("the soak's one-sided barrier fault (CPU reference)", function () {
  this.timeout(120_000);
  let ref: Reference;
  const launches: Launch[] = [];
  let step = 0;
  let join = '';
  const restore: Array<() => void> = [];

  /** Replace `obj[key]` with `wrap(original)` until after(). */
  const spy = (obj: object, key: string, wrap: (real: (...a: unknown[]) => unknown) => unknown): void => {
    const o = obj as Record<string, unknown>;
    const real = o[key] as (...a: unknown[]) => unknown;
    o[key] = wrap(real);
    restore.push(() => {
      o[key] = real;
    });
  };

  before(async () => {
    ref = (await buildReference('cpu', PRESET, 11)).ref;
    for (const m of ['step', 'stepDetailed'])
      spy(
        Session.prototype,
        m,
        (real) =>
          function (this: Session, ...a: unknown[]) {
            step++;
            return real.apply(this, a);
          },
      );
    for (const [m, hop] of Object.entries(HOP_OF))
      spy(
        WalkJoins.prototype,
        m,
        (real) =>
          function (this: WalkJoins, l: number, ...a: unknown[]) {
            join = `${hop}, layer ${l}`;
            try {
              return real.call(this, l, ...a);
            } finally {
              join = '';
            }
          },
      );
    for (const m of ['ll', 'oneShot'])
      spy(
        Rank.prototype,
        m,
        (real) =>
          function (this: Rank, ...a: unknown[]) {
            launches.push({ step, rank: this.rank, join });
            return real.apply(this, a);
          },
      );
  });
  after(() => {
    for (const r of restore.reverse()) r();
  });

  /** Run repetition `rep`; the joins rank 0 and rank 1 launched in its faulted step (its second). */
  async function faulted(
    rep: (i: number) => Promise<RepCheck[]>,
    i: number,
  ): Promise<{ checks: RepCheck[]; joins: [string[], string[]] }> {
    const from = step;
    const checks = await rep(i);
    const of = (rank: number) => launches.filter((x) => x.step === from + 2 && x.rank === rank).map((x) => x.join);
    return { checks, joins: [of(0), of(1)] };
  }

  const left = (full: string[], part: string[]): string[] => {
    const rest = [...part];
    return full.filter((j) => {
      const k = rest.indexOf(j);
      if (k < 0) return true;
      rest.splice(k, 1);
      return false;
    });
  };

  const cases: Array<{ transport: 'll' | 'oneshot'; reps: number; target: (rep: number) => string }> = [
    {
      transport: 'll',
      // Every layer, each from both ranks.
      reps: 2 * presetByName(PRESET).layers,
      target: (rep) => `head all-gather, layer ${Math.floor(rep / 2)}`,
    },
    { transport: 'oneshot', reps: 2, target: () => `wo, layer ${presetByName(PRESET).layers - 1}` },
  ];
  for (const { transport, reps, target } of cases)
    it(`${transport}: every repetition leaves out the launch it aims at, and nothing else`, async () => {
      const v: Variant = { loopback: true, transport, spinTicks: CPU_PLAN.oneSidedTicks };
      const rep = oneSided('cpu', PRESET, v, ref);
      for (let i = 0; i < reps; i++) {
        const { checks, joins } = await faulted(rep, i);
        const r = i % 2;
        const [own, other] = r === 0 ? joins : [joins[1], joins[0]];
        assert.deepEqual(
          checks.filter((c) => !c.pass).map((c) => `${c.name}: ${c.detail ?? c.limit}`),
          [],
          `repetition ${i}`,
        );
        assert.ok(
          checks.some((c) => c.name === 'skipped' && c.pass),
          `repetition ${i} armed`,
        );
        assert.ok(other.length > 0, `repetition ${i}: rank ${1 - r} launched its joins`);
        assert.deepEqual(left(other, own), [target(i)], `repetition ${i}: what rank ${r} left out`);
        assert.deepEqual(left(own, other), [], `repetition ${i}: rank ${r} launched nothing extra`);
        // The refusal counts the step's joins that wait on the device, as each rank issued them.
        const said = checks.find((c) => c.name === 'says whose half is missing')?.detail ?? '';
        assert.ok(
          said.includes(`rank ${r} issued ${own.length} and rank ${1 - r} ${other.length}`),
          `repetition ${i}: ${said}`,
        );
      }
    });
});
