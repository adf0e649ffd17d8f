/**
 * A pinned worker's side of the model ops (src/decode/model-ops.ts): ring record -> kernel launch
 * on the worker's stream. Apart from device-worker.ts so the transport loop stays readable.
 */
import { Op } from './ops.js';
import type { DeviceApi } from '../runtime/device-api.js';
import { asDevicePtr, type DevicePtr, type StreamHandle } from '../runtime/binding.js';

/** This rank's mailbox: mapped host memory the main thread reads (RuntimeOptions.mailboxBytes). */
export interface Mailbox {
  devicePtr: DevicePtr;
  bytes: number;
}

/** The model kernels of a step (cu/model.h): each waits for its predecessor before it reads. */
const STEP_KERNELS: ReadonlySet<number> = new Set([
  Op.SetI32,
  Op.Embed,
  Op.Rmsnorm,
  Op.Gemv,
  Op.CacheWrite,
  Op.MlaAttention,
  Op.Router,
  Op.Quantize,
  Op.Dequantize,
  Op.ExpertUp,
  Op.ExpertDown,
  Op.MoeCombine,
  Op.Argmax,
  Op.RouteQuant,
  Op.LatentQuery,
  Op.MoeCombineNorm,
  Op.NormGemv,
]);

/** Argument j of a record, an address (the ring carries every argument as an f64). */
const ptr = (a: Float64Array, j: number): DevicePtr => asDevicePtr(a[j]!);

type MergeArgs = [DevicePtr, DevicePtr, DevicePtr, DevicePtr, DevicePtr, number, number, number, number];

/** The merge's h, wts, ids, lo, hi, splitE, t, K, H at args[i..], as both merge ops carry them. */
function mergeArgs(a: Float64Array, i: number): MergeArgs {
  return [
    ptr(a, i),
    ptr(a, i + 1),
    ptr(a, i + 2),
    ptr(a, i + 3),
    ptr(a, i + 4),
    a[i + 5]!,
    a[i + 6]!,
    a[i + 7]!,
    a[i + 8]!,
  ];
}

/**
 * Programmatic dependent launch between the step's kernels (cu/pdl.cuh): a model kernel may start
 * while the kernel before it drains only when that kernel is itself one of them. After anything
 * else on the stream (a join's kernel, a copy, an event, a graph launch, weight generation) it
 * launches plainly: a join's kernel may wait on the other rank, and a waiting grid parked on the
 * SMs could starve that rank's kernels when both share one card. `MEMRA_PDL=0` turns it off.
 */
export class PdlChain {
  private previousWasStepKernel = false;
  constructor(readonly enabled = process.env.MEMRA_PDL !== '0') {}

  /** Whether the launch about to be made may overlap its predecessor; then remembers `op`. */
  next(op: number, marked: boolean): boolean {
    const overlap = this.enabled && this.previousWasStepKernel && !marked;
    this.previousWasStepKernel = STEP_KERNELS.has(op);
    return overlap;
  }

  /** Something other than a ring record was enqueued on the stream. */
  reset(): void {
    this.previousWasStepKernel = false;
  }
}

/**
 * Launch model op `op` with the record's arguments at a[i..]. Returns false for an op that is not
 * a model op; throws what the launcher throws (a bad argument or a CUDA error). `pdl`: PdlChain.
 */
