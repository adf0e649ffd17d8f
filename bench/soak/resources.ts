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
 * RSS sampled through a loop, to tell a leak (a steady climb) from what the heap and the
 * allocator keep and give back (steps up and down): the least-squares slope over the samples.
 */
export class RssSeries {
  private readonly at: number[] = [];
  private readonly rss: number[] = [];
  readonly every: number;

  constructor(count: number, points = 10) {
    this.every = Math.max(1, Math.floor(count / points));
  }

  /** After iteration `i` (0-based), every `every`-th. */
  maybeSample(i: number): void {
    if ((i + 1) % this.every !== 0) return;
    this.at.push(i + 1);
    this.rss.push(hostResources().rssBytes);
  }

  /** Bytes a loop iteration, or NaN with fewer than three samples. */
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
    return num / den;
  }

  /** The samples and the slope, for a loop's notes. */
  describe(unit: string): string {
    const mib = this.rss.map((b) => (b / 2 ** 20).toFixed(1)).join(', ');
    const s = this.slope();
    return `RSS every ${this.every} ${unit} (MiB): ${mib || 'none'}; trend ${Number.isNaN(s) ? 'n/a' : `${(s / 1024).toFixed(1)} KiB a ${unit.replace(/s$/, '')}`}`;
  }
}
