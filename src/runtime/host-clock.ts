/**
 * The one host clock every thread of the process reads alike: CLOCK_MONOTONIC through
 * `process.hrtime`, in µs since a base the main thread picks. A worker's `performance.now()`
 * counts from that worker's own start, so stamps taken on two threads compare only on this clock.
 */
export function hostClockBase(): bigint {
  return process.hrtime.bigint();
}

/** µs since `base`, exact to the nanosecond for any run shorter than 104 days (2^53 ns). */
export function hostMicros(base: bigint): number {
  return Number(process.hrtime.bigint() - base) / 1000;
}
