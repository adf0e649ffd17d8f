/**
 * What a soak loop must give back: the process's resident memory, open file descriptors and
 * threads (Linux's /proc/self), and the device memory in use (cudaMemGetInfo, through a worker's
 * `memInfo` control call: the main thread never touches a device).
 *
 * The device's figure with nothing of memra's open comes from a probe: a one-worker runtime on
 * the device, opened, asked and closed. Its own footprint (a stream and a registered host page)
 * is the same every time, so two probes agree to the byte unless something between them kept
 * device memory. A probe cannot run while a session holds the device (the device claim refuses
 * a second, non-loopback binding), so loops take it before they open and after they close.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { Runtime } from '../../src/runtime/runtime.js';
import type { Session } from '../../src/decode/session.js';
import type { BackendKind } from '../../src/runtime/device-api.js';

export interface HostResources {
  rssBytes: number;
  /** The main thread's JS heap in use after a collection: a leak of JS objects shows here first. */
  heapUsedBytes: number;
  fds: number;
  threads: number;
}

export interface Snapshot extends HostResources {
  /** Device bytes in use (total - free): with nothing open but a probe, or inside a session. */
  deviceUsedBytes: number;
  /** Seconds since the soak began. */
  atS: number;
}

const epoch = performance.now();

/** A collection first where `--expose-gc` allows one, so RSS is not what the next GC frees. */
export function hostResources(): HostResources {
  (globalThis as { gc?: () => void }).gc?.();
  const status = readFileSync('/proc/self/status', 'utf8');
  const threads = Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? NaN);
  // readdirSync opens the directory itself while it lists it: that one is not the process's.
  const fds = readdirSync('/proc/self/fd').length - 1;
  const m = process.memoryUsage();
  return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, fds, threads };
}

async function usedBy(rt: Runtime): Promise<number> {
  const m = await rt.ranks[0].control.call('memInfo');
  return m.total - m.free;
}

/** Device bytes in use with nothing of memra's open: a probe runtime's figure. */
export async function deviceBase(backend: BackendKind, ordinal = 0): Promise<number> {
  const rt = await Runtime.open({ backend, devices: [ordinal], pinWorkers: false });
  try {
    return await usedBy(rt);
  } finally {
    await rt.close();
  }
}

/** Device bytes in use while `s` is open, as its rank 0 sees them. */
export function sessionDeviceUsed(s: Session): Promise<number> {
  return usedBy(s.runtime);
}

export function snapshot(deviceUsedBytes: number): Snapshot {
  return { ...hostResources(), deviceUsedBytes, atS: (performance.now() - epoch) / 1000 };
}

/**
 * A loop's closing snapshot, taken once the thread count is back to the start's or `settleMs` has
 * passed: a thread a close let go can still be ending when the close resolves (seen on a 2-core
 * machine: 11 -> 12 threads over the worker-death loop, once in four runs of the full suite, and
 * not in 60 repetitions of that loop alone). A thread still there after the wait is a leak.
 */
export async function closingSnapshot(
  deviceUsedBytes: number,
  startThreads: number,
  settleMs = 2000,
): Promise<Snapshot> {
  const until = performance.now() + settleMs;
  let s = snapshot(deviceUsedBytes);
  while (s.threads > startThreads && performance.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
    s = snapshot(deviceUsedBytes);
  }
  return s;
}
