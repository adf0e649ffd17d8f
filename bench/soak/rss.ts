/**
 * How the soak judges resident memory (RSS), which V8 and the C allocator move without any leak:
 *
 * - V8 grows each isolate's young generation (the main thread's and every device worker's) in
 *   steps, its semi-spaces doubling up to 16 MiB while the allocation rate stays up, and a full
 *   collection does not shrink it back: a step, then a plateau, with the JS heap flat (a long
 *   decode of `tiny` on the CPU reference: +4, +8 and +16 MiB of new space at steps 300, 1,500
 *   and 5,700). Fixed at 16 MiB from the start, it became resident only as an isolate's
 *   allocations first walked through it: a device worker on the GPU allocates little a step, and
 *   its 2 x 16 MiB came in over thousands of steps (`--smaps`: the workers' V8 pages +13.8 MiB in
 *   the unsharded loop, +17.8 and +5.7 in loopback `ll`; at 1 MiB every loop within 1.5 MiB).
 *   `npm run soak` fixes it at V8's starting size, 1 MiB (YOUNG_GENERATION): resident at once,
 *   and never grown.
 * - glibc's malloc raises its mmap threshold to the largest block freed (up to 32 MiB), after which
 *   the rings' half-megabyte buffers come from, and go back to, the main heap, whose free pages it
 *   keeps for a while: over 150 open/close cycles of `tiny` the main heap moved between 6 and
 *   16 MiB. `npm run soak` fixes the threshold at its default, 128 KiB (MALLOC_THRESHOLD), so such
 *   blocks are unmapped when freed.
 * - What a process sets up once (the JIT's code, the CUDA context's threads, libuv's pool) happens
 *   in a warm-up (loop-result.ts, warmUp) before the starting figure.
 *
 * After that RSS must be flat: the last figure within 1% of the first or 1 MiB, whichever is
 * larger, and the least-squares line through samples along the loop may not rise by more than
 * that over it, so a slow leak fails even when the last sample happens to land low. (A line that
 * falls is no leak: freed pages going back, a bigger sample early.)
 */
import v8 from 'node:v8';
import { fmtBytes, type Check } from './loop-result.js';
import { hostResources, type Snapshot } from './resources.js';

const MiB = 2 ** 20;

/** The Node options that hold each isolate's young generation at the size it starts at. */
export const YOUNG_GENERATION = ['--min-semi-space-size=1', '--max-semi-space-size=1'];
/** The environment that keeps glibc's mmap threshold where it starts. */
export const MALLOC_THRESHOLD = { MALLOC_MMAP_THRESHOLD_: '131072' };

/** What of the soak's measuring conditions this process lacks, in words (none: all met). */
export function missingConditions(): string[] {
  const missing: string[] = [];
  if (typeof (globalThis as { gc?: unknown }).gc !== 'function') missing.push('--expose-gc');
  for (const flag of YOUNG_GENERATION) if (!process.execArgv.includes(flag)) missing.push(flag);
  for (const [k, v] of Object.entries(MALLOC_THRESHOLD)) if (process.env[k] !== v) missing.push(`${k}=${v}`);
  return missing;
}

/** The conditions as they held, for the results file. */
export function conditions(): { execArgv: string[]; env: Record<string, string | undefined>; newSpaceBytes: number } {
  const newSpace = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  return {
    execArgv: process.execArgv,
    env: Object.fromEntries(Object.keys(MALLOC_THRESHOLD).map((k) => [k, process.env[k]])),
    newSpaceBytes: newSpace?.space_size ?? 0,
  };
}

/** RSS may move this much: 1% of its starting figure or 1 MiB, whichever is larger. */
export function rssTolerance(start: Snapshot): number {
  return Math.max(MiB, start.rssBytes / 100);
}

const signed = (v: number, text: string): string => (v > 0 ? `+${text}` : text);

/** A note for an RSS check measured without the conditions. */
function caveat(): string {
  const m = missingConditions();
  return m.length === 0 ? '' : `; measured without ${m.join(' ')}`;
}

/**
 * RSS sampled along a loop from the end of its warm-up (iteration `from`): the least-squares
 * line through the samples tells a climb (a leak) from steps up and down (what the heap and the
 * allocator keep and give back).
 */
export class RssSeries {
  private readonly at: number[] = [];
  private readonly rss: number[] = [];
  readonly every: number;

  constructor(
    readonly from: number,
    count: number,
    points = 20,
  ) {
    this.every = Math.max(1, Math.floor((count - from) / points));
  }

  /** A figure taken elsewhere (the starting and ending snapshots), after `at` iterations. */
  add(at: number, rssBytes: number): void {
    this.at.push(at);
    this.rss.push(rssBytes);
  }

  /** After iteration `i` (0-based): a sample every `every` iterations past the warm-up. */
  maybeSample(i: number): void {
    const at = i + 1;
    if (at > this.from && (at - this.from) % this.every === 0) this.add(at, hostResources().rssBytes);
  }

  get samples(): number {
    return this.at.length;
  }

  /** Bytes an iteration, or NaN with fewer than three samples. */
  slope(): number {
    const n = this.at.length;
    if (n < 3) return Number.NaN;
    const mx = this.at.reduce((a, b) => a + b, 0) / n,
      my = this.rss.reduce((a, b) => a + b, 0) / n;
    let num = 0,
      den = 0;
    for (let i = 0; i < n; i++) {
      num += (this.at[i]! - mx) * (this.rss[i]! - my);
      den += (this.at[i]! - mx) ** 2;
    }
    return den === 0 ? Number.NaN : num / den;
  }

  /** Iterations between the first sample and the last. */
  span(): number {
    return this.at.length < 2 ? 0 : this.at[this.at.length - 1]! - this.at[0]!;
  }

  /** The samples, for a loop's notes. */
  describe(unit: string): string {
    const mib = this.rss.map((b) => (b / MiB).toFixed(1)).join(', ');
    return `RSS after ${this.at.join(', ') || '-'} ${unit} (MiB): ${mib || 'none'}`;
  }
}

/** The last figure within the tolerance of the first, both taken after the warm-up. */
export function flatRss(start: Snapshot, end: Snapshot, warm: string): Check {
  const tol = rssTolerance(start);
  const d = end.rssBytes - start.rssBytes;
  const pct = (100 * d) / start.rssBytes;
  const heap = end.heapUsedBytes - start.heapUsedBytes;
  return {
    name: 'RSS',
    value: `Δ ${signed(d, fmtBytes(d))} (${signed(pct, pct.toFixed(2))}%; JS heap Δ ${signed(heap, fmtBytes(heap))})${caveat()}`,
    limit: `within ${fmtBytes(tol)} (1% or 1 MiB), from the end of a warm-up of ${warm}`,
    pass: Math.abs(d) <= tol,
  };
}

/** The least-squares line through the samples: its rise over the loop at most the tolerance. */
export function rssTrend(series: RssSeries, start: Snapshot, unit: string): Check {
  const tol = rssTolerance(start);
  const slope = series.slope();
  const rise = slope * series.span();
  const one = unit.replace(/s$/, '');
  return {
    name: 'RSS trend',
    value: Number.isNaN(slope)
      ? `${series.samples} samples: too few for a line`
      : `${signed(rise, fmtBytes(Math.round(rise)))} over ${series.span()} ${unit} ` +
        `(${signed(slope, (slope / 1024).toFixed(2))} KiB a ${one}, least squares through ${series.samples} samples)`,
    limit: `a rise of at most ${fmtBytes(tol)} (1% or 1 MiB) over the loop after its warm-up`,
    pass: !Number.isNaN(slope) && rise <= tol,
  };
}
