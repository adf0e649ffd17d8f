/**
 * The soak's loops in order, each bounded in count and in time (budget.ts): the reference window
 * and its oracle, the long decodes (one GPU, then loopback through `ll` and `push`, eager and
 * from the step graph), the open/close cycles, and the faults while the GPU is busy. Every loop
 * is run whatever the one before it did; one that throws is reported as failed with what threw.
 */
import { randomInt } from 'node:crypto';
import type { Progress } from '../../src/cli/progress.js';
import { presetByName } from '../../src/decode/model-config.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { Row } from '../results-file.js';
import { Budget, type Deadline } from './budget.js';
import { CYCLES_WARM_CAP, cycles } from './cycles.js';
import { closeInFlight } from './fault-close-in-flight.js';
import { faultLoop, type RepCheck } from './fault-loop.js';
import { oneSided } from './fault-one-sided.js';
import { workerDeath } from './fault-worker-death.js';
import { invalidInputs } from './invalid-loop.js';
import { finish, warmUp, type LoopResult } from './loop-result.js';
import { longDecode } from './long-decode.js';
import { HIDDEN_MEDIAN, HIDDEN_REL_L2, buildReference, type Reference } from './reference.js';
import { variantName, type Variant } from './variants.js';

export interface SoakPlan {
  preset: string;
  /** Long decode steps on one GPU (each of eager and step graph), and in loopback (each transport and mode). */
  steps: number;
  loopbackSteps: number;
  cycles: number;
  loopbackCycles: number;
  /** Repetitions of each fault. */
  faults: number;
  /** Random invalid inputs. */
  invalid: number;
  /** Every this many steps, the oracle's checkpoint. */
  checkEvery: number;
  /** Seconds for the whole soak. */
  timeLimitS: number;
  /** The spin kernel each rank's stream is given ahead of a faulted step, µs. */
  busyMicros: number;
  /** Device barriers' spin bound in the one-sided fault, SM ticks. */
  oneSidedTicks: number;
  /** Which phases run. */
  phases: ReadonlySet<'decode' | 'cycles' | 'faults'>;
  /** Where the long decodes write their smaps checkpoints (`--smaps`, smaps.ts); none when unset. */
  smapsDir?: string;
  /** What each loop is expected to take, for sharing the time limit out (budget.ts). */
  costs: LoopCosts;
}

/** Seconds: the oracle window whole, a loop's own (its session's open, its probes), and an iteration of each loop. */
export interface LoopCosts {
  window: number;
  loop: number;
  step: number;
  loopbackStep: number;
  cycle: number;
  loopbackCycle: number;
  fault: number;
  input: number;
}

const ALL = new Set(['decode', 'cycles', 'faults'] as const);

/**
 * The full counts, on the GPU. The costs are one H200's (soak-1xH200-2026-12-01): a step 0.30 ms
 * (one GPU, eager or step graph) and 0.4 to 0.7 ms (loopback); the window 33 s, nearly all of
 * it the oracle, whose matvec has since become about twice as fast (30 s kept, in case that host
 * gains less). A cycle took 0.5 s (0.8 s in loopback) and a fault 0.6 to 1.2 s, mostly in control
 * calls that each waited out the worker's 2 ms sleep, one after another; the doorbell
 * (workers/ring.ts) and asking for a rank's allocations at once (device-weights.ts) took that
 * out. On the CPU reference, opening and closing a session of `tiny` without its weights (which a
 * CUDA worker generates on the device) went from 280 to 88 ms (520 to 155 in loopback): a cycle
 * here should be 0.15 to 0.2 s (0.25 to 0.35 s), so these are estimates; the window's and the
 * cycles' notes give the next run's own figures. They add up to about 330 s: the default limit
 * leaves a fifth of that spare.
 */
export const GPU_PLAN: SoakPlan = {
  preset: 'small',
  steps: 100_000,
  loopbackSteps: 10_000,
  cycles: 500,
  loopbackCycles: 100,
  faults: 20,
  invalid: 1000,
  checkEvery: 1000,
  timeLimitS: 400,
  busyMicros: 20_000,
  // About 10 ms of an H200's SM clock: a partner kernel arrives within microseconds.
  oneSidedTicks: 2e7,
  phases: ALL,
  costs: {
    window: 30,
    loop: 1,
    step: 0.3e-3,
    loopbackStep: 0.6e-3,
    cycle: 0.2,
    loopbackCycle: 0.35,
    fault: 0.5,
    input: 1.1e-3,
  },
};

