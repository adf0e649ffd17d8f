/**
 * A pinned worker's serve loop: it takes records from its ring as they come, waits (bounded) for
 * the peer's record where one says so (the cross-rank handshake), and on a failure faults the
 * ring and reports the record it refused.
 *
 * The loop never blocks the thread's event loop for long: it spins briefly for records, then
 * sleeps in short `Atomics.wait` slices with a turn of the event loop between them, so control
 * calls are answered while the ring is idle; under a continuous stream of records it turns the
 * loop once a millisecond for the same reason.
 */
import { parentPort } from 'node:worker_threads';
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises';
import type { RecordRef } from './ring.js';
import { RingState, seqDiff } from './ring-layout.js';
import { joinClockMs } from './join-log.js';
import { Op, opName } from './ops.js';
import { carriesMarks } from './profile-board.js';
import type { WorkerFault } from './worker-init.js';
import { execute, recordMarks } from './record-ops.js';
import { Refusal, type WorkerContext } from './worker-context.js';

/** Wait (bounded) until the peer has enqueued its record `seq`: the cross-device handshake. */
function awaitPeer(ctx: WorkerContext, seq: number, mine: number): void {
  if (!ctx.peerRing)
    throw new Refusal(
      `record ${mine >>> 0} waits for a peer's record ${seq >>> 0}, but this runtime has one rank: a cross-rank wait needs two`,
      'ERR_NO_PEER',
    );
  if (ctx.peerRing.reached(seq)) return;
  const start = performance.now();
  const spinEnd = start + ctx.init.spinMicros / 1000;
  const deadline = start + ctx.init.handshakeTimeoutMs;
  for (;;) {
    const seen = ctx.peerRing.tail();
    if (seqDiff(seen, seq) >= 0) return;
    const peerState = ctx.peerRing.state();
    if (peerState !== RingState.Running) {
      const f = peerState === RingState.Faulted ? ctx.peerRing.fault() : undefined;
      throw new Refusal(
        `record ${mine >>> 0} waits for the peer's record ${seq >>> 0}, but the peer worker has stopped (it enqueued up to ${seen >>> 0})` +
          (f ? `: it refused record ${f.seq} (${f.reason})` : ''),
        'ERR_PEER_STOPPED',
      );
    }
    const t = performance.now();
    if (t > deadline) {
      throw new Refusal(
        `handshake timed out after ${ctx.init.handshakeTimeoutMs} ms: record ${mine >>> 0} waits for the peer's record ${seq >>> 0}, ` +
          `and the peer has enqueued only up to ${seen >>> 0} (was that record ever pushed to the peer's ring?)`,
        'ERR_HANDSHAKE_TIMEOUT',
      );
    }
    if (t > spinEnd) ctx.peerRing.sleepOnTail(seen, Math.min(2, deadline - t));
  }
}

/** Run available records for up to ~1 ms; false once the ring is faulted. */
function runBatch(ctx: WorkerContext): boolean {
  const start = performance.now();
  const end = start + 1;
  // The watch's idle time is counted in tens of ms: the batch's start is near enough its end.
  ctx.watch.enqueued(start);
  // The batch's clock, read at its start and every 64 records: the join log's stamps come from it,
  // so a join costs the log two stores and no clock read.
  let clock = start;
  const args = ctx.ring.args;
  while (ctx.ring.available() > 0) {
    const r = ctx.ring.peek();
    try {
      if (r.afterPeer !== undefined) awaitPeer(ctx, r.afterPeer, r.seq);
      if (carriesMarks(r.flags)) recordMarks(ctx, r.slot);
      execute(ctx, r, args);
      if (ctx.progress && !ctx.capturing) ctx.progress.after(ctx.dev, ctx.stream, r.seq >>> 0, r.op);
      // Logged once issued, at the batch's clock from before the launch: on the CPU reference
      // the record runs the whole join, its wait included.
      if (r.op === Op.Ll || r.op === Op.OneShot) ctx.joinLog.note(joinClockMs(clock));
      // Before advance(): whoever sees `tail` reach this record sees its stamp too.
      if (ctx.board) ctx.board.stamps[r.slot] = performance.now() * 1000 + ctx.board.offsetUs;
    } catch (e) {
      refuse(ctx, r, e);
      return false;
    }
    ctx.ring.advance();
    ctx.executed++;
    if ((ctx.executed & 63) === 0) {
      clock = performance.now();
      if (clock > end) break;
    }
  }
  return true;
}

