/**
 * The addon's handles held apart by kind: compiled by `tsc -p tsconfig.json` in `npm test`, never
 * run. Each `@ts-expect-error` fails the build the day the line under it compiles.
 */
import {
  asDevicePtr,
  asEventHandle,
  asStreamHandle,
  type DevicePtr,
  type EventHandle,
  type GraphHandle,
  type HostPtr,
  type NativeBinding,
  type NcclComm,
  ptrAdd,
  type StreamHandle,
} from '../../src/runtime/binding.js';
import type { Rank } from '../../src/runtime/rank.js';
import type { Transport } from '../../src/runtime/transports/transport.js';

export function handleTypes(b: NativeBinding, raw: number): void {
  const s: StreamHandle = b.streamCreate();
  const p: DevicePtr = b.malloc(4096);
  const e: EventHandle = b.eventCreate(false);
  b.launchFillF32(p, 1024, 0, s);
  // @ts-expect-error: a stream where the pointer goes, and the pointer where the stream goes
  b.launchFillF32(s, 1024, 0, p);
  // @ts-expect-error: an event is not a stream
  b.eventRecord(e, e);
  // @ts-expect-error: a plain number is no pointer until asDevicePtr (or ptrAdd) makes it one
  b.memsetAsync(raw, 0, 4, s);
  b.memsetAsync(asDevicePtr(raw), 0, 4, asStreamHandle(raw));
  // @ts-expect-error: pointer arithmetic gives a number
  b.launchFillF32(p + 16, 4, 0, s);
  b.launchFillF32(ptrAdd(p, 16), 4, 0, s);
  const g: GraphHandle = b.streamEndCapture(s);
  // @ts-expect-error: a graph is not an event
  b.eventDestroy(g);
  const comm: NcclComm = b.ncclCommInitRank(new Uint8Array(128), 2, 0);
  // @ts-expect-error: the communicator and the stream swapped
  b.ncclAllReduceF32(p, p, 4, s, comm);
  // A handle still reads as the number it is (a ring word, a log line).
  const word: number = asEventHandle(raw);
  void word;
}

/** A rank's calls take addresses as the binding does: a count or a sum stays a number. */
export async function rankAddresses(r: Rank, t: Transport, raw: number): Promise<void> {
  const p: DevicePtr = await r.alloc(4096);
  r.fill(p, 1024, 0);
  // @ts-expect-error: a plain number is no address to a rank either
  r.fill(raw, 1024, 0);
  // @ts-expect-error: the size where the source goes
  r.copy(p, 16, p);
  // @ts-expect-error: pointer arithmetic gives a number
  r.push(p + 16, p, 4);
  r.push(ptrAdd(p, 16), p, 4);
  // @ts-expect-error: the cold path too
  await r.downloadF32(raw, 4);
  await r.downloadF32(p, 4);
  const h: HostPtr = await r.hostAlloc(4096);
  // @ts-expect-error: pinned host memory is freed as host memory
  await r.free(h);
  await r.hostFree(h);
  // @ts-expect-error: and a transport's join takes its source as an address
  t.broadcast(0, raw, [p, p], 4);
  t.broadcast(0, p, [p, p], 4);
}