/**
 * The same loops on the CPU reference, sized for `npm test` (2,000 steps, 50 cycles, each fault
 * 3 times): they check the code paths; the GPU run checks the numbers. Its emulated barrier
 * waits in real time, and a loaded two-core machine can keep the other rank's thread off a core
 * for tens of ms: a quarter-second bound.
 */
export const CPU_PLAN: SoakPlan = {
  preset: 'tiny',
  steps: 600,
  loopbackSteps: 200,
  cycles: 40,
  loopbackCycles: 10,
  faults: 3,
  invalid: 1000,
  checkEvery: 100,
  timeLimitS: 600,
  busyMicros: 20_000,
  oneSidedTicks: 5e8,
  phases: ALL,
  // A shared two-core machine's: `tiny`'s step is 5 to 15 ms there, a cycle 0.2 to 0.6 s.
  costs: {
    window: 2,
    loop: 0.5,
    step: 10e-3,
    loopbackStep: 20e-3,
    cycle: 0.35,
    loopbackCycle: 0.55,
    fault: 0.8,
    input: 1.2e-3,
  },
};

/** The seconds one loop is expected to take (the budget's weight for it). */
function loopSeconds(c: LoopCosts, unit: LoopResult['unit'], loopback: boolean, asked: number): number {
  switch (unit) {
    case 'steps':
      return c.loop + asked * (loopback ? c.loopbackStep : c.step);
    case 'cycles':
      return c.loop + (asked + warmUp(asked, CYCLES_WARM_CAP)) * (loopback ? c.loopbackCycle : c.cycle);
    case 'faults':
      return c.loop + asked * c.fault;
    case 'inputs':
      return c.loop + asked * c.input;
  }
}

export interface SoakRun {
  start: number;
  loops: LoopResult[];
  rows: Row[];
}

const ONE_GPU: Variant = { loopback: false };
const DECODE_VARIANTS: Variant[] = [
  ONE_GPU,
  { loopback: false, stepGraph: true },
  ...(['ll', 'push'] as const).flatMap((transport) => [
    { loopback: true, transport },
    { loopback: true, transport, stepGraph: true },
  ]),
];
const LOOPBACK_LL: Variant = { loopback: true, transport: 'll' };

/** A loop the soak will run after the window, and what it is expected to take. */
export interface PlannedLoop {
  loop: string;
  variant: Variant;
  unit: LoopResult['unit'];
  asked: number;
  seconds: number;
}

/** Every loop of the plan, in the order they run. */
export function plannedLoops(plan: SoakPlan): PlannedLoop[] {
  const out: PlannedLoop[] = [];
  const add = (loop: string, variant: Variant, unit: LoopResult['unit'], asked: number): void => {
    out.push({ loop, variant, unit, asked, seconds: loopSeconds(plan.costs, unit, variant.loopback, asked) });
  };
  if (plan.phases.has('decode'))
    for (const v of DECODE_VARIANTS) add('long decode', v, 'steps', v.loopback ? plan.loopbackSteps : plan.steps);
  if (plan.phases.has('cycles')) {
    add('cycles', ONE_GPU, 'cycles', plan.cycles);
    add('cycles', LOOPBACK_LL, 'cycles', plan.loopbackCycles);
  }
  if (plan.phases.has('faults')) {
    // push in loopback: its joins order by events, so a dead rank leaves the survivor no kernel spinning on it.
    for (const v of [ONE_GPU, { loopback: true, transport: 'push' } as Variant])
      add('fault: worker death', v, 'faults', plan.faults);
    for (const transport of ['ll', 'oneshot'] as const)
      add(
        'fault: one-sided barrier',
        { loopback: true, transport, spinTicks: plan.oneSidedTicks },
        'faults',
        plan.faults,
      );
    for (const v of [ONE_GPU, LOOPBACK_LL]) add('fault: close in flight', v, 'faults', plan.faults);
    add('invalid input', LOOPBACK_LL, 'inputs', plan.invalid);
  }
  return out;
}

/** The seconds the whole plan is expected to take, the window included. */
export function plannedSeconds(plan: SoakPlan): number {
  return plannedLoops(plan).reduce((a, l) => a + l.seconds, plan.costs.window);
}

