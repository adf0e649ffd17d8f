/**
 * A pinned worker's hot path, one record at a time: the op switch that turns a ring record into
 * work on the worker's stream (the model's ops in model-dispatch.ts), and the profiler's marks a
 * record may carry.
 */
import { OP_COUNT, Op } from './ops.js';
import { carriesMarks } from './profile-board.js';
import type { RecordRef } from './ring.js';
import { executeModelOp } from './model-dispatch.js';
import { asDevicePtr, asEventHandle, type NcclComm } from '../runtime/binding.js';
import { Refusal, type WorkerContext } from './worker-context.js';

function needLl(ctx: WorkerContext): void {
  if (!ctx.llReady) throw new Refusal('an LL join before llConfigure: open the ll transport first', 'ERR_BAD_RECORD');
}

function needComm(ctx: WorkerContext): NcclComm {
  if (ctx.comm === 0) throw new Refusal('an NCCL op before ncclInit: open the nccl transport first', 'ERR_BAD_RECORD');
  return ctx.comm;
}

/** Enqueue record `r` (its arguments in `a` from `r.arg`) on this worker's stream. */
export function execute(ctx: WorkerContext, r: RecordRef, a: Float64Array): void {
  const i = r.arg;
  // While a profile board is set, no launch overlaps the one before it: a join's events must
  // bracket the join alone, not the tail of the kernel ahead (the profile-overhead rows price it).
  const pdl = ctx.pdlChain.next(r.op, carriesMarks(r.flags)) && !ctx.board;
  switch (r.op) {
    case Op.Nop:
      return;
    case Op.Fill:
      ctx.dev.launchFillF32(asDevicePtr(a[i]!), a[i + 1]!, a[i + 2]!, ctx.stream);
      return;
    case Op.Axpy:
      ctx.dev.launchAxpyF32(asDevicePtr(a[i]!), asDevicePtr(a[i + 1]!), a[i + 2]!, a[i + 3]!, ctx.stream);
      return;
    case Op.Copy:
      ctx.dev.memcpyAsync(asDevicePtr(a[i]!), asDevicePtr(a[i + 1]!), a[i + 2]!, ctx.stream);
      return;
    case Op.CopyPeer:
      ctx.dev.memcpyPeerAsync(asDevicePtr(a[i]!), a[i + 1]!, asDevicePtr(a[i + 2]!), a[i + 3]!, a[i + 4]!, ctx.stream);
      return;
    case Op.Memset:
      ctx.dev.memsetAsync(asDevicePtr(a[i]!), a[i + 1]!, a[i + 2]!, ctx.stream);
      return;
    case Op.EventRecord:
      ctx.dev.eventRecord(asEventHandle(a[i]!), ctx.stream);
      return;
    case Op.EventWait:
      ctx.dev.streamWaitEvent(ctx.stream, asEventHandle(a[i]!), a[i + 1]!);
      return;
    case Op.Signal: {
      const slot = a[i]!;
      if (!Number.isInteger(slot) || slot < 0 || slot >= ctx.completion.length) {
        throw new Refusal(
          `Signal: completion slot ${slot} is out of range [0, ${ctx.completion.length})`,
          'ERR_BAD_RECORD',
        );
      }
      ctx.dev.launchSignal(asDevicePtr(ctx.signalBase + slot * 4), a[i + 1]!, ctx.stream);
      return;
    }
    case Op.StampNow:
      ctx.dev.launchStampNow(asDevicePtr(a[i]!), ctx.stream);
      return;
    case Op.ProbeWrite:
      ctx.dev.launchProbeWrite(asDevicePtr(a[i]!), a[i + 1]!, a[i + 2]!, ctx.stream);
      return;
    case Op.Spin:
      ctx.dev.launchSpin(a[i]!, ctx.stream);
      return;
    case Op.Push:
      ctx.dev.launchPush(asDevicePtr(a[i]!), asDevicePtr(a[i + 1]!), a[i + 2]!, ctx.stream);
      return;
    case Op.Push2d:
      ctx.dev.launchPush2d(
        asDevicePtr(a[i]!),
        asDevicePtr(a[i + 1]!),
        a[i + 2]!,
        a[i + 3]!,
        a[i + 4]!,
        a[i + 5]!,
        ctx.stream,
      );
      return;
    case Op.Fold:
      ctx.dev.launchFold(asDevicePtr(a[i]!), asDevicePtr(a[i + 1]!), a[i + 2]!, ctx.stream);
      return;
    case Op.OneShot:
      ctx.dev.launchOneShot(
        asDevicePtr(a[i]!),
        asDevicePtr(a[i + 1]!),
        asDevicePtr(a[i + 2]!),
        asDevicePtr(a[i + 3]!),
        asDevicePtr(a[i + 4]!),
        asDevicePtr(a[i + 5]!),
        a[i + 6]!,
        a[i + 7]!,
        asDevicePtr(a[i + 8]!),
        a[i + 9]!,
        a[i + 10]!,
        ctx.stream,
      );
      return;
    case Op.BeginCapture:
      ctx.dev.streamBeginCapture(ctx.stream);
      ctx.capturing = true;
      return;
    case Op.EndCapture: {
      const slot = a[i]!;
      if (ctx.graphs.has(slot)) throw new Refusal(`EndCapture: graph slot ${slot} is in use`, 'ERR_BAD_RECORD');
      ctx.capturing = false;
      ctx.graphs.set(slot, ctx.dev.streamEndCapture(ctx.stream));
      return;
    }
    case Op.EndCaptureChild: {
      const slot = a[i]!;
      if (ctx.children.has(slot))
        throw new Refusal(`EndCaptureChild: child graph slot ${slot} is in use`, 'ERR_BAD_RECORD');
      ctx.capturing = false;
      ctx.children.set(slot, ctx.dev.streamEndCaptureChild(ctx.stream));
      return;
    }
    case Op.GraphLaunch: {
      const g = ctx.graphs.get(a[i]!);
      if (g === undefined) throw new Refusal(`GraphLaunch: no graph in slot ${a[i]}`, 'ERR_BAD_RECORD');
      ctx.dev.graphLaunch(g, ctx.stream);
      return;
    }
    case Op.NcclAllReduce:
      ctx.dev.ncclAllReduceF32(asDevicePtr(a[i]!), asDevicePtr(a[i + 1]!), a[i + 2]!, needComm(ctx), ctx.stream);
      return;
    case Op.NcclBroadcast:
      ctx.dev.ncclBroadcastF32(
        asDevicePtr(a[i]!),
        asDevicePtr(a[i + 1]!),
        a[i + 2]!,
        a[i + 3]!,
        needComm(ctx),
        ctx.stream,
      );
      return;
    case Op.NcclAllGather:
      ctx.dev.ncclAllGatherF32(asDevicePtr(a[i]!), asDevicePtr(a[i + 1]!), a[i + 2]!, needComm(ctx), ctx.stream);
      return;
    case Op.Ll: {
      needLl(ctx);
      ctx.dev.launchLl(
        a[i]!,
        a[i + 1]!,
        a[i + 2]!,
        asDevicePtr(a[i + 3]!),
        asDevicePtr(a[i + 4]!),
        asDevicePtr(a[i + 5]!),
        asDevicePtr(a[i + 6]!),
        a[i + 7]!,
        asDevicePtr(a[i + 8]!),
        ctx.stream,
      );
      return;
    }
    case Op.NcclSendRecv:
      ctx.dev.ncclSendRecvF32(
        asDevicePtr(a[i]!),
        a[i + 1]!,
        asDevicePtr(a[i + 2]!),
        a[i + 3]!,
        a[i + 4]!,
        needComm(ctx),
        ctx.stream,
      );
      return;
    default:
      if (executeModelOp(ctx.dev, r.op, a, i, ctx.stream, ctx.mailbox, pdl)) return;
      throw new Refusal(`unknown op ${r.op}: this worker knows ops 0..${OP_COUNT - 1}`, 'ERR_UNKNOWN_OP');
  }
}

/** The profiler's events for this slot (a join's start, the join before's end), in stream order. */
export function recordMarks(ctx: WorkerContext, slot: number): void {
  if (!ctx.board)
    throw new Refusal(
      'a record carries profile marks, but no profile board is set: call setProfileBoard first',
      'ERR_BAD_RECORD',
    );
  const e0 = ctx.board.marks[2 * slot]!,
    e1 = ctx.board.marks[2 * slot + 1]!;
  ctx.dev.eventRecordMark(asEventHandle(e0), ctx.stream);
  if (e1 !== 0) ctx.dev.eventRecordMark(asEventHandle(e1), ctx.stream);
}
