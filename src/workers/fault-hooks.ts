/**
 * Failure injection for the control plane's own tests and the soak's worker-death fault: a call
 * that never answers in time, an uncaught error on the worker's thread, and a stream whose work
 * fails on the device. Kept out of the control calls (device-control.ts) and loaded by the
 * worker's entry only when the runtime was opened with `faultHooks: true`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerContext } from './worker-context.js';

export function faultHooks(ctx: WorkerContext) {
  return {
    async hang(ms: number): Promise<void> {
      await sleep(ms);
    },
    async crash(message: string): Promise<void> {
      setImmediate(() => {
        throw new Error(message);
      });
    },
    /**
     * From now on this worker's stream queries throw `message`, as CUDA's do once a kernel has
     * faulted (a sticky error: every later call of the thread sees it).
     */
    async failStream(message: string): Promise<void> {
      ctx.dev.streamQuery = () => {
        throw new Error(message);
      };
    },
  };
}

export type FaultHooks = ReturnType<typeof faultHooks>;