export function executeModelOp(
  dev: DeviceApi,
  op: number,
  a: Float64Array,
  i: number,
  stream: StreamHandle,
  mailbox: Mailbox,
  pdl = false,
): boolean {
  switch (op) {
    case Op.SetI32: {
      const n = a[i + 1]!;
      const values: number[] = [];
      for (let k = 0; k < n; k++) values.push(a[i + 2 + k]!);
      dev.launchSetI32(ptr(a, i), values, stream, pdl);
      return true;
    }
    case Op.Embed:
      dev.launchEmbed(ptr(a, i), ptr(a, i + 1), ptr(a, i + 2), a[i + 3]!, a[i + 4]!, a[i + 5]!, stream, pdl);
      return true;
    case Op.Rmsnorm:
      dev.launchRmsnorm(ptr(a, i), ptr(a, i + 1), ptr(a, i + 2), a[i + 3]!, a[i + 4]!, stream, pdl);
      return true;
    case Op.Gemv:
      dev.launchGemv(
        ptr(a, i),
        a[i + 1]!,
        ptr(a, i + 2),
        a[i + 3]!,
        ptr(a, i + 4),
        a[i + 5]!,
        a[i + 6]!,
        a[i + 7]!,
        a[i + 8]!,
        a[i + 9] === 1,
        a[i + 10]!,
        stream,
        pdl,
      );
      return true;
    case Op.CacheWrite:
      dev.launchCacheWrite(
        ptr(a, i),
        ptr(a, i + 1),
        ptr(a, i + 2),
        a[i + 3]!,
        a[i + 4]!,
        a[i + 5]!,
        a[i + 6]!,
        a[i + 7]!,
        stream,
        pdl,
      );
      return true;
    case Op.MlaAttention:
      dev.launchMlaAttention(
        ptr(a, i),
        a[i + 1]!,
        ptr(a, i + 2),
        a[i + 3]!,
        ptr(a, i + 4),
        a[i + 5]!,
        ptr(a, i + 6),
        ptr(a, i + 7),
        ptr(a, i + 8),
        a[i + 9]!,
        a[i + 10]!,
        a[i + 11]!,
        a[i + 12]!,
        a[i + 13]!,
        stream,
        pdl,
      );
      return true;
    case Op.Router:
      dev.launchRouter(ptr(a, i), ptr(a, i + 1), ptr(a, i + 2), a[i + 3]!, a[i + 4]!, a[i + 5]!, stream, pdl);
      return true;
    case Op.Quantize:
      dev.launchQuantize(ptr(a, i), ptr(a, i + 1), ptr(a, i + 2), a[i + 3]!, a[i + 4]!, stream, pdl);
      return true;
    case Op.LatentQuery:
      dev.launchLatentQuery(
        ptr(a, i),
        ptr(a, i + 1),
        ptr(a, i + 2),
        ptr(a, i + 3),
        ptr(a, i + 4),
        a[i + 5]!,
        ptr(a, i + 6),
        a[i + 7]!,
        a[i + 8]!,
        a[i + 9]!,
        a[i + 10]!,
        a[i + 11]!,
        stream,
        pdl,
      );
      return true;
    case Op.RouteQuant:
      dev.launchRouteQuant(
        ptr(a, i),
        ptr(a, i + 1),
        ptr(a, i + 2),
        ptr(a, i + 3),
        ptr(a, i + 4),
        ptr(a, i + 5),
        ptr(a, i + 6),
        a[i + 7]!,
        a[i + 8]!,
        a[i + 9]!,
        a[i + 10]!,
        stream,
        pdl,
      );
      return true;
    case Op.Dequantize:
      dev.launchDequantize(ptr(a, i), ptr(a, i + 1), ptr(a, i + 2), a[i + 3]!, a[i + 4]!, stream, pdl);
      return true;
    case Op.ExpertUp:
      dev.launchExpertUp(
        ptr(a, i),
        ptr(a, i + 1),
        ptr(a, i + 2),
        ptr(a, i + 3),
        ptr(a, i + 4),
        a[i + 5]!,
        a[i + 6]!,
        a[i + 7]!,
        a[i + 8]!,
        a[i + 9]!,
        a[i + 10]!,
        stream,
        pdl,
      );
      return true;
    case Op.ExpertDown:
      dev.launchExpertDown(
        ptr(a, i),
        ptr(a, i + 1),
        ptr(a, i + 2),
        ptr(a, i + 3),
        a[i + 4]!,
        a[i + 5]!,
        a[i + 6]!,
        a[i + 7]!,
        a[i + 8]!,
        a[i + 9]!,
        stream,
        pdl,
      );
      return true;
    case Op.MoeCombine:
      dev.launchMoeCombine(...mergeArgs(a, i), stream, pdl);
      return true;
    case Op.NormGemv:
      dev.launchNormGemv(
        ptr(a, i),
        ptr(a, i + 1),
        a[i + 2]!,
        ptr(a, i + 3),
        ptr(a, i + 4),
        ptr(a, i + 5),
        a[i + 6]!,
        a[i + 7]!,
        a[i + 8]!,
        a[i + 9]!,
        stream,
        pdl,
      );
      return true;
    case Op.MoeCombineNorm:
      dev.launchMoeCombineNorm(...mergeArgs(a, i), ptr(a, i + 9), ptr(a, i + 10), stream, pdl);
      return true;
    case Op.Argmax:
      dev.launchArgmax(ptr(a, i), ptr(a, i + 1), a[i + 2]!, a[i + 3]!, stream, pdl);
      return true;
    case Op.ToMailbox: {
      const offset = a[i + 1]!,
        bytes = a[i + 2]!;
      if (
        !Number.isSafeInteger(offset) ||
        !Number.isSafeInteger(bytes) ||
        offset < 0 ||
        bytes < 0 ||
        offset + bytes > mailbox.bytes
      ) {
        throw new RangeError(
          `ToMailbox: [${offset}, +${bytes}) is outside this rank's ${mailbox.bytes}-byte mailbox (RuntimeOptions.mailboxBytes)`,
        );
      }
      dev.memcpyAsync(asDevicePtr(mailbox.devicePtr + offset), ptr(a, i), bytes, stream);
      return true;
    }
    default:
      return false;
  }
}
