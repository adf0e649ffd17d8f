/**
 * Failure injection for the control plane's own tests and the soak's worker-death fault: a call
 * that never answers in time, and an uncaught error on the worker's thread. Kept out of the
 * control calls (device-control.ts) and loaded by the worker's entry only when the runtime was
 * opened with `faultHooks: true`.
 */
import { setTimeout as sleep } from 'node:timers/promises';

export const faultHooks = {
  async hang(ms: number): Promise<void> {
    await sleep(ms);
  },
  async crash(message: string): Promise<void> {
    setImmediate(() => {
      throw new Error(message);
    });
  },
};

export type FaultHooks = typeof faultHooks;
