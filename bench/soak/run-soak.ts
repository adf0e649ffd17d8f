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
import { Budget } from './budget.js';
import { cycles } from './cycles.js';
import { closeInFlight } from './fault-close-in-flight.js';
import { faultLoop, type RepCheck } from './fault-loop.js';
import { oneSided } from './fault-one-sided.js';
import { workerDeath } from './fault-worker-death.js';
import { invalidInputs } from './invalid-loop.js';
import { finish, type LoopResult } from './loop-result.js';
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
}

const ALL = new Set(['decode', 'cycles', 'faults'] as const);

/** The counts, on the GPU: a step of `small` is about 0.3-0.6 ms there. */
export const GPU_PLAN: SoakPlan = {
  preset: 'small',
  steps: 100_000,
  loopbackSteps: 10_000,
  cycles: 500,
  loopbackCycles: 100,
  faults: 20,
  invalid: 1000,
  checkEvery: 1000,
  timeLimitS: 3600,
  busyMicros: 20_000,
  // About 10 ms of an H200's SM clock: a partner kernel arrives within microseconds.
  oneSidedTicks: 2e7,
  phases: ALL,
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
};

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
  type Loop = {
    variant: Variant;
    loop: string;
    unit: LoopResult['unit'];
    asked: number;
    run: () => Promise<LoopResult>;
  };
  const todo: Loop[] = [];
  const add = (l: Omit<Loop, 'run'>, run: (deadline: ReturnType<Budget['next']>) => Promise<LoopResult>): void => {
    todo.push({ ...l, run: () => run(budget.next()) });
  };
  if (plan.phases.has('decode'))
    for (const variant of DECODE_VARIANTS) {
      const steps = variant.loopback ? plan.loopbackSteps : plan.steps;
      add({ variant, loop: 'long decode', unit: 'steps', asked: steps }, async (deadline) => {
        const r = await longDecode(
          { backend, preset: plan.preset, variant, steps, checkEvery: plan.checkEvery, machine: machineOf(variant) },
          ref,
          deadline,
          progress,
        );
        rows.push(...r.rows);
        return r.result;
      });
    }
  if (plan.phases.has('cycles'))
    for (const [variant, n] of [
      [ONE_GPU, plan.cycles],
      [LOOPBACK_LL, plan.loopbackCycles],
    ] as const)
      add({ variant, loop: 'cycles', unit: 'cycles', asked: n }, (deadline) =>
        cycles(
          { backend, preset: plan.preset, variant, cycles: n, machine: machineOf(variant) },
          ref,
          deadline,
          progress,
        ),
      );
  if (plan.phases.has('faults')) {
    const fault = (loop: string, variant: Variant, rep: (i: number) => Promise<RepCheck[]>) =>
      add({ variant, loop, unit: 'faults', asked: plan.faults }, (deadline) =>
        faultLoop(
          {
            backend,
            preset: plan.preset,
            variant,
            reps: plan.faults,
            machine: machineOf(variant),
            loop,
            ref,
            after: variant.transport === 'oneshot' ? LOOPBACK_LL : variant,
          },
          deadline,
          progress,
          rep,
        ),
      );
    // push in loopback: its joins order by events, so a dead rank leaves the survivor no kernel spinning on it.
    for (const v of [ONE_GPU, { loopback: true, transport: 'push' } as Variant])
      fault('fault: worker death', v, workerDeath(backend, plan.preset, v, ref, plan.busyMicros));
    for (const transport of ['ll', 'oneshot'] as const) {
      const v: Variant = { loopback: true, transport, spinTicks: plan.oneSidedTicks };
      fault('fault: one-sided barrier', v, oneSided(backend, plan.preset, v, ref));
    }
    for (const v of [ONE_GPU, LOOPBACK_LL])
      fault('fault: close in flight', v, closeInFlight(backend, plan.preset, v, ref, plan.busyMicros));
    add({ variant: LOOPBACK_LL, loop: 'invalid input', unit: 'inputs', asked: plan.invalid }, (deadline) =>
      invalidInputs(
        { backend, preset: plan.preset, variant: LOOPBACK_LL, cases: plan.invalid, machine: machines.loopback },
        ref,
        deadline,
        progress,
      ),
    );
  }
  // The reference window's time counts against the limit too.
  const budget = new Budget(plan.timeLimitS - (performance.now() - began) / 1000, todo.length);
  for (const l of todo) {
    try {
      loops.push(await l.run());
    } catch (e) {
      loops.push(
        finish({
          loop: l.loop,
          variant: variantName(l.variant),
          machine: machineOf(l.variant),
          loopback: l.variant.loopback,
          preset: plan.preset,
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
  const { ref, agreement: a } = await buildReference(backend, preset, start);
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
    notes: [`start token ${start}; the window is positions 0 to ${ref.maxPos - 1} of slot 0`],
  });
  return { ref, window };
}