export async function runSoak(
  backend: BackendKind,
  plan: SoakPlan,
  machines: { oneGpu: string; loopback: string },
  progress: Progress,
): Promise<SoakRun> {
  const began = performance.now();
  const machineOf = (v: Variant): string => (v.loopback ? machines.loopback : machines.oneGpu);
  const start = randomInt(0, presetByName(plan.preset).vocab);
  const loops: LoopResult[] = [];
  const rows: Row[] = [];
  const { ref, window } = await referenceLoop(backend, plan.preset, start, machines.oneGpu);
  loops.push(window);
  const { preset } = plan;
  const run = async (l: PlannedLoop, deadline: Deadline): Promise<LoopResult> => {
    const { variant } = l;
    const machine = machineOf(variant);
    const fault = (rep: (i: number) => Promise<RepCheck[]>): Promise<LoopResult> =>
      faultLoop(
        {
          backend,
          preset,
          variant,
          reps: l.asked,
          machine,
          loop: l.loop,
          ref,
          after: variant.transport === 'oneshot' ? LOOPBACK_LL : variant,
        },
        deadline,
        progress,
        rep,
      );
    switch (l.loop) {
      case 'long decode': {
        const spec = {
          backend,
          preset,
          variant,
          steps: l.asked,
          checkEvery: plan.checkEvery,
          machine,
          ...(plan.smapsDir ? { smapsDir: plan.smapsDir } : {}),
        };
        const r = await longDecode(spec, ref, deadline, progress);
        rows.push(...r.rows);
        return r.result;
      }
      case 'cycles':
        return cycles({ backend, preset, variant, cycles: l.asked, machine }, ref, deadline, progress);
      case 'fault: worker death':
        return fault(workerDeath(backend, preset, variant, ref, plan.busyMicros));
      case 'fault: one-sided barrier':
        return fault(oneSided(backend, preset, variant, ref));
      case 'fault: close in flight':
        return fault(closeInFlight(backend, preset, variant, ref, plan.busyMicros));
      case 'invalid input':
        return invalidInputs({ backend, preset, variant, cases: l.asked, machine }, ref, deadline, progress);
      default:
        throw new Error(`soak: no loop named '${l.loop}'`);
    }
  };
  const todo = plannedLoops(plan);
  // The reference window's time counts against the limit too.
  const budget = new Budget(
    plan.timeLimitS - (performance.now() - began) / 1000,
    todo.map((l) => l.seconds),
  );
  for (const l of todo) {
    try {
      loops.push(await run(l, budget.next()));
    } catch (e) {
      loops.push(
        finish({
          loop: l.loop,
          variant: variantName(l.variant),
          machine: machineOf(l.variant),
          loopback: l.variant.loopback,
          preset,
          unit: l.unit,
          asked: l.asked,
          ran: 0,
          cut: 'an error',
          error: (e as Error).message,
          seconds: 0,
          checks: [],
          notes: [],
        }),
      );
    }
    progress.done();
  }
  return { start, loops, rows };
}

/** The reference window, and the loop result that says how it compared with the oracle. */
async function referenceLoop(
  backend: BackendKind,
  preset: string,
  start: number,
  machine: string,
): Promise<{ ref: Reference; window: LoopResult }> {
  const t0 = performance.now();
  const { ref, agreement: a, seconds } = await buildReference(backend, preset, start);
  const window = finish({
    loop: 'oracle window',
    variant: 'unsharded',
    machine,
    loopback: false,
    preset,
    unit: 'steps',
    asked: ref.maxPos,
    ran: ref.maxPos,
    seconds: (performance.now() - t0) / 1000,
    checks: [
      {
        name: 'hidden state',
        value: `relative L2 worst ${a.worstRelL2.toExponential(2)}, median ${a.medianRelL2.toExponential(2)}`,
        limit: `≤ ${HIDDEN_REL_L2.toExponential(0)} at every position, the median ≤ ${HIDDEN_MEDIAN.toExponential(0)}`,
        pass: a.worstRelL2 <= HIDDEN_REL_L2 && a.medianRelL2 <= HIDDEN_MEDIAN,
      },
      {
        name: 'tokens',
        value: `${a.equal} the oracle's, ${a.nearTies} near ties, ${a.wrong} wrong`,
        limit: "the oracle's token, or a near tie",
        pass: a.wrong === 0,
      },
    ],
    notes: [
      `start token ${start}; the window is positions 0 to ${ref.maxPos - 1} of slot 0`,
      `decoded in ${seconds.window.toFixed(1)} s, the oracle over it in ${seconds.oracle.toFixed(1)} s`,
    ],
  });
  return { ref, window };
}
