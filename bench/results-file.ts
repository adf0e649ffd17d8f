/**
 * Benchmark results as JSON: what machine, which versions, when, every raw sample, and the
 * summary of each row. Files are named `<suite>-<machine>-<date>.json` under bench/results/.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Machine } from '../src/cli/machine.js';
import { summarize, type Summary } from '../src/cli/stats.js';

export { describeMachine, type Machine } from '../src/cli/machine.js';

export interface Row extends Summary {
  suite: string;
  op: string;
  transport: string;
  bytes: number;
  /** The model preset a row ran, or null for suites without a model (ring, joins). */
  preset: string | null;
  unit: string;
  /** `device` (CUDA events) or `host` (the main thread's clock), where a suite reports both. */
  metric?: string;
  /** How the figure was taken: host clock or device events, and what one sample is. */
  method: string;
  /**
   * Rows of paired differences only: a ~95% interval of the median (bench/paired-difference.ts).
   * Where it holds zero, the difference is within the run's noise, not a cost.
   */
  interval?: [number, number];
  samples: number[];
  /** Decode rows: the batch, and the positions its steps ran at ("0-63", "4000"). */
  t?: number;
  positions?: string;
  /** Decode rows: the step's fewest bytes over the same run's read floor (bench/step-bytes.ts), and that over the row's median. */
  floorMs?: number;
  rooflinePct?: number;
  tokensPerS?: number;
  /** Kernel rows: launches a step and the bytes they read or write a step, over their time. */
  launches?: number;
  gbps?: number;
}

/** Where the workers ran, for a row's method: host figures depend on it. */
export function placementNote(placement: ReadonlyArray<{ rank: number; cpu: number | null; why?: string }>): string {
  return placement.map((p) => `worker ${p.rank} ${p.cpu === null ? 'unpinned' : `on CPU ${p.cpu}`}`).join(', ');
}

export function row(fields: Omit<Row, keyof Summary | 'samples'>, samples: number[]): Row {
  return { ...fields, ...summarize(samples), samples: samples.map((v) => Math.round(v * 1000) / 1000) };
}

/** Write the suite's results (and what else the suite records, `extra`); returns the paths written. */
export function writeResults(
  suite: string,
  machine: Machine,
  rows: Row[],
  outDirs: string[],
  extra: Record<string, unknown> = {},
): string[] {
  const date = new Date().toISOString();
  const name = `${suite}-${machine.label}-${date.slice(0, 10)}.json`;
  // Indented for reading, except the raw samples: one line per row keeps files diffable and small.
  const body = JSON.stringify(
    { suite, date, machine, rows: rows.map((r, i) => ({ ...r, samples: `@samples${i}@` })), ...extra },
    null,
    1,
  ).replace(/"@samples(\d+)@"/g, (_, i: string) => JSON.stringify(rows[Number(i)]!.samples));
  return outDirs.map((dir) => {
    mkdirSync(dir, { recursive: true });
    const p = join(dir, name);
    writeFileSync(p, body);
    return p;
  });
}
