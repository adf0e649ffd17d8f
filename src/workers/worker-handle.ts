/**
 * The main thread's side of one pinned worker's control plane: comlink calls over a dedicated
 * MessagePort, each with a timeout, and every pending call rejected the moment the worker errors
 * or exits, so no caller waits on a thread that is gone.
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { portEndpoint } from './comlink-port.js';
import { MemraError } from '../api/errors.js';
import type { DeviceControl } from './device-worker.js';
import type { WorkerFault, WorkerInit } from './worker-init.js';
import { workerExecArgvChoices } from './worker-exec-argv.js';
import { RingView } from './ring.js';

/** A control call that failed: its worker errored, exited or timed out, or the call itself threw. */
export class ControlError extends MemraError<'ERR_WORKER_EXITED' | 'ERR_CONTROL_TIMEOUT'> {
  constructor(
    message: string,
    code: ControlError['code'],
    /** The rank whose worker the call went to. */
    readonly rank?: number,
  ) {
    super(message, code);
  }
}

type Method = keyof DeviceControl;
type Result<K extends Method> = Awaited<ReturnType<DeviceControl[K]>>;

const WORKER_URL = new URL('./device-worker.js', import.meta.url);

/** The worker, started with the first of workerExecArgvChoices that Node takes. */
function startWorker(workerData: WorkerInit, port: MessagePort): Worker {
  const choices = workerExecArgvChoices();
  for (const [i, execArgv] of choices.entries()) {
    try {
      return new Worker(WORKER_URL, { workerData, transferList: [port], ...(execArgv ? { execArgv } : {}) });
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || i === choices.length - 1) throw e;
    }
  }
  throw new Error('unreachable: no execArgv choice');
}

/** Device workers started and not yet exited, process-wide. */
const live = new Set<WorkerHandle>();

/**
 * How many device workers are running. A runtime left open keeps its workers until the process
 * runs out of work (runtime/exit-guard.ts closes it then); the test suites check this is 0 when
 * they end, naming the leak.
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
  readonly rank: number;
  private readonly worker: Worker;
  private readonly remote: Comlink.Remote<DeviceControl>;
  /** The worker's ring, whose doorbell brings a call to its event loop without waiting out a sleep. */
  private readonly ring: RingView;
  private readonly pending = new Set<(e: Error) => void>();
  /**
   * Set once the thread is dying or gone (an uncaught error, terminate(), its exit); every later
   * call rejects with it.
   */
  dead: ControlError | undefined;
  /** Settles once the thread has exited, after its env teardown released its device. */
  readonly exited: Promise<void>;

  constructor(
    init: Omit<WorkerInit, 'control'>,
    private readonly callTimeoutMs: number,
    onFault: (f: WorkerFault) => void,
    private readonly onExit: (e: Error) => void,
  ) {
    this.tag = `worker ${init.rank} (device ${init.ordinal})`;
    this.rank = init.rank;
    this.ring = new RingView(init.ring, `ring ${init.rank}`);
    const { port1, port2 } = new MessageChannel();
    this.worker = startWorker({ ...init, control: port2 }, port2);
    live.add(this);
    this.remote = Comlink.wrap<DeviceControl>(portEndpoint(port1));
    this.worker.on('message', (m: WorkerFault) => {
      if (m?.type === 'fault') onFault(m);
    });
    // A thread that threw is as good as gone: say so now, not at its exit, which waits for the
    // env teardown to drain its device (in loopback that is the other rank's work too, which may
    // be waiting out its spin bound on this one).
    this.worker.on('error', (e) => this.die(`died: ${e.message}`));
    this.exited = new Promise((resolve) => {
      this.worker.on('exit', (code) => {
        live.delete(this);
        this.die(`exited (code ${code})`);
        port1.close();
        resolve();
      });
    });
    // An idle worker does not keep the process alive: a script that never closes its session
    // still exits (runtime/exit-guard.ts closes it first). A call in flight keeps the process
    // alive by its timeout timer; a step by its polls. After the listeners: adding one refs.
    this.worker.unref();
    port1.unref();
  }

  /** The first report of the thread's end rejects every pending call and tells the runtime, once. */
  private die(how: string): void {
    if (this.dead) return;
    this.dead = new ControlError(`${this.tag} ${how}`, 'ERR_WORKER_EXITED', this.rank);
    for (const reject of this.pending) reject(this.dead);
    this.pending.clear();
    this.onExit(this.dead);
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
            this.rank,
          ),
        );
      }, this.callTimeoutMs);
      this.pending.add(fail);
      const fn = this.remote[name] as unknown as (...a: unknown[]) => Promise<Result<K>>;
      const reply = fn(...args);
      // After the post: comlink sends the message synchronously, so the bell comes after it.
      this.ring.ringDoorbell();
      reply.then(
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

  /**
   * End the thread (after its orderly close, or instead of it); settles once it has exited. `how`
   * completes "worker r (device d) ..." in what later calls reject with.
   */
  async terminate(how = 'was terminated'): Promise<void> {
    this.die(how);
    await this.worker.terminate();
    await this.exited;
  }
}
