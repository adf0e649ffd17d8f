/**
 * When a worker enqueued each of its joins that wait on the device (`ll`, `oneshot`): what a
 * refused join or a stalled step needs to say whether one rank's half came late from its host
 * (enqueued late, or not yet) or from the device (both halves enqueued together, one started
 * late). Both ranks issue the same such joins in the same order, so a join's two halves are the
 * entries of the same index in the two ranks' logs; a join issued on one rank alone (a refusal's
 * test, the soak's one-sided fault) shifts that pairing, and the barrier's reset, which follows
 * it, realigns the logs (realign).
 *
 * One writer (the worker, as it issues the join), read by the main thread only after
 * a refusal or a timeout; the entry the writer stores next is never read, so a read of a slot it
 * is overwriting cannot happen. The times are `performance.timeOrigin + performance.now()` in ms: the
 * same clock on every thread. Layout (one SharedArrayBuffer a rank):
 *
 * | byte | what                                                                       |
 * | ---: | -------------------------------------------------------------------------- |
 * |    0 | count: joins logged so far (Int32, stored after the entry it counts)       |
 * |   64 | entries: CAPACITY Float64 times, join i at (i mod CAPACITY), oldest lost   |
 */
export const JOIN_LOG_CAPACITY = 1024;
const ENTRIES_AT = 64;
export const JOIN_LOG_BYTES = ENTRIES_AT + 8 * JOIN_LOG_CAPACITY;

export class JoinLog {
  private readonly count32: Int32Array;
  private readonly times: Float64Array;
  /** The reader's: joins before this one are not paired any more (realign). */
  private base = 0;
  /** The reader's: how many times the log was realigned, so a count taken before one is known stale. */
  realigns = 0;

  constructor(readonly sab: SharedArrayBuffer) {
    if (sab.byteLength < JOIN_LOG_BYTES)
      throw new Error(`JoinLog: the buffer has ${sab.byteLength} bytes, under the ${JOIN_LOG_BYTES} it needs`);
    this.count32 = new Int32Array(sab, 0, 1);
    this.times = new Float64Array(sab, ENTRIES_AT, JOIN_LOG_CAPACITY);
  }

  static create(): JoinLog {
    return new JoinLog(new SharedArrayBuffer(JOIN_LOG_BYTES));
  }

  /** The writer: one more join enqueued, at `timeMs` on the shared clock. */
  note(timeMs: number): void {
    const n = this.count32[0]!;
    this.times[n % JOIN_LOG_CAPACITY] = timeMs;
    Atomics.store(this.count32, 0, (n + 1) | 0);
  }

  /** The reader's: joins logged since the last realign. */
  count(): number {
    return Atomics.load(this.count32, 0) - this.base;
  }

  /** The reader's: join i since the last realign, or undefined when it is not logged (yet, or any more). */
  timeOf(i: number): number | undefined {
    const n = Atomics.load(this.count32, 0),
      at = this.base + i;
    return i < 0 || at >= n || at <= n - JOIN_LOG_CAPACITY ? undefined : this.times[at % JOIN_LOG_CAPACITY];
  }

  /** The reader's, with the worker drained: number joins from the next one on. */
  realign(): void {
    this.base = Atomics.load(this.count32, 0);
    this.realigns++;
  }
}

/** This thread's origin of `performance.now()`, read once: it is fixed for the thread's life. */
const ORIGIN = performance.timeOrigin;

/** The shared clock a worker stamps with. */
export function joinClockMs(): number {
  return ORIGIN + performance.now();
}

const ms = (x: number): string => `${x < 10 ? x.toFixed(2) : x.toFixed(0)} ms`;

/**
 * What two ranks' logs say about their joins from index `from` on (by default as far back as both
 * still hold): which rank is behind, and the join whose halves were enqueued furthest apart; ''
 * where neither rank enqueued one.
 */
export function describeJoinHalves(logs: readonly JoinLog[], from = 0, now = joinClockMs()): string {
  if (logs.length !== 2) return '';
  const [a, b] = [logs[0]!.count(), logs[1]!.count()];
  const parts: string[] = [];
  if (a !== b) {
    const [ahead, behind] = a > b ? [0, 1] : [1, 0];
    const first = logs[ahead]!.timeOf(Math.min(a, b));
    parts.push(
      `rank ${behind} has enqueued ${Math.min(a, b)} joins that wait on the device and rank ${ahead} ` +
        `${Math.max(a, b)}: ${Math.abs(a - b)} of rank ${behind}'s halves not enqueued (the newest, unless ` +
        `one was left out)` +
        (first === undefined ? '' : `, rank ${ahead}'s join ${Math.min(a, b)} enqueued ${ms(now - first)} ago`),
    );
  }
  const end = Math.min(a, b);
  const start = Math.max(from, end - JOIN_LOG_CAPACITY + 1, 0);
  let worst = -1,
    gap = 0,
    late = 0;
  const gaps: number[] = [];
  for (let i = start; i < end; i++) {
    const t0 = logs[0]!.timeOf(i),
      t1 = logs[1]!.timeOf(i);
    if (t0 === undefined || t1 === undefined) continue;
    const d = Math.abs(t1 - t0);
    gaps.push(d);
    if (worst < 0 || d > gap) [worst, gap, late] = [i, d, t1 > t0 ? 1 : 0];
  }
  if (worst >= 0) {
    gaps.sort((x, y) => x - y);
    parts.push(
      `of joins ${start} to ${end - 1}, the halves furthest apart were join ${worst}'s: rank ${late} enqueued ` +
        `its half ${ms(gap)} after rank ${1 - late} (the median gap ${ms(gaps[gaps.length >> 1]!)})`,
    );
  }
  return parts.join('; ');
}
