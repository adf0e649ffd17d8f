/**
 * The main thread's side of one pinned worker's control plane: comlink calls over a dedicated
 * MessagePort, each with a timeout, and every pending call rejected the moment the worker errors
 * or exits, so no caller waits on a thread that is gone.
 */
import { MessageChannel, Worker } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { portEndpoint } from './comlink-port.js';
import type { DeviceControl } from './device-worker.js';
import type { WorkerFault, WorkerInit } from './worker-init.js';

export class ControlError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
    this.name = 'ControlError';
  }
}

type Method = keyof DeviceControl;
type Result<K extends Method> = Awaited<ReturnType<DeviceControl[K]>>;

const WORKER_URL = new URL('./device-worker.js', import.meta.url);

/** Device workers started and not yet exited, process-wide. */
const live = new Set<WorkerHandle>();

/**
 * How many device workers are running. A runtime left open keeps its workers, and with them the
 * process, alive; the test suites check this is 0 when they end, naming the leak.
 */
export function liveWorkers(): number {
  return live.size;
}

/**
 * End every device worker still running, skipping the orderly close (no drain): the last resort
 * of a test run that found a leak and must still exit.
 */
export async function endLiveWorkers(): Promise<void> {
  await Promise.all([...live].map((w) => w.terminate()));
}

export class WorkerHandle {
  readonly tag: string;
  private readonly worker: Worker;
  private readonly remote: Comlink.Remote<DeviceControl>;
  private readonly pending = new Set<(e: Error) => void>();
  private lastError: Error | undefined;
  /** Set once the thread has exited; every later call rejects with it. */
  dead: Error | undefined;
  readonly exited: Promise<void>;

  constructor(
    init: Omit<WorkerInit, 'control'>,
    private readonly callTimeoutMs: number,
    onFault: (f: WorkerFault) => void,
    onExit: (e: Error) => void,
  ) {
    this.tag = `worker ${init.rank} (device ${init.ordinal})`;
    const { port1, port2 } = new MessageChannel();
    this.worker = new Worker(WORKER_URL, {
      workerData: { ...init, control: port2 } satisfies WorkerInit,
      transferList: [port2],
    });
    live.add(this);
    this.remote = Comlink.wrap<DeviceControl>(portEndpoint(port1));
    this.worker.on('message', (m: WorkerFault) => {
      if (m?.type === 'fault') onFault(m);
    });
    this.worker.on('error', (e) => {
      this.lastError = e;
    });
    this.exited = new Promise((resolve) => {
      this.worker.on('exit', (code) => {
        live.delete(this);
        const why = this.lastError ? `: ${this.lastError.message}` : '';
        this.dead = new ControlError(`${this.tag} exited (code ${code})${why}`, 'ERR_WORKER_EXITED');
        for (const reject of this.pending) reject(this.dead);
        this.pending.clear();
        port1.close();
        onExit(this.dead);
        resolve();
      });
    });
  }

  /** One control call, rejected on timeout or when the worker dies. */
  call<K extends Method>(name: K, ...args: Parameters<DeviceControl[K]>): Promise<Result<K>> {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise<Result<K>>((resolve, reject) => {
      const fail = (e: Error): void => {
        clearTimeout(timer);
        reject(e);
      };
      const timer = setTimeout(() => {
        this.pending.delete(fail);
        reject(
          new ControlError(
            `${this.tag}: control call '${String(name)}' timed out after ${this.callTimeoutMs} ms`,
            'ERR_CONTROL_TIMEOUT',
          ),
        );
      }, this.callTimeoutMs);
      this.pending.add(fail);
      const fn = this.remote[name] as unknown as (...a: unknown[]) => Promise<Result<K>>;
      fn(...args).then(
        (v) => {
          clearTimeout(timer);
          this.pending.delete(fail);
          resolve(v);
        },
        (e: unknown) => {
          clearTimeout(timer);
          this.pending.delete(fail);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }

  async terminate(): Promise<void> {
    await this.worker.terminate();
    await this.exited;
  }
}
