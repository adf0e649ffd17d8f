/**
 * Where a stream's device work stopped, record by record: a diagnosis mode for a step whose device
 * work never finishes (docs/reliability.md: it found the loopback stall).
 *
 * The stream watch can say only that a stream is still busy, and the join log that both ranks
 * issued every join: neither says which record the device is stuck in. With
 * MEMRA_DEVICE_PROGRESS=1 the worker records an ordering-only event after each record it enqueues,
 * and a timed-out wait's report names the newest record the device has finished and the one after
 * it, which it has not. An event record costs the host a microsecond or two, so the mode is off by
 * default and the per-record path then pays one check. No event is recorded while this worker's
 * stream captures a graph: a plain record there only marks a capture dependency and records
 * nothing the device runs, so it could not say where the device is.
 */
import type { DeviceApi } from '../runtime/device-api.js';
import type { EventHandle, StreamHandle } from '../runtime/binding.js';
import { opName } from './ops.js';

/**
 * Records marked, newest first, that a report can look back over: more than a rank enqueues in one
 * `bench` step (about 500 records with `ll` joins, 1200 with `host`), since the walk runs at most a
 * step ahead of the device. An event re-recorded past the window only moves the window. The CPU
 * reference, whose streams finish each record as it comes, takes a smaller one: its events are
 * slots of a fixed table (MAX_EVENTS, runtime/cpu-world.ts) that the runtime's own events share.
 */
export const PROGRESS_WINDOW = 2048;
export const CPU_PROGRESS_WINDOW = 128;

export interface MarkedRecord {
  seq: number;
  op: string;
}

/** The device's place in the marked records: `finished` is absent when none in the window has. */
export interface DeviceStop {
  finished?: MarkedRecord;
  pending: MarkedRecord;
  /** Records the window held. */
  window: number;
}

export class DeviceProgress {
  private readonly events: EventHandle[] = [];
  private readonly seqs: Uint32Array;
  private readonly ops: Int32Array;
  private marked = 0;

  constructor(readonly window = PROGRESS_WINDOW) {
    this.seqs = new Uint32Array(window);
    this.ops = new Int32Array(window);
  }

  /** After record `seq` (op `op`) was enqueued on `stream`, outside a capture. */
  after(dev: DeviceApi, stream: StreamHandle, seq: number, op: number): void {
    const i = this.marked % this.window;
    if (i === this.events.length) this.events.push(dev.eventCreate(false));
    dev.eventRecord(this.events[i]!, stream);
    this.seqs[i] = seq;
    this.ops[i] = op;
    this.marked++;
  }

  /**
   * The newest marked record the device finished and the one after it; undefined when it has
   * finished every one (or none was marked), or when an event cannot be asked. Queries only: never
   * blocks. A record made while the stream was in a capture it joined from the peer (a plain
   * record there marks a dependency and records nothing) may make its event's query fail: the
   * report then goes without these words rather than without the stream's state.
   */
  where(dev: DeviceApi): DeviceStop | undefined {
    const n = Math.min(this.marked, this.window);
    let pending: MarkedRecord | undefined;
    for (let k = 1; k <= n; k++) {
      const i = (this.marked - k) % this.window;
      const here = { seq: this.seqs[i]!, op: opName(this.ops[i]!) };
      let done: boolean;
      try {
        done = dev.eventQuery(this.events[i]!);
      } catch {
        return undefined;
      }
      if (done) return pending && { finished: here, pending, window: n };
      pending = here;
    }
    return pending && { pending, window: n };
  }

  /** Before the device is released (close): every event this worker made. */
  destroy(dev: DeviceApi): void {
    for (const e of this.events) dev.eventDestroy(e);
    this.events.length = 0;
    this.marked = 0;
  }
}

/** The mode as the environment sets it for a worker of this backend. */
export function deviceProgressFromEnv(backend: string): DeviceProgress | undefined {
  if (process.env.MEMRA_DEVICE_PROGRESS !== '1') return undefined;
  return new DeviceProgress(backend === 'cpu' ? CPU_PROGRESS_WINDOW : PROGRESS_WINDOW);
}
