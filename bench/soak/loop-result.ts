/**
 * What one soak loop reports: what ran (asked and actually run, and why it stopped short), the
 * resources at its start and end, and each thing it checked, with the figure, the bound and
 * whether it held. The results file stores these as they are; the README's reliability table is
 * rendered from them.
 */
import type { Snapshot } from './resources.js';

export interface Check {
  /** Short: `tokens`, `device memory`, `p99 drift`, ... */
  name: string;
  /** The figure measured, as shown. */
  value: string;
  /** What it had to be. */
  limit: string;
  pass: boolean;
}

export interface LoopResult {
  /** `long decode`, `cycles`, `fault: worker death`, ... */
  loop: string;
  /** The layout, transport and mode: `unsharded`, `ll+graph`, ... */
  variant: string;
  /** The machine label the loop ran as (`1xH200`, or `1xH200-loopback` with both ranks on one device). */
  machine: string;
  loopback: boolean;
  preset: string;
  unit: 'steps' | 'cycles' | 'faults' | 'inputs';
  asked: number;
  ran: number;
  /** Why fewer ran than were asked: the loop's share of `--time-limit` ran out, or an error. */
  cut?: string;
  seconds: number;
  start?: Snapshot;
  end?: Snapshot;
  checks: Check[];
  /** Every check held, and nothing threw. */
  pass: boolean;
  /** What threw, if something did. */
  error?: string;
  /** Figures worth keeping that are not checks (the first failures, per-fault timings). */
  notes: string[];
}

const MiB = 2 ** 20;

export function fmtBytes(b: number): string {
  const a = Math.abs(b);
  const s = a >= 2 ** 30 ? `${(a / 2 ** 30).toFixed(2)} GiB` : a >= MiB ? `${(a / MiB).toFixed(1)} MiB` : `${a} B`;
  return b < 0 ? `-${s}` : s;
}

const signed = (v: number, text: string): string => (v > 0 ? `+${text}` : text);

/** `name` must not grow or shrink by more than `tolerance` bytes from `start` to `end`. */
export function flatBytes(name: string, start: number, end: number, tolerance: number): Check {
  const d = end - start;
  return {
    name,
    value: `Δ ${signed(d, fmtBytes(d))}`,
    limit: `within ${fmtBytes(tolerance)}`,
    pass: Math.abs(d) <= tolerance,
  };
}

/** A count (descriptors, threads) back where it started. */
export function sameCount(name: string, start: number, end: number): Check {
  const d = end - start;
  return { name, value: `${start} → ${end}`, limit: 'unchanged', pass: d === 0 };
}

/**
 * Threads no more than at the start: the start snapshot may count a thread of the loop before
 * that is still ending (seen on a 2-core CI runner: 12 -> 11 over the invalid-input loop); a
 * thread left behind is what leaks. The end snapshot waits for ending threads (resources.ts
 * closingSnapshot).
 */
export function noMoreThreads(start: number, end: number): Check {
  return { name: 'threads', value: `${start} → ${end}`, limit: 'none added', pass: end <= start };
}

/**
 * The resource checks every loop makes between two snapshots, with `rss`'s (rss.ts) after device
 * memory. RSS is checked where a loop runs long after a warm-up (decode, cycles); a fault loop's
 * few repetitions move it by what the heap and the allocator keep, which says nothing of a leak,
 * so there it is only reported.
 */
export function resourceChecks(start: Snapshot, end: Snapshot, rss: Check[] = []): Check[] {
  return [
    flatBytes('device memory', start.deviceUsedBytes, end.deviceUsedBytes, MiB),
    ...rss,
    sameCount('fds', start.fds, end.fds),
    noMoreThreads(start.threads, end.threads),
  ];
}

/** RSS at the start and end, for the notes of a loop that does not check it. */
export function rssNote(start: Snapshot, end: Snapshot): string {
  return `RSS ${fmtBytes(start.rssBytes)} at the start, ${fmtBytes(end.rssBytes)} at the end (reported, not checked)`;
}

/** `bad` of `of` went wrong; none may. */
export function noneWrong(name: string, bad: number, of: number, what: string): Check {
  return { name, value: `${bad} of ${of} ${what} wrong`, limit: 'none', pass: bad === 0 && of > 0 };
}

/** Iterations a loop runs before its starting figures are taken: 5% of them, at least 1, at most `cap`. */
export function warmUp(count: number, cap: number): number {
  return Math.min(cap, Math.max(1, Math.ceil(count / 20)));
}

/** The warm-up rule and what it came to, for a check's bound. */
export function warmUpText(n: number, cap: number, unit: string): string {
  return `${n} ${unit} (5% of the loop, at least 1, at most ${cap})`;
}

export function finish(r: Omit<LoopResult, 'pass'>): LoopResult {
  return { ...r, pass: r.error === undefined && r.checks.length > 0 && r.checks.every((c) => c.pass) };
}
