/**
 * `npm run soak`: memra's reliability, measured (run-soak.ts has the loops).
 *
 *   [--backend cuda|cpu] [--model PRESET] [--steps N] [--loopback-steps N] [--cycles N]
 *   [--loopback-cycles N] [--faults N] [--invalid N] [--check-every N] [--time-limit S]
 *   [--only decode,cycles,faults] [--out DIR] [--smaps]
 *
 * Defaults on a GPU are the full counts (run-soak.ts, GPU_PLAN), expected to take about 330 s on
 * an H200, within the default `--time-limit` of 400 s; `--steps` sets the one-GPU rows and,
 * unless `--loopback-steps` says otherwise, a tenth of it the loopback rows (`--cycles` likewise,
 * a fifth). `--time-limit` bounds the whole run: each loop gets a share of what is left when it
 * starts, in proportion to what it is expected to take, and one cut short records the count it
 * ran. Progress goes to stderr. `npm run soak` starts Node as RSS is measured (rss.ts: a
 * collection before each figure, the young generation and malloc's mmap threshold fixed); run
 * any other way, it says what is missing and every RSS check says so too.
 * Writes `soak-<machine>-<date>.json`: on a GPU into bench/results/ (the README's reliability
 * table comes from there) and DIR; on the CPU reference into DIR alone. `--smaps` (with `--out`)
 * is a diagnosis: each long decode also writes `smaps-long-decode-<variant>.json` into DIR, where
 * its resident memory sits at checkpoints along it (smaps.ts), and the results file goes to DIR
 * alone (the checkpoints' pauses are in the step times). Exits 1 when a loop did not hold, 2 on a
 * bad argument.
 */
import { parseArgs } from 'node:util';
import { detectBackend } from '../../src/runtime/runtime.js';
import { visibleDevices } from '../../src/runtime/device-choice.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import { presetByName } from '../../src/decode/model-config.js';
import { Progress } from '../../src/cli/progress.js';
import { describeMachine, writeResults } from '../results-file.js';
import { CPU_PLAN, GPU_PLAN, plannedSeconds, runSoak, type SoakPlan } from './run-soak.js';
import { conditions, missingConditions } from './rss.js';

const PHASES = ['decode', 'cycles', 'faults'] as const;

function fail(msg: string): number {
  console.error(`soak: ${msg}`);
  return 2;
}