/**
 * Stop serving: fault the ring at record `seq` (nothing from it on runs, and the producer's next
 * push refuses), then tell the main thread why.
 */
function stopWith(ctx: WorkerContext, seq: number, op: number, reason: string, code: string, message: string): void {
  ctx.faulted = true;
  ctx.ring.fault(seq, op, reason);
  const fault: WorkerFault = { type: 'fault', rank: ctx.init.rank, seq: seq >>> 0, op, code, message };
  parentPort?.postMessage(fault);
}

/** The stream's work failed on the device (stream-watch.ts): the next record is refused. */
function deviceFault(ctx: WorkerContext, e: unknown): void {
  const enqueued = ctx.ring.view.tail() >>> 0;
  const message = `${ctx.tag}: the device failed running the records enqueued up to ${enqueued}: ${(e as Error).message}`;
  stopWith(ctx, (enqueued + 1) | 0, -1, message, 'ERR_DEVICE_FAULT', message);
}

function refuse(ctx: WorkerContext, r: RecordRef, e: unknown): void {
  const err = e as Error & { code?: string };
  if (ctx.capturing) {
    // A refusal inside a capture would leave the stream capturing forever, and every later
    // query, drain or close of it would fail: end the capture and throw its graph away.
    ctx.capturing = false;
    try {
      ctx.dev.graphDestroy(ctx.dev.streamEndCapture(ctx.stream));
    } catch {
      /* the capture was invalid: ending it is all we need */
    }
  }
  stopWith(
    ctx,
    r.seq,
    r.op,
    `${opName(r.op)}: ${err.message}`,
    err.code ?? 'ERR_RECORD_FAILED',
    `${ctx.tag} refused record ${r.seq >>> 0} (${opName(r.op)}): ${err.message}`,
  );
}

export async function serve(ctx: WorkerContext): Promise<void> {
  // Turn the event loop (where control calls arrive) at most once a millisecond while records
  // keep coming: a turn costs microseconds, which a join waiting on this worker would pay.
  let lastTurn = performance.now();
  while (!ctx.closing && !ctx.faulted) {
    if (ctx.ring.available() > 0) {
      if (!runBatch(ctx)) break;
      if (performance.now() - lastTurn > 1) {
        await yieldToLoop();
        lastTurn = performance.now();
      }
      continue;
    }
    if (ctx.ring.spinForWork(ctx.init.spinMicros)) continue;
    try {
      ctx.watch.poll(ctx, performance.now());
    } catch (e) {
      deviceFault(ctx, e);
      break;
    }
    // Short blocking sleeps with a turn of the event loop between them: a record, or a control
    // call's doorbell (ring.ts), wakes us at once; the slice bounds a wake-up that never comes.
    if (!ctx.ring.sleepForWork(2)) {
      await yieldToLoop();
      lastTurn = performance.now();
    }
  }
}

/** Until every published record has been enqueued and the stream has finished it. */
export async function drain(ctx: WorkerContext, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const pending = (): boolean => !ctx.faulted && ctx.ring.available() > 0;
  const busy = (): boolean => {
    if (ctx.capturing)
      throw new Error(`${ctx.tag}: drain requested while the stream is capturing a graph; end the capture first`);
    return ctx.stream !== 0 && !ctx.dev.streamQuery(ctx.stream);
  };
  while (pending() || busy()) {
    if (performance.now() > deadline) {
      throw new Error(
        `${ctx.tag}: drain timed out after ${timeoutMs} ms (${ctx.ring.available()} records not enqueued)`,
      );
    }
    await sleep(pending() ? 0 : 0.05);
  }
}

/**
 * Until every record published before this call has been enqueued (not run): a control call that
 * puts work on the stream itself then follows the ring's earlier records, in the order the main
 * thread sent them, without waiting for the stream.
 */
export async function enqueuedSoFar(ctx: WorkerContext, timeoutMs: number): Promise<void> {
  const head = ctx.ring.view.head();
  await until(ctx, () => seqDiff(head, ctx.ring.view.tail()) <= 0, timeoutMs, `record ${head >>> 0} enqueued`);
}

/**
 * Poll `done` until it holds (the serve loop runs between polls), refusing when the ring faults
 * or `timeoutMs` pass.
 */
export async function until(ctx: WorkerContext, done: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (ctx.faulted) throw new Error(`${ctx.tag}: the ring is faulted while waiting for ${what}`);
    if (performance.now() > deadline) throw new Error(`${ctx.tag}: ${what}: not within ${timeoutMs} ms`);
    await sleep(0.05);
  }
}
