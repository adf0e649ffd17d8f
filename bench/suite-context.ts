/**
 * What a benchmark suite is run with: the backend, its sizes, and the runtime options for its
 * two ranks. The runner decides the last from the machine: two devices where there are two; in
 * loopback (both ranks on device 0) where asked, or where one GPU is all there is and the suite
 * needs two ranks; none for `decode` on one GPU, which then runs its one-GPU rows alone.
 */
import type { BackendKind } from '../src/runtime/device-api.js';
import type { RuntimeOptions } from '../src/runtime/runtime.js';
import type { Row } from './results-file.js';
import type { Progress } from '../src/cli/progress.js';

export interface SuiteContext {
  backend: BackendKind;
  /** Eager joins per host row (`--joins`). */
  joins: number;
  /** `--transports`: the joins suite's transports, all when absent. */
  transports?: string[];
  /** Options for a two-rank runtime; undefined where the suite runs no two-rank rows. */
  pair: Pick<RuntimeOptions, 'devices' | 'loopback'> | undefined;
}

export type Suite = (ctx: SuiteContext, p: Progress, flush?: (rows: Row[]) => void) => Promise<Row[]>;

/** The two-rank options of a suite that cannot run without them. */
export function pairOf(ctx: SuiteContext, suite: string): Pick<RuntimeOptions, 'devices' | 'loopback'> {
  if (!ctx.pair) throw new Error(`bench ${suite}: needs two ranks, and none were given (pass --loopback on one GPU)`);
  return ctx.pair;
}

/** Both ranks on device 0, for the suites that need two ranks on a machine of one GPU. */
export const LOOPBACK_PAIR = { devices: [0, 0], loopback: true } as const;
