/**
 * When a worker issued each of its joins that wait on the device (`ll`, `oneshot`): what a
 * refused join or a stalled step needs to say whether one rank's half came late from its host
 * (issued late, or not yet) or from the device (both halves issued together, one run late).
 * Both ranks issue the same such joins in the same order, so a join's two halves are the entries
 * of the same index in the two ranks' logs, for as long as both ranks issued every half.
 *
 * Where they did not, the pairing says nothing: a rank that left one half out (the soak's
 * one-sided fault) has its later halves paired one join off, while on the device a refused LL
 * join keeps its epoch and the later joins still meet. So once the counts differ only the counts
 * are said, and the barrier's reset, which follows a refusal, pairs the logs afresh (realign).
 *
 * A step replayed from a step graph issues no join record: its joins are the graph's, logged
 * once, at the capture. A refused replay says nothing of its halves.
 *
 * One writer (the worker), read by the main thread after a refusal or a timeout, possibly while
 * the worker still writes: a read is kept only if the count, loaded again after it, shows the
 * slot was not rewritten meanwhile. The times are `performance.timeOrigin + performance.now()` in
 * ms, one clock on every thread; a worker stamps a join with its batch's clock (serve-loop.ts,
 * read at the batch's start and every 64 records), so a time is early by at most 64 records'
 * launches (or by a launch that blocked on a full stream), far under the spin bound a late half
 * is measured against. Layout (one SharedArrayBuffer a rank):
 *
 * | byte | what                                                                          |
 * | ---: | ----------------------------------------------------------------------------- |
 * |    0 | count: joins logged (Int32, wrapping; stored after the entry it counts)        |
 * |   64 | entries: CAPACITY Float64 times, join n at n & (CAPACITY - 1); the newest      |
 * |      | CAPACITY - 1 are read (the slot the writer fills next never is)                 |
 */
export const JOIN_LOG_CAPACITY = 1024; // a power of two
const ENTRIES_AT = 64;
export const JOIN_LOG_BYTES = ENTRIES_AT + 8 * JOIN_LOG_CAPACITY;

export class JoinLog {
  private readonly count32: Int32Array;
  private readonly times: Float64Array;
  /** The reader's: the raw count at the last realign; joins before it are not paired any more. */
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

  /** The writer: one more join issued, at `timeMs` on the shared clock. */
  note(timeMs: number): void {
    const n = this.count32[0]!;
    this.times[n & (JOIN_LOG_CAPACITY - 1)] = timeMs;
    Atomics.store(this.count32, 0, (n + 1) | 0);
  }

  /** The reader's: joins logged since the last realign. */
  count(): number {
    return (Atomics.load(this.count32, 0) - this.base) | 0;
  }

  /** The reader's: join i since the last realign, or undefined when it is not logged (yet, or any more). */
  timeOf(i: number): number | undefined {
    const held = (n: number): boolean => i >= 0 && i < n && i > n - JOIN_LOG_CAPACITY;
    if (!held(this.count())) return undefined;
    const t = this.times[(this.base + i) & (JOIN_LOG_CAPACITY - 1)];
    return held(this.count()) ? t : undefined;
  }

  /** The reader's, with the worker drained: number joins from the next one on. */
  realign(): void {
    this.base = Atomics.load(this.count32, 0);
    this.realigns++;
  }
}

/** This thread's origin of `performance.now()`, read once: it is fixed for the thread's life. */
const ORIGIN = performance.timeOrigin;

/** The shared clock: this thread's `performance.now()` reading (by default a fresh one) on it. */
export function joinClockMs(nowMs = performance.now()): number {
  return ORIGIN + nowMs;
}

const ms = (x: number): string => `${x < 10 ? x.toFixed(2) : x.toFixed(0)} ms`;

/**
 * What two ranks' logs say of their joins from index `from` on (`what` names that range): each
 * rank's count where they differ, else the join whose halves were issued furthest apart; then
 * how long ago each rank issued its newest. '' where neither rank issued one.
 */
export function describeJoinHalves(logs: readonly JoinLog[], from: number, what: string, now = joinClockMs()): string {
  if (logs.length !== 2) return '';
  const counts = logs.map((l) => l.count() - from);
  const [a, b] = counts as [number, number];
  if (a <= 0 && b <= 0) return '';
  const parts: string[] = [];
  if (a !== b) {
    const [ahead, behind] = a > b ? [0, 1] : [1, 0];
    parts.push(
      `rank ${behind} issued ${counts[behind]} and rank ${ahead} ${counts[ahead]}: rank ${behind} has not ` +
        `issued a half, or left one out, so the halves are not paired`,
    );
  } else {
    const start = Math.max(0, a - JOIN_LOG_CAPACITY + 1);
    let worst = -1,
      gap = 0,
      late = 0;
    const gaps: number[] = [];
    for (let i = start; i < a; i++) {
      const t0 = logs[0]!.timeOf(from + i),
        t1 = logs[1]!.timeOf(from + i);
      if (t0 === undefined || t1 === undefined) continue;
      const d = Math.abs(t1 - t0);
      gaps.push(d);
      if (worst < 0 || d > gap) [worst, gap, late] = [i, d, t1 > t0 ? 1 : 0];
    }
    parts.push(`each rank issued ${a}`);
    if (worst >= 0) {
      gaps.sort((x, y) => x - y);
      parts.push(
        `the halves furthest apart were join ${worst}'s (of ${start} to ${a - 1}): rank ${late} issued its half ` +
          `${ms(gap)} after rank ${1 - late} (the median gap ${ms(gaps[gaps.length >> 1]!)})`,
      );
    }
  }
  const newest = logs.map((l, r) => {
    const t = counts[r]! > 0 ? l.timeOf(from + counts[r]! - 1) : undefined;
    return t === undefined ? `rank ${r} none` : `rank ${r} ${ms(now - t)} ago`;
  });
  return `${what}: ${parts.join('; ')}; the newest issued ${newest.join(', ')}`;
}
