/**
 * Open/close cycles: `Session.open`, two teacher-forced steps checked against the reference
 * window, `close`, again and again. The device memory with nothing open (a probe's, before the
 * first cycle and after the last), RSS, descriptors and threads must come back to where they
 * started, and every session must use the same device memory once open (a leak would show in
 * the next one). A few unmeasured cycles first (5%, at most 25), so what a process sets up once
 * (the CUDA primary context and its threads, libuv's pool, the JIT's code, the heap's first
 * growth) is in the starting figures.
 */
import type { Progress } from '../../src/cli/progress.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { Deadline } from './budget.js';
import { finish, fmtBytes, noneWrong, resourceChecks, warmUp, warmUpText, type LoopResult } from './loop-result.js';
import { median, stepChecked, type Reference } from './reference.js';
import { closingSnapshot, deviceBase, sessionDeviceUsed, snapshot } from './resources.js';
import { RssSeries, flatRss, rssTrend } from './rss.js';
import { openVariant, variantName, type Variant } from './variants.js';

export interface CyclesSpec {
  backend: BackendKind;
  preset: string;
  variant: Variant;
  cycles: number;
  machine: string;
}

/**
 * The most cycles a warm-up takes: the JIT was still compiling for the main thread's side of a
 * cycle 25 to 75 cycles in (RSS up 2 MiB there, then flat to cycle 400, on the CPU reference).
 */
export const CYCLES_WARM_CAP = 25;

const ms = (xs: number[]): string => (xs.length ? median(xs).toFixed(1) : '-');

export async function cycles(
  spec: CyclesSpec,
  ref: Reference,
  deadline: Deadline,
  progress: Progress,
): Promise<LoopResult> {
  const name = variantName(spec.variant);
  const t0 = performance.now();
  // Where a cycle's time goes (ms): Session.open, the footprint and the two steps, close.
  const phases = { open: [] as number[], steps: [] as number[], close: [] as number[] };
  const once = async (): Promise<{ used: number; ok: boolean }> => {
    const t = performance.now();
    const s = await openVariant(spec.backend, spec.preset, spec.variant);
    const opened = performance.now();
    let stepped = opened;
    try {
      const used = await sessionDeviceUsed(s);
      const a = await stepChecked(s, ref);
      const b = await stepChecked(s, ref);
      stepped = performance.now();
      return { used, ok: a.ok && b.ok };
    } finally {
      await s.close();
      phases.open.push(opened - t);
      phases.steps.push(stepped - opened);
      phases.close.push(performance.now() - stepped);
    }
  };
  const warm = warmUp(spec.cycles, CYCLES_WARM_CAP);
  for (let i = warm; i > 0; i--) await once();
  for (const p of Object.values(phases)) p.length = 0;
  const start = snapshot(await deviceBase(spec.backend));
  const notes: string[] = [];
  const series = new RssSeries(0, spec.cycles);
  series.add(0, start.rssBytes);
  let ran = 0,
    wrong = 0,
    lo = Infinity,
    hi = -Infinity,
    error: string | undefined;
  try {
    for (; ran < spec.cycles && !deadline.expired; ran++) {
      const { used, ok } = await once();
      lo = Math.min(lo, used);
      hi = Math.max(hi, used);
      if (!ok && wrong++ < 5) notes.push(`cycle ${ran}: a step's token was not the window's`);
      series.maybeSample(ran);
      progress.tick(`soak cycles ${spec.variant.loopback ? 'loopback' : name}`, ran + 1, spec.cycles);
    }
  } catch (e) {
    error = `cycle ${ran}: ${(e as Error).message}`;
  }
  const end = await closingSnapshot(await deviceBase(spec.backend).catch(() => NaN), start.threads);
  series.add(ran, end.rssBytes);
  return finish({
    loop: 'cycles',
    variant: name,
    machine: spec.machine,
    loopback: spec.variant.loopback,
    preset: spec.preset,
    unit: 'cycles',
    asked: spec.cycles,
    ran,
    ...(error ? { cut: 'an error', error } : ran < spec.cycles ? { cut: deadline.why } : {}),
    seconds: (performance.now() - t0) / 1000,
    start,
    end,
    checks: [
      noneWrong('decoded', wrong, ran, 'cycles'),
      {
        name: 'session footprint',
        value: ran > 0 ? `${fmtBytes(lo)} to ${fmtBytes(hi)} once open` : 'no cycle ran',
        limit: 'the same every cycle (within 1 MiB)',
        pass: ran > 0 && hi - lo <= 2 ** 20,
      },
      ...resourceChecks(start, end, [
        flatRss(start, end, `${warmUpText(warm, CYCLES_WARM_CAP, 'cycles')} before the first`),
        rssTrend(series, start, 'cycles'),
      ]),
    ],
    notes: [
      ...notes,
      `a cycle, median ms: open ${ms(phases.open)}, footprint and two steps ${ms(phases.steps)}, close ${ms(phases.close)}`,
      series.describe('cycles'),
    ],
  });
}
