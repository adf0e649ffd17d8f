/**
 * The pinned device worker's entry: binds one device once, is the only thread that touches it,
 * and turns ring records into work on its stream. Hot path: the ring (serve-loop.ts,
 * record-ops.ts). Cold path: comlink calls on the control port (device-control.ts), with the
 * fault hooks (fault-hooks.ts) beside them where the runtime asked for them.
 */
import { workerData } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { portEndpoint } from './comlink-port.js';
import { deviceControl } from './device-control.js';
import type { FaultHooks } from './fault-hooks.js';
import { WorkerContext, workerDevice } from './worker-context.js';
import type { WorkerInit } from './worker-init.js';

const init = workerData as WorkerInit;
const ctx = new WorkerContext(init, await workerDevice(init));

/** A hook this runtime did not ask for: the call is refused, saying how to have it. */
function refused(name: keyof FaultHooks): () => Promise<never> {
  return async () => {
    throw new Error(
      `${ctx.tag}: '${name}' is a fault hook, for tests and the soak; open the runtime with faultHooks: true (RuntimeOptions.faultHooks) to call it`,
    );
  };
}

// Loaded only when asked: a production worker holds no call that hangs it or kills its thread.
// The control port queues what arrives before expose() below.
const hooks: FaultHooks = init.faultHooks
  ? (await import('./fault-hooks.js')).faultHooks(ctx)
  : { hang: refused('hang'), crash: refused('crash'), failStream: refused('failStream') };
const control = { ...deviceControl(ctx), ...hooks };

export type DeviceControl = typeof control;

Comlink.expose(control, portEndpoint(init.control));
