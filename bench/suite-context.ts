/**
 * What a benchmark suite is run with: the backend, its counts, the runtime options for its two
 * ranks, and where its output goes. The runner decides the two ranks from the machine: two
 * devices where there are two; in loopback (both ranks on device 0) where asked, or where one GPU
 * is all there is and the suite needs two ranks; none for `decode` on one GPU, which then runs
 * its one-GPU rows alone.
 */
import type { BackendKind } from '../src/runtime/device-api.js';
import type { RuntimeOptions } from '../src/runtime/runtime.js';
import type { TransportName } from '../src/runtime/transports/transport.js';
import type { Progress } from '../src/cli/progress.js';
import type { Row } from './results-file.js';

export const JOIN_OPS = ['broadcast', 'allGather', 'gather', 'allReduce'] as const;
export type JoinOp = (typeof JOIN_OPS)[number];

export interface SuiteContext {
  backend: BackendKind;
  /** The CPU reference: small counts, a run of the suite's code rather than a measurement. */
  smoke: boolean;
  /** Samples a row (`--joins`). */
  joins: number;
  progress: Progress;
  /** The joins suite's transports and ops (decode's transports too). */
  transports: readonly TransportName[];
  ops: readonly JoinOp[];
  /** Options for a two-rank runtime; undefined where the suite runs no two-rank rows. */
  pair: Pick<RuntimeOptions, 'devices' | 'loopback'> | undefined;
  /** Write the rows so far (a later crash must not take them with it). */
  flush(rows: Row[]): void;
  /** A variant that could not run: reported, and the run's exit status says so. */
  fail(what: string, e: Error): void;
}

/** `full` samples, or `smoke` on the CPU reference. */
export function count(ctx: Pick<SuiteContext, 'smoke'>, full: number, smoke: number): number {
  return ctx.smoke ? smoke : full;
}

/** The two-rank options of a suite that cannot run without them. */
export function pairOf(ctx: SuiteContext, suite: string): Pick<RuntimeOptions, 'devices' | 'loopback'> {
  if (!ctx.pair) throw new Error(`bench ${suite}: needs two ranks, and none were given (pass --loopback on one GPU)`);
  return ctx.pair;
}

/** Both ranks on device 0, for the suites that need two ranks on a machine of one GPU. */
export const LOOPBACK_PAIR = { devices: [0, 0], loopback: true } as const;
