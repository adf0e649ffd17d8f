/**
 * Profiling's cost (the target: at most 3% of tokens/s, eagerly and from the step graph): the `ll`
 * walk with every join profiled against the same walk unprofiled, and two variants that say where
 * the cost is (host times only; timing events instead of self-timed joins).
 *
 * Variants run INTERLEAVED: 6 rounds, each running every variant for 8 steps in turn, and
 * a profiled sample is paired with the unprofiled sample of the same round and step (the same
 * positions, so the same attention lengths, minutes apart at most). The first version ran 48
 * unprofiled steps, then 48 profiled: whatever the machine did between the two blocks landed in
 * the figure, and the same code measured 0.1% to 2.6% eagerly from run to run
 * (decode-2xH200-2026-11-30-run6 to run9).
 */
import type { DeviceWalk } from '../src/decode/device-walk.js';
import { profileSwitches, type ProfileSwitches } from '../src/decode/join-profile.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../src/decode/decode-config.js';
import { row, type Row } from './results-file.js';
import { stepSplitRows, timeSteps, type StepCounts, type StepTimes } from './walk-run.js';
import { differenceRow } from './paired-difference.js';
import { count, type SuiteContext } from './suite-context.js';

/** Interleaved rounds, each of `steps` timed steps a variant after `warm` untimed ones (the first replays of a fresh capture, the first stamps). */
interface Rounds extends StepCounts {
  rounds: number;
}

type Knobs = Partial<ProfileSwitches>;

interface Variant {
  /** The rows' transport column for the overhead (and what the progress line says). */
  name: string;
  /** The transport column of the variant's step-time rows. */
  stepName: string;
  dc: DecodeConfig;
  knobs?: Knobs;
}

interface Group {
  /** The unprofiled walk every other variant of the group is paired with. */
  plain: Variant;
  profiled: Array<Variant & { method: string }>;
  /** Rows for each step's enqueue and wait (the step graph, where the host's part is small). */
  split: boolean;
}

/** Each variant's samples, rounds concatenated in order: index k is round k / steps, step k % steps. */
async function interleave(walk: DeviceWalk, variants: Variant[], label: string, n: Rounds): Promise<StepTimes[]> {
  const out = variants.map((): StepTimes => ({ host: [], enqueue: [], wait: [], extra: [] }));
  const off = variants[0]!.dc;
  for (let round = 0; round < n.rounds; round++) {
    for (const [i, v] of variants.entries()) {
      // Profiling off between variants: the profiler is made again with this variant's knobs.
      await walk.prepare(off);
      Object.assign(walk.profileSwitches, v.knobs ?? {});
      try {
        await walk.prepare(v.dc);
        const t = await timeSteps(walk, v.dc, `${label}: ${v.name}, round ${round + 1}/${n.rounds}`, n);
        const refused = walk.stepGraphStats().refused;
        if (refused.length > 0) throw new Error(`${v.name}: the step graph was refused: ${refused[0]!.reason}`);
        for (const k of ['host', 'enqueue', 'wait'] as const) out[i]![k].push(...t[k]);
      } finally {
        Object.assign(walk.profileSwitches, profileSwitches());
      }
    }
  }
  await walk.prepare(off);
  return out;
}

export async function benchProfileOverhead(
  walk: DeviceWalk,
  base: Pick<Row, 'suite' | 'op' | 'bytes' | 'preset' | 'unit' | 'metric'>,
  stepMethod: string,
  ctx: SuiteContext,
): Promise<Row[]> {
  const n: Rounds = {
    progress: ctx.progress,
    // On the CPU reference, 3 rounds of 2: the fewest paired samples a median's interval needs.
    rounds: count(ctx, 6, 3),
    steps: count(ctx, 8, 2),
    warm: count(ctx, 2, 1),
  };
  const eager: DecodeConfig = { ...DEFAULT_CONFIG, transport: { default: 'll', layers: [] } };
  const graph: DecodeConfig = { ...eager, stepGraph: true };
  const pairing = `paired with the unprofiled step of the same round and position (${n.rounds} interleaved rounds of ${n.steps} steps)`;
  const groups: Array<[string, Group]> = [
    [
      'eager',
      {
        plain: { name: 'll', stepName: 'll', dc: eager },
        profiled: [
          {
            name: 'll',
            stepName: 'll+profile',
            dc: { ...eager, profile: true },
            method: `profiled step time / unprofiled step time, minus 1, in percent; ${pairing}`,
          },
          {
            name: 'll (host times only)',
            stepName: 'll+profile (host times only)',
            dc: { ...eager, profile: true },
            knobs: { deviceEvents: false },
            method: `as above, the profile's device times left out (host enqueue times only)`,
          },
          {
            name: 'll (timing events)',
            stepName: 'll+profile (timing events)',
            dc: { ...eager, profile: true },
            knobs: { selfTimed: false },
            method: `as above, every join bracketed by a timing-event pair instead of timing itself`,
          },
        ],
        split: false,
      },
    ],
    [
      'step graph',
      {
        plain: { name: 'll+graph', stepName: 'll+graph', dc: graph },
        profiled: [
          {
            name: 'll+graph',
            stepName: 'll+graph+profile',
            dc: { ...graph, profile: true },
            method: `profiled step-graph step time / unprofiled step-graph step time, minus 1, in percent; ${pairing}`,
          },
          {
            name: 'll+graph (host times only)',
            stepName: 'll+graph+profile (host times only)',
            dc: { ...graph, profile: true },
            knobs: { deviceEvents: false },
            method: `as above, the profile's device times left out`,
          },
        ],
        split: true,
      },
    ],
  ];
  const rows: Row[] = [];
  for (const [label, g] of groups) {
    const [plain, ...profiled] = await interleave(walk, [g.plain, ...g.profiled], `profile overhead, ${label}`, n);
    if (g.split) rows.push(...stepSplitRows(base, g.plain.stepName, plain!));
    g.profiled.forEach((v, i) => {
      const t = profiled[i]!;
      rows.push(
        row(
          {
            ...base,
            transport: v.stepName,
            method: `${stepMethod}; ${v.name}, every join profiled (interleaved rounds)`,
          },
          t.host,
        ),
      );
      rows.push(
        differenceRow(
          { ...base, op: 'profile overhead', unit: '%', transport: v.name, method: v.method },
          t.host.map((ms, k) => (ms / plain!.host[k]! - 1) * 100),
        ),
      );
      if (g.split) rows.push(...stepSplitRows(base, v.stepName, t));
    });
  }
  return rows;
}
