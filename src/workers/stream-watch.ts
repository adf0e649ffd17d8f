/**
 * The idle worker's watch over its own stream.
 *
 * A kernel that faults (a device trap, such as expert_down's bounded wait for its group running
 * out, or an illegal address) leaves a sticky error that only the thread's next CUDA call sees.
 * A worker whose ring is empty makes no CUDA call, so the main thread's wait for the step's
 * completion counter ran its whole timeout and could say only that the counter did not move (seen
 * in loopback: "completion counter 0 of rank 0 did not reach 81 in 60000 ms"), not whether the
 * device had failed or was still busy.
 *
 * So once the worker has been idle for IDLE_MS with work it enqueued possibly unfinished, it
 * queries its stream every IDLE_MS: an error faults the ring at once with CUDA's own words, and a
 * stream still busy is timed, so a timed-out wait can say which rank's device work never finished.
 * A decode loop's worker is never idle that long between records, so the hot path makes no extra
 * call; a stream in capture is never queried (that would end the capture).
 */
import type { DeviceStop } from './device-progress.js';
import type { WorkerContext } from './worker-context.js';

/** Idle time before the first query, and between queries. */
export const IDLE_MS = 50;

/** What the watch last saw of the stream. */
export interface StreamState {
  /** Records this worker has enqueued (its ring's tail). */
  enqueued: number;
  /** The stream had unfinished work at the last query, or work enqueued since. */
  busy: boolean;
  /** Since the last record was enqueued, ms (0 when not busy). */
  busyForMs: number;
  /**
   * Where this rank's LL server has run jobs: the host's words of its protocol (addon llServeStats:
   * jobs issued and done, the grid's state), so a stream that waits on a served join names where
   * the job stopped. Not the deep read of the device's words: that is a copy and a synchronize,
   * which must not block the worker that explains a hang.
   */
  llServer?: Record<string, number | boolean>;
  /** With MEMRA_DEVICE_PROGRESS=1 (device-progress.ts), the record the device stopped before. */
  stop?: DeviceStop;
}

export class StreamWatch {
  /** Work was enqueued that no query has yet seen finished. */
  private pending = false;
  private lastRecordMs = 0;
  private lastQueryMs = 0;

  /** After a batch of records ran: the stream may now hold unfinished work. */
  enqueued(nowMs: number): void {
    this.pending = true;
    this.lastRecordMs = nowMs;
  }

  /**
   * While the ring is empty: query the stream when it is due. Throws the device's error (the
   * binding names the call, the device and the CUDA error).
   */
  poll(ctx: WorkerContext, nowMs: number): void {
    if (nowMs - this.lastRecordMs < IDLE_MS || nowMs - this.lastQueryMs < IDLE_MS) return;
    this.query(ctx, nowMs);
  }

  /** The stream as a fresh query finds it (the last query's answer while it is capturing). */
  state(ctx: WorkerContext, nowMs: number): StreamState {
    this.query(ctx, nowMs);
    const state: StreamState = {
      enqueued: ctx.ring.view.tail() >>> 0,
      busy: this.pending,
      busyForMs: this.pending ? Math.round(nowMs - this.lastRecordMs) : 0,
    };
    if (ctx.llReady) {
      const server = ctx.dev.llServeStats();
      if (server.jobs > 0) state.llServer = server;
    }
    const stop = ctx.progress?.where(ctx.dev);
    if (stop) state.stop = stop;
    return state;
  }

  private query(ctx: WorkerContext, nowMs: number): void {
    if (!this.pending || ctx.stream === 0 || ctx.capturing) return;
    this.lastQueryMs = nowMs;
    if (ctx.dev.streamQuery(ctx.stream)) this.pending = false;
  }
}
