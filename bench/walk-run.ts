/**
 * What the decode-level suites (`decode`, `ep`) share: a walk loaded on a fresh runtime and freed
 * however the suite ends, and a timed run of t = 1 steps. `bench` on the GPUs; `tiny` on the CPU
 * reference, where a run is a smoke test of the suite's code, not a measurement.
 */
import { Runtime } from '../src/runtime/runtime.js';
import { ArLink } from '../src/runtime/link.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import { DeviceWalk, mailboxBytesFor } from '../src/decode/device-walk.js';
import { presetByName } from '../src/decode/model-config.js';
import type { DecodeConfig } from '../src/decode/decode-config.js';
import type { Layout } from '../src/decode/device-weights.js';
import type { Progress } from '../src/cli/progress.js';
import { row, type Row } from './results-file.js';
import { pairOf, type SuiteContext } from './suite-context.js';

export const presetFor = (backend: BackendKind): string => (backend === 'cuda' ? 'bench' : 'tiny');

export interface StepTimes {
  /** Main-thread wall time of each timed step, ms. */
  host: number[];
  /** Of that, enqueueing the step and waiting for its completion counter, µs. */
  enqueue: number[];
  wait: number[];
  /** What `each` returned after each timed step (device samples read back between steps). */
  extra: number[][];
}

/** How many steps a timed run takes: `warm` untimed, then `steps` timed. */
export interface StepCounts {
  progress: Progress;
  steps: number;
  warm: number;
}

/**
 * `warm` untimed then `steps` timed t = 1 steps from token 1 at positions 0, 1, ... (so every
 * variant sees the same attention lengths at the same index). `each` runs after each step's
 * tokens are back, outside the timed span.
 */
export async function timeSteps(
  walk: DeviceWalk,
  dc: DecodeConfig,
  label: string,
  { progress, steps, warm }: StepCounts,
  each?: () => Promise<number[]>,
): Promise<StepTimes> {
  const out: StepTimes = { host: [], enqueue: [], wait: [], extra: [] };
  let tok = [1];
  for (let i = 0; i < warm + steps; i++) {
    const t0 = performance.now();
    const { next, timing } = await walk.step(tok, [i], dc, false);
    const ms = performance.now() - t0;
    tok = next;
    const x = each ? await each() : [];
    if (i >= warm) {
      out.host.push(ms);
      out.enqueue.push(timing.hostEnqueueUs);
      out.wait.push(timing.waitUs);
      out.extra.push(x);
    }
    progress.tick(`${label}`, i + 1, warm + steps);
  }
  return out;
}

/** The unsharded walk on one worker (device 0); the sharded one on the suite's two ranks. */
export async function withWalk<T>(
  ctx: SuiteContext,
  layout: Layout,
  fn: (walk: DeviceWalk, rt: Runtime) => Promise<T>,
  progress: Progress,
): Promise<T> {
  const { backend } = ctx;
  const cfg = presetByName(presetFor(backend));
  const ranks = layout === 'unsharded' ? { devices: [0] } : pairOf(ctx, 'the sharded walk');
  const rt = await Runtime.open({ backend, ...ranks, mailboxBytes: mailboxBytesFor(cfg, 1) });
  const link = layout === 'sharded' ? await ArLink.open(rt) : undefined;
  try {
    const walk = await DeviceWalk.load(rt, link, cfg, layout, 1, (d, t) => progress.tick(`weights ${layout}`, d, t));
    try {
      return await fn(walk, rt);
    } finally {
      await walk.close();
    }
  } finally {
    await link?.close().catch(() => undefined);
    await rt.close().catch(() => undefined);
  }
}

/**
 * Where a variant's step time went: enqueueing the step (step() until its completion signal is
 * written) and waiting for its completion counter; what is left is reading the tokens.
 */
export function stepSplitRows(
  base: Pick<Row, 'suite' | 'bytes' | 'preset' | 'metric'>,
  transport: string,
  t: StepTimes,
): Row[] {
  const b = { ...base, unit: 'us', transport };
  return [
    row(
      {
        ...b,
        op: 'step enqueue',
        method: "main-thread time from step() until the step's completion signal is enqueued",
      },
      t.enqueue,
    ),
    row(
      {
        ...b,
        op: 'step wait',
        method: "main-thread time waiting for the step's completion counter after enqueueing it",
      },
      t.wait,
    ),
  ];
}

/** A variant's step-time row (`base.op`, ms) followed by its enqueue and wait rows. */
export function stepRows(
  base: Pick<Row, 'suite' | 'op' | 'bytes' | 'preset' | 'unit' | 'metric'>,
  transport: string,
  method: string,
  t: StepTimes,
): Row[] {
  return [row({ ...base, transport, method }, t.host), ...stepSplitRows(base, transport, t)];
}
