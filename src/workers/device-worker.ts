/**
 * The pinned device worker's entry: binds one device once, is the only thread that touches it,
 * and turns ring records into work on its stream. Hot path: the ring (serve-loop.ts,
 * record-ops.ts). Cold path: comlink calls on the control port (device-control.ts), with the
 * fault hooks (fault-hooks.ts) beside them.
 */
import { workerData } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { portEndpoint } from './comlink-port.js';
import { deviceControl } from './device-control.js';
import { faultHooks } from './fault-hooks.js';
import { WorkerContext } from './worker-context.js';
import type { WorkerInit } from './worker-init.js';

const init = workerData as WorkerInit;
const control = { ...deviceControl(new WorkerContext(init)), ...faultHooks };

export type DeviceControl = typeof control;

Comlink.expose(control, portEndpoint(init.control));
