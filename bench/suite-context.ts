/** What the runner gives a benchmark suite: the backend, its counts, and where its output goes. */
import type { BackendKind } from '../src/runtime/device-api.js';
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
  /** The joins suite's transports and ops. */
  transports: readonly TransportName[];
  ops: readonly JoinOp[];
  /** Write the rows so far (a later crash must not take them with it). */
  flush(rows: Row[]): void;
  /** A variant that could not run: reported, and the run's exit status says so. */
  fail(what: string, e: Error): void;
}

/** `full` samples, or `smoke` on the CPU reference. */
export function count(ctx: Pick<SuiteContext, 'smoke'>, full: number, smoke: number): number {
  return ctx.smoke ? smoke : full;
}
