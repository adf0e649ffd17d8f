/**
 * The machine the GPU suite runs on, and what its two-rank suites open there. Two or more GPUs:
 * devices 0 and 1. One GPU: loopback, both ranks on device 0 (`MEMRA_LOOPBACK=1` forces that on
 * a machine of two). None: every suite fails, because an empty pass proves nothing.
 *
 * Every GPU test file calls `gpuSuite()` first: it registers, once per run, a root hook that
 * fails without a GPU and says what the run will cover, and one that fails if a device worker is
 * still running when the suite ends (a runtime left open keeps mocha from exiting), ending it.
 */
import { loadBinding } from '../../src/runtime/binding.js';
import type { RuntimeOptions } from '../../src/runtime/runtime.js';
import { endLiveWorkers, liveWorkers } from '../../src/workers/worker-handle.js';

function loopbackAsked(v: string | undefined): boolean {
  if (v === undefined || v === '' || v === '0') return false;
  if (v === '1') return true;
  throw new RangeError(`MEMRA_LOOPBACK must be 1 (two-rank suites in loopback on device 0) or 0, got '${v}'`);
}

/** CUDA devices visible. */
export const GPUS = loadBinding().deviceCount();
/** The two-rank suites run with both ranks on device 0. */
export const LOOPBACK = GPUS === 1 || loopbackAsked(process.env.MEMRA_LOOPBACK);
/** Runtime options of every two-rank runtime the GPU suite opens. */
export const PAIR: Pick<RuntimeOptions, 'devices' | 'loopback'> = LOOPBACK
  ? { devices: [0, 0], loopback: true }
  : { devices: [0, 1] };
/** How a test title names where its two ranks run. */
export const PAIR_NAME = LOOPBACK ? 'two ranks in loopback on device 0' : 'two GPUs';

const WHY_LOOPBACK = GPUS === 1 ? 'one GPU' : 'MEMRA_LOOPBACK=1';

/** `it`, or a visible skip saying why, for a test that needs two distinct devices. */
export function itTwoDevices(title: string, fn: Mocha.AsyncFunc): void {
  if (LOOPBACK) it.skip(`${title} [needs two devices; skipped in loopback (${WHY_LOOPBACK})]`, fn);
  else it(title, fn);
}

/** `it` for a test of loopback itself; skipped, saying why, where the two-rank suites use two devices. */
export function itLoopback(title: string, fn: Mocha.AsyncFunc): void {
  if (LOOPBACK) it(title, fn);
  else
    it.skip(
      `${title} [loopback only; the two-rank suites use two devices here (MEMRA_LOOPBACK=1 runs them in loopback)]`,
      fn,
    );
}

let registered = false;

export function gpuSuite(): void {
  if (registered) return;
  registered = true;
  before(() => {
    if (GPUS === 0) {
      throw new Error(
        `the GPU suite needs a CUDA device and this machine shows none (driver version ${loadBinding().driverVersion()}); run it on a GPU machine`,
      );
    }
    console.log(
      `  GPU suite on ${GPUS} CUDA device(s): one-GPU tests, and the two-rank suites on ${LOOPBACK ? `both ranks in loopback on device 0 (${WHY_LOOPBACK})` : 'devices 0 and 1'}`,
    );
  });
  after(async () => {
    const n = liveWorkers();
    if (n === 0) return;
    await endLiveWorkers(); // so the process still exits
    throw new Error(
      `${n} device worker(s) still running after the GPU suite: a runtime was opened and never closed (the process would not have exited)`,
    );
  });
}