export async function soakMain(argv: string[]): Promise<number> {
  const counts = [
    'steps',
    'loopback-steps',
    'cycles',
    'loopback-cycles',
    'faults',
    'invalid',
    'check-every',
    'time-limit',
  ];
  let values: Record<string, string | undefined>;
  try {
    values = parseArgs({
      args: argv,
      options: {
        backend: { type: 'string' },
        model: { type: 'string' },
        only: { type: 'string' },
        out: { type: 'string' },
        smaps: { type: 'boolean' },
        ...Object.fromEntries(counts.map((c) => [c, { type: 'string' as const }])),
      },
    }).values as Record<string, string | undefined>;
    if (values.smaps && !values.out) throw new TypeError('--smaps needs --out DIR: its checkpoints are written there');
  } catch (e) {
    return fail((e as Error).message);
  }
  const backend = (values.backend ?? detectBackend().backend) as BackendKind;
  if (backend !== 'cuda' && backend !== 'cpu') return fail(`--backend must be cuda or cpu, got '${backend}'`);
  if (backend === 'cuda' && visibleDevices('cuda') === 0) return fail('--backend cuda: no CUDA device is visible');
  const base = backend === 'cuda' ? GPU_PLAN : CPU_PLAN;
  const num = (flag: string, min: number): number | undefined => {
    const v = values[flag];
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new RangeError(`--${flag} must be an integer >= ${min}, got '${v}'`);
    return n;
  };
  let plan: SoakPlan;
  try {
    const preset = values.model ?? base.preset;
    presetByName(preset);
    const steps = num('steps', 0);
    const cyclesN = num('cycles', 0);
    const only = values.only?.split(',') ?? [...PHASES];
    const unknown = only.find((p) => !(PHASES as readonly string[]).includes(p));
    if (unknown !== undefined) throw new RangeError(`--only takes ${PHASES.join(', ')}, got '${unknown}'`);
    plan = {
      ...base,
      preset,
      steps: steps ?? base.steps,
      loopbackSteps: num('loopback-steps', 0) ?? (steps === undefined ? base.loopbackSteps : Math.ceil(steps / 10)),
      cycles: cyclesN ?? base.cycles,
      loopbackCycles:
        num('loopback-cycles', 0) ?? (cyclesN === undefined ? base.loopbackCycles : Math.ceil(cyclesN / 5)),
      faults: num('faults', 0) ?? base.faults,
      invalid: num('invalid', 0) ?? base.invalid,
      checkEvery: num('check-every', 1) ?? base.checkEvery,
      timeLimitS: num('time-limit', 1) ?? base.timeLimitS,
      phases: new Set(only as Array<(typeof PHASES)[number]>),
      ...(values.smaps ? { smapsDir: values.out! } : {}),
    };
  } catch (e) {
    return fail((e as Error).message);
  }
  const dirs = [
    ...(backend === 'cuda' && !values.smaps ? [new URL('../../../bench/results/', import.meta.url).pathname] : []),
    ...(values.out ? [values.out] : []),
  ];
  if (dirs.length === 0)
    console.error("soak: the CPU reference's results are not kept in bench/results/; pass --out DIR to keep them");
  const machine = describeMachine(backend);
  const loopbackLabel = describeMachine(backend, true).label;
  const expected = plannedSeconds(plan);
  console.error(
    `soak on ${machine.label} (${backend}), ${plan.preset}: ${plan.steps} steps (${plan.loopbackSteps} in loopback), ` +
      `${plan.cycles} cycles (${plan.loopbackCycles}), each fault ${plan.faults} times, ${plan.invalid} invalid inputs; ` +
      `expected about ${expected.toFixed(0)} s, at most ${plan.timeLimitS} s`,
  );
  if (expected > plan.timeLimitS)
    console.error(`soak: the time limit is below the ${expected.toFixed(0)} s expected: some loops will be cut short`);
  const missing = missingConditions();
  if (missing.length > 0)
    console.error(
      `soak: RSS is measured without ${missing.join(' ')} (npm run soak sets them): its checks will say so`,
    );
  const run = await runSoak(backend, plan, { oneGpu: machine.label, loopback: loopbackLabel }, new Progress());
  const { phases, smapsDir: _, ...counted } = plan;
  const paths = writeResults('soak', machine, run.rows, dirs, {
    plan: { ...counted, phases: [...phases], expectedS: Math.round(expected) },
    rssConditions: conditions(),
    startToken: run.start,
    loops: run.loops,
  });
  for (const l of run.loops) {
    const ran = `${l.ran}${l.ran < l.asked ? ` of ${l.asked}` : ''} ${l.unit}`;
    console.log(
      `${l.pass ? 'held  ' : 'FAILED'} ${l.loop}, ${l.variant} on ${l.machine}: ${ran}, ${l.seconds.toFixed(1)} s`,
    );
    for (const c of l.checks) console.log(`         ${c.pass ? 'ok ' : 'NO '} ${c.name}: ${c.value} (${c.limit})`);
    if (l.cut) console.log(`         cut: ${l.cut}`);
    if (l.error) console.log(`         error: ${l.error}`);
    for (const n of l.notes) console.log(`         - ${n}`);
  }
  for (const p of paths) console.log(`wrote ${p}`);
  return run.loops.every((l) => l.pass) ? 0 : 1;
}

const main = process.argv[1] && new URL(import.meta.url).pathname === process.argv[1];
if (main) process.exitCode = await soakMain(process.argv.slice(2));
