/**
 * A fault, repeated: each repetition opens its own session (whose first step must decode right:
 * the process goes on after the fault before it), injects the fault while the GPU is busy, and
 * closes. After each, a probe wants the device memory back at the loop's starting figure (every
 * byte freed) and no device worker left; after the last, one more session must decode right.
 */
import type { Progress } from '../../src/cli/progress.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import { liveWorkers } from '../../src/workers/worker-handle.js';
import type { Deadline } from './budget.js';
import { finish, fmtBytes, resourceChecks, rssNote, type Check, type LoopResult } from './loop-result.js';
import { stepChecked, type Reference } from './reference.js';
import { closingSnapshot, deviceBase, snapshot } from './resources.js';
import { openVariant, variantName, type Variant } from './variants.js';

/** One repetition's finding: held or not, with a figure where there is one (ms). */
export interface RepCheck {
  name: string;
  pass: boolean;
  limit: string;
  ms?: number;
  /** What went wrong, for the notes, when it did not hold. */
  detail?: string;
}

export interface FaultSpec {
  backend: BackendKind;
  preset: string;
  variant: Variant;
  reps: number;
  machine: string;
  /** `fault: worker death`, ... */
  loop: string;
  ref: Reference;
  /** The session that must decode after the last repetition (one the reference window checks). */
  after?: Variant;
}

export async function faultLoop(
  spec: FaultSpec,
  deadline: Deadline,
  progress: Progress,
  rep: (i: number) => Promise<RepCheck[]>,
): Promise<LoopResult> {
  const t0 = performance.now();
  const workers = liveWorkers();
  const start = snapshot(await deviceBase(spec.backend));
  const tally = new Map<string, { held: number; of: number; limit: string; worstMs?: number }>();
  const note = (c: RepCheck): void => {
    const t = tally.get(c.name) ?? { held: 0, of: 0, limit: c.limit };
    t.of++;
    if (c.pass) t.held++;
    if (c.ms !== undefined) t.worstMs = Math.max(t.worstMs ?? -Infinity, c.ms);
    tally.set(c.name, t);
  };
  const notes: string[] = [];
  let ran = 0;
  for (; ran < spec.reps && !deadline.expired; ran++) {
    try {
      for (const c of await rep(ran)) {
        note(c);
        if (!c.pass && notes.length < 10)
          notes.push(`repetition ${ran}: ${c.name} did not hold (${c.limit})${c.detail ? `: ${c.detail}` : ''}`);
      }
    } catch (e) {
      note({ name: 'repetition ran', pass: false, limit: 'no error' });
      if (notes.length < 10) notes.push(`repetition ${ran}: ${(e as Error).message}`);
    }
    const base = await deviceBase(spec.backend).catch(() => NaN);
    note({
      name: 'freed',
      pass: Math.abs(base - start.deviceUsedBytes) <= 2 ** 20,
      limit: 'device memory back to its base',
    });
    note({ name: 'workers gone', pass: liveWorkers() === workers, limit: 'no device worker left' });
    progress.tick(`soak ${spec.loop.replace('fault: ', '')}`, ran + 1, spec.reps);
  }
  let decodesAfter = false;
  try {
    const s = await openVariant(spec.backend, spec.preset, spec.after ?? spec.variant);
    try {
      decodesAfter = (await stepChecked(s, spec.ref)).ok && (await stepChecked(s, spec.ref)).ok;
    } finally {
      await s.close();
    }
  } catch (e) {
    notes.push(`the session after the last repetition: ${(e as Error).message}`);
  }
  const end = await closingSnapshot(await deviceBase(spec.backend).catch(() => NaN), start.threads);
  const checks: Check[] = [...tally].map(([name, t]) => ({
    name,
    value: `${t.held} of ${t.of}${t.worstMs !== undefined ? `, worst ${t.worstMs.toFixed(0)} ms` : ''}`,
    limit: t.limit,
    pass: t.held === t.of,
  }));
  checks.push({
    name: 'decodes after',
    value: decodesAfter ? 'yes' : 'no',
    limit: 'a new session decodes right',
    pass: decodesAfter,
  });
  checks.push(...resourceChecks(start, end));
  notes.push(rssNote(start, end));
  if (!Number.isFinite(end.deviceUsedBytes)) notes.push('the last probe of device memory failed');
  else
    notes.push(
      `device memory with nothing open: ${fmtBytes(start.deviceUsedBytes)} before, ${fmtBytes(end.deviceUsedBytes)} after`,
    );
  return finish({
    loop: spec.loop,
    variant: variantName(spec.variant),
    machine: spec.machine,
    loopback: spec.variant.loopback,
    preset: spec.preset,
    unit: 'faults',
    asked: spec.reps,
    ran,
    ...(ran < spec.reps ? { cut: deadline.why } : {}),
    seconds: (performance.now() - t0) / 1000,
    start,
    end,
    checks,
    notes,
  });
}
