/**
 * Which machine a results file speaks for. The README's tables and targets are about the two-GPU
 * machine; a file measured on one GPU, or in loopback (two ranks on one device, bench/run.ts),
 * speaks for another and is shown apart, under its machine label (`1xH200`, `1xH200-loopback`),
 * never mixed into a two-GPU line or verdict.
 */
import type { NamedResults } from './results-types.js';

/** What the rule reads of a results file. */
type Labelled = { data: { machine?: { label?: string; loopback?: boolean } } };

/**
 * Two GPUs or more, each rank on its own: a label `<n>x<GPU>` with n >= 2 (src/cli/machine.ts),
 * not a loopback run (which says so in its label and its `loopback`).
 */
export function isTwoGpuResults(f: Labelled): boolean {
  const m = f.data.machine;
  const label = m?.label ?? '';
  if (m?.loopback === true || /-loopback$/.test(label)) return false;
  const gpus = /^(\d+)x/.exec(label);
  return gpus !== null && Number(gpus[1]) >= 2;
}

/** One GPU of its own: a label `1x<GPU>`, not a loopback run (both ranks on one card). */
export function isOneGpuResults(f: Labelled): boolean {
  const m = f.data.machine;
  return m?.loopback !== true && /^1x[^-]*$/.test(m?.label ?? '');
}

/**
 * The card one GPU's goals and the README are stated for. The latency-bound kernels cost a step
 * about the same time on any Hopper card, so a card with less bandwidth (an H100) reads a larger
 * share of its lower floor from the same code (docs/performance.md): another card's figures are
 * shown apart, in docs/performance.md, never in its place.
 */
export const TARGET_CARD = 'H200';

/** One GPU of its own, and that GPU the target card: a label `1x` and the card's name. */
export function isTargetCardResults(f: Labelled): boolean {
  return isOneGpuResults(f) && f.data.machine?.label === `1x${TARGET_CARD}`;
}

/** The label a file is shown under when it is not a two-GPU one. */
export function machineLabel(f: Labelled): string {
  return f.data.machine?.label ?? 'unlabelled';
}

/** Files by suite, split into the two-GPU machine's and everyone else's (those by label too). */
export function splitByMachine<T extends NamedResults>(files: T[]): { twoGpu: T[]; others: Map<string, T[]> } {
  const twoGpu: T[] = [];
  const others = new Map<string, T[]>();
  for (const f of files) {
    if (isTwoGpuResults(f)) {
      twoGpu.push(f);
      continue;
    }
    const k = machineLabel(f);
    if (!others.has(k)) others.set(k, []);
    others.get(k)!.push(f);
  }
  return { twoGpu, others };
}
