/**
 * The native addon's whole surface, described once, by hand.
 *
 * Handles (streams, events, graphs, communicators, device and pinned host pointers) cross the
 * boundary as numbers, typed by kind (`StreamHandle`, `DevicePtr`, ...). They are process-wide
 * CUDA handles or 64-bit addresses; x86-64 user addresses and CUDA's unified virtual addresses
 * both stay below 2^53, so a double holds them exactly, and a number can travel in a ring record
 * or a control call to any thread. The main thread's `Rank` takes device addresses as plain
 * numbers (a walk's buffers are an allocation plus offsets); the worker makes them `DevicePtr`
 * where it hands them to the addon.
 *
 * Threading contract: the process-wide calls (`deviceCount`, `driverVersion`, `deviceProps`,
 * `canAccessPeer`, `arSignalBytes`, `arMaxBlocks`, `refusalWords`, `llStateBytes`, `llDepth`, `llMaxValues`, `ncclLoad`, `ncclGetUniqueId`) may run on any
 * thread and never bind a device. Everything else acts on the
 * device the calling thread bound with `bindDevice`, and throws if the thread bound none: the
 * pinned worker of a device is the only thread that touches it.
 *
 * Every CUDA failure throws an `Error` whose message names the call, the device and the CUDA
 * error (for example `cudaMalloc(bytes=1099511627776) on device 1: out of memory
 * (cudaErrorMemoryAllocation)`); its `code` is the CUDA error name and `cudaError` the number.
 * Bad arguments throw a `TypeError` naming the function and the argument.
 */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Each kind of handle is a number branded with its kind, so a stream passed where a pointer goes
// (or an event where a graph goes) fails to compile; at run time it is the same double.
export type StreamHandle = number & { readonly __brand: 'StreamHandle' };
export type EventHandle = number & { readonly __brand: 'EventHandle' };
export type DevicePtr = number & { readonly __brand: 'DevicePtr' };
export type HostPtr = number & { readonly __brand: 'HostPtr' };
export type GraphHandle = number & { readonly __brand: 'GraphHandle' };
export type ChildGraphHandle = number & { readonly __brand: 'ChildGraphHandle' };
export type NcclComm = number & { readonly __brand: 'NcclComm' };

// A handle that crossed a ring record (a Float64Array word) or a control call comes back as a
// plain number; these name the one step that makes it a handle again. Pointer arithmetic (a row
// inside an allocation) also gives a plain number, made a pointer by asDevicePtr.
export const asDevicePtr = (n: number): DevicePtr => n as DevicePtr;
export const asHostPtr = (n: number): HostPtr => n as HostPtr;
export const asStreamHandle = (n: number): StreamHandle => n as StreamHandle;
export const asEventHandle = (n: number): EventHandle => n as EventHandle;
export const asGraphHandle = (n: number): GraphHandle => n as GraphHandle;
export const asChildGraphHandle = (n: number): ChildGraphHandle => n as ChildGraphHandle;
export const asNcclComm = (n: number): NcclComm => n as NcclComm;
/** No address: an optional pointer left out, 0 on the ring and to the kernels. */
export const NO_PTR = asDevicePtr(0);
/** The address `bytes` past `p`, inside the same allocation. */
export const ptrAdd = (p: DevicePtr, bytes: number): DevicePtr => (p + bytes) as DevicePtr;

export interface DeviceProps {
  ordinal: number;
  name: string;
  /** Bytes of device memory. */
  totalMem: number;
  multiProcessorCount: number;
  major: number;
  minor: number;
  pciBusId: string;
  unifiedAddressing: boolean;
  canMapHostMemory: boolean;
  /** Peak SM clock in kHz, for turning device spin bounds into time. */
  clockRateKHz: number;
}

/** A SharedArrayBuffer range registered as mapped, page-locked host memory. */
export interface HostRegistration {
  /** Host address of the first registered byte (page aligned). */
  hostPtr: HostPtr;
  /** The address a kernel uses to reach the same bytes. */
  devicePtr: DevicePtr;
  /** Byte offset of the registered range inside the view's buffer (aligning to a page). */
  byteOffset: number;
  /** Bytes registered: whole pages inside the view. */
  bytes: number;
}

export interface NativeBinding {
  /** Addon version string, `memra-addon <semver> cuda <runtime version>`. */
  readonly version: string;
  /** CUDA runtime version the addon was linked against, e.g. 13000. */
  readonly cudaRuntimeVersion: number;

  // ---- process-wide, any thread, never binds a device ----
  /** Devices visible; 0 (not an error) when there is no driver or no device. */
  deviceCount(): number;
  /** Driver's CUDA version, 0 when no driver is installed. */
  driverVersion(): number;
  deviceProps(ordinal: number): DeviceProps;
  /** The driver's claim only; `src/runtime/peer.ts` proves it with a write-and-read-back probe. */
  canAccessPeer(device: number, peer: number): boolean;

  // ---- the calling thread's device ----
  /**
   * Bind this thread to `ordinal` (cudaSetDevice) and claim the ordinal for this thread,
   * process-wide. Throws if the ordinal is out of range (naming the count) or already claimed by
   * another thread (two ranks on one device: a peer store across two contexts on one card is
   * undefined). `loopback` claims share the ordinal with other loopback claims, and only with
   * them: two ranks of this process on one card, one primary context, one address space (the
   * runtime's `loopback`); it also lets this thread's parent graph take a peer child of its own
   * device. A thread binds once. The claim, and every stream, event, allocation and host
   * registration the thread made, is released when the thread's environment is torn down, after
   * the device has drained.
   */
  bindDevice(ordinal: number, loopback?: boolean): void;
  /** The ordinal this thread bound, or -1. */
  boundDevice(): number;
  /** Drain the device, free everything this thread allocated, and drop the claim. */
  releaseDevice(): void;
  /** Bytes free and total on the bound device. */
  memGetInfo(): { free: number; total: number };
  /** cudaDeviceEnablePeerAccess from the bound device; enabling twice is not an error. */
  enablePeerAccess(peer: number): void;
  disablePeerAccess(peer: number): void;

  /** A non-blocking stream (cudaStreamNonBlocking): it never serialises with the legacy stream. */
  streamCreate(): StreamHandle;
  streamDestroy(stream: StreamHandle): void;
  /**
   * True when all work on the stream is done. Never blocks. False while the stream is capturing,
   * begun by this thread or joined through an event wait: a query would invalidate the capture.
   */
  streamQuery(stream: StreamHandle): boolean;
  /** Blocks the calling thread: cold paths only (tests, close). */
  streamSynchronize(stream: StreamHandle): void;

  /** `timing: false` creates an ordering-only event (cudaEventDisableTiming), the cheap kind. */
  eventCreate(timing: boolean): EventHandle;
  eventDestroy(event: EventHandle): void;
  eventRecord(event: EventHandle, stream: StreamHandle): void;
  /**
   * The profiler's record: as `eventRecord`, except that while `stream` is being captured it
   * becomes an event record node of the graph (cudaEventRecordExternal), recorded by every replay.
   */
  eventRecordMark(event: EventHandle, stream: StreamHandle): void;
  /** Stream `stream` waits for `event`'s latest record, which may be on another device. */
  streamWaitEvent(stream: StreamHandle, event: EventHandle): void;
  /** True when the event's latest record has completed. Never blocks. */
  eventQuery(event: EventHandle): boolean;
  /** Milliseconds between two completed timing events. */
  eventElapsedMs(start: EventHandle, end: EventHandle): number;

  malloc(bytes: number): DevicePtr;
  free(ptr: DevicePtr): void;
  memsetAsync(ptr: DevicePtr, byteValue: number, bytes: number, stream: StreamHandle): void;
  /** Device-to-device copy on `stream`; with unified addressing either side may be a peer's. */
  memcpyAsync(dst: DevicePtr, src: DevicePtr, bytes: number, stream: StreamHandle): void;
  /** cudaMemcpyPeerAsync: the copy engine moves `bytes` from `srcDevice` to `dstDevice`. */
  memcpyPeerAsync(
    dst: DevicePtr,
    dstDevice: number,
    src: DevicePtr,
    srcDevice: number,
    bytes: number,
    stream: StreamHandle,
  ): void;
  /**
   * Synchronous host-to-device copy of the whole view (cold path). It runs on the legacy stream,
   * which does not order against non-blocking streams: drain the streams that touch `dst` first.
   */
  upload(dst: DevicePtr, src: ArrayBufferView): void;
  /** Synchronous device-to-host copy filling the whole view (cold path); drain writers first. */
  download(dst: ArrayBufferView, src: DevicePtr): void;

  /**
   * Page-locked, mapped, portable host memory (cudaHostAlloc), not visible to JS. The returned
   * address is also the one kernels use (unified addressing).
   */
  hostAlloc(bytes: number): HostPtr;
  hostFree(ptr: HostPtr): void;
  /**
   * Register the whole pages inside `view` (typically over a SharedArrayBuffer) as mapped,
   * portable page-locked memory, so kernels write into it and JS reads it with `Atomics.load`.
   * The view's buffer must outlive the registration.
   */
  hostRegister(view: ArrayBufferView): HostRegistration;
  hostUnregister(hostPtr: HostPtr): void;

  // ---- kernels in cu/, each enqueued on `stream` ----
  /** `ptr[i] = value` for i < n (f32). */
  launchFillF32(ptr: DevicePtr, n: number, value: number, stream: StreamHandle): void;
  /** `y[i] += a * x[i]` for i < n (f32); `x` may be a peer's pointer. */
  launchAxpyF32(y: DevicePtr, x: DevicePtr, n: number, a: number, stream: StreamHandle): void;
  /**
   * Store `value` into the u32 at `counter` (mapped host memory) with a system-scope release,
   * after everything earlier on the stream: the GPU's own completion report.
   */
  launchSignal(counter: DevicePtr, value: number, stream: StreamHandle): void;
  /** One thread stores %globaltimer (u64 ns) into `dst` once the stream's earlier work is done. */
  launchStampNow(dst: DevicePtr, stream: StreamHandle): void;
  /** `dst[i] = probePattern(seed, i)` for i < n u32 words; `dst` may be a peer's pointer. */
  launchProbeWrite(dst: DevicePtr, n: number, seed: number, stream: StreamHandle): void;
  /** Occupy the stream for about `microseconds` (a kernel that spins on the global timer). */
  launchSpin(microseconds: number, stream: StreamHandle): void;
  /**
   * Read `bytes` at `ptr` (16-byte aligned) and nothing else: the card's HBM read floor, which a
   * decode step's bytes are measured against. `sink` (4 bytes) is written only when the data
   * folds to one value no byte fill gives.
   */
  launchReadFloor(ptr: DevicePtr, bytes: number, sink: DevicePtr, stream: StreamHandle): void;

  // ---- TP all-reduce link kernels (cu/tp_ar.cu, seed 000) ----
  /** Bytes of one rank's one-shot barrier signal block (4-byte aligned); allocate it zeroed. */
  arSignalBytes(): number;
  /** Blocks the one-shot launches at most; both ranks must pass the same `blocks`. */
  arMaxBlocks(): number;
  /** The words a refused device barrier stores (cu/kernels.h); src/runtime/link-constants.ts mirrors them. */
  refusalWords(): { entry: number; exit: number };
  /** `dst[i] = src[i]` for i < n f32 by kernel stores; `dst` may be a peer's pointer. */
  launchPush(src: DevicePtr, dst: DevicePtr, n: number, stream: StreamHandle): void;
  /**
   * Strided push: `rows` rows of `rowLen` f32, row r from `src + r*srcStride` to
   * `dst + r*dstStride` (strides in elements; `dstStride >= rowLen` when rows > 1, or rows would
   * overlap and race). At rows = 1 it is the contiguous push.
   */
  launchPush2d(
    src: DevicePtr,
    dst: DevicePtr,
    rows: number,
    rowLen: number,
    srcStride: number,
    dstStride: number,
    stream: StreamHandle,
  ): void;
  /** `dst[i] += stage[i]` for i < n f32. */
  launchFold(dst: DevicePtr, stage: DevicePtr, n: number, stream: StreamHandle): void;
  /**
   * One-shot two-rank all-reduce: `out[i] = in0[i] + in1[i]` (global rank order, so both ranks
   * compute the same bits), fenced by a per-block barrier with the peer's kernel at entry and
   * exit (system-scope release/acquire on flags in `selfSignal` / `peerSignal`). `in0`/`in1` are
   * the two ranks' STAGING buffers, never the live inputs (the peer reads them while this rank
   * writes `out`): with `x` non-zero the kernel first copies this rank's input `x` into its own
   * stage (in0 on rank 0, in1 on rank 1), each block the share its peer block will read, so the
   * entry barrier orders the copy; with `x` = 0 the caller staged it. `out` may alias `x`, never
   * a stage. Barrier epochs live in the signal blocks, so a graph replays correctly. A wait that
   * exceeds `spinLimit` SM clock ticks stores REFUSED_ENTRY or REFUSED_EXIT (link-constants.ts) into `*err` (if still
   * 0) and returns. Both ranks pass the same `in0`, `in1`, `n` and `blocks`, and the two launches
   * must never be ordered one after the other. After a refusal, drain both ranks and zero the
   * signal blocks before the next use.
   */
  launchOneShot(
    x: DevicePtr,
    in0: DevicePtr,
    in1: DevicePtr,
    out: DevicePtr,
    selfSignal: DevicePtr,
    peerSignal: DevicePtr,
    rank: number,
    n: number,
    err: DevicePtr,
    spinLimit: number,
    blocks: number,
    stream: StreamHandle,
  ): void;

  // ---- low-latency exchange (cu/tp_ll.cu) ----
  /** Bytes of one rank's LL state block (each chunk's epoch, and the peer's ack of it); allocate it zeroed. */
  llStateBytes(): number;
  /** Epochs whose receive slots are live at once: a receive buffer holds depth x cap 8-byte slots. */
  llDepth(): number;
  /** The most values (f32) one LL join may move. */
  llMaxValues(): number;
  /**
   * This thread's LL link, used by every `launchLl` after it: `selfRecv`/`peerRecv` (16-byte
   * aligned) hold `llDepth()` x `cap` 8-byte slots, zeroed, `cap` even; `selfState`/`peerState`
   * are LL state blocks, zeroed. Waits longer than `spinLimit` SM ticks store REFUSED_ENTRY (the
   * peer's values never came) or REFUSED_EXIT (the peer never finished the epoch that last used these slots)
   * into `*err`; the link must then be drained and reset. `serveIdleMicros` > 0: eager joins of
   * up to 8,192 values (32 KB) go to the LL server (cu/tp_ll_server.h), a persistent grid fed
   * by stream memory operations instead of a launch each, which stops after that long idle; 0:
   * every join is a launch.
   */
  llConfigure(
    selfRecv: DevicePtr,
    peerRecv: DevicePtr,
    cap: number,
    selfState: DevicePtr,
    peerState: DevicePtr,
    rank: number,
    err: DevicePtr,
    spinLimit: number,
    serveIdleMicros: number,
  ): void;
  /**
   * This thread's LL server: jobs it ran, grids launched for them (one per idle stop), and the
   * host's view of its mapped block (issued, done, state); `deep` adds the device's control block
   * and whether a grid runs (diagnosis: scripts/probes/ll-server-node.mjs).
   */
  llServeStats(deep?: boolean): { jobs: number; launches: number } & Record<string, number | boolean>;
  /**
   * One low-latency join on this rank, one kernel, no events, over the link `llConfigure` set:
   * optionally copy `localSrc` to `localDst`; send `sendSrc` into the peer's receive slots as
   * {value, epoch} words; receive the peer's values into `recvDst` (with `reduce`, the rank-order
   * sum with `sendSrc`, which may alias `recvDst`). `rows` x `rowLen` elements, dense at the
   * source, `dstStride` apart at the destinations; a role whose pointer is 0 is absent. BOTH ranks
   * launch for every join (that keeps their epochs in step). `stamp` (0, or two u64 in device
   * memory, 8-byte aligned): the join stores its start (%globaltimer, ns, once the work ahead is
   * done) and folds its end into the second with a max.
   */
  launchLl(
    reduce: number,
    rows: number,
    rowLen: number,
    sendSrc: DevicePtr,
    localSrc: DevicePtr,
    localDst: DevicePtr,
    recvDst: DevicePtr,
    dstStride: number,
    stamp: DevicePtr,
    stream: StreamHandle,
  ): void;

  // ---- the synthetic model's kernels (cu/model.h states each one's exact computation) ----
  /** The largest batch (rows t) a model kernel takes. */
  modelMaxRows(): number;
  /**
   * Generate a dense [rows, cols] bf16 slice of tensor `id`: element (r, c) is the tensor's flat
   * element `base + r * srcCols + colStart + c`, bit-identical to src/decode/weights.ts. `seed`
   * is a u64 as a decimal string. kind 0: matrix (w = (2u-1) * scale); 1: gain.
   */
  launchGenWeights(
    dst: DevicePtr,
    seed: string,
    id: number,
    base: number,
    rows: number,
    srcCols: number,
    colStart: number,
    cols: number,
    kind: number,
    scale: number,
    stream: StreamHandle,
  ): void;
  // The step kernels below take an optional `pdl` after their stream: when true, the launch may
  // start before the previous kernel of the stream has finished (programmatic dependent launch,
  // cu/pdl.cuh); each kernel waits for it before reading anything but weights (the attention's
  // cache rows below the position excepted: cu/model.h). Only correct when the previous work on
  // the stream is itself one of these kernels (the worker tracks that).
  /** dst[i] = values[i] (i32, at most 12): a step's tokens or positions. */
  launchSetI32(dst: DevicePtr, values: readonly number[], stream: StreamHandle, pdl?: boolean): void;
  launchEmbed(
    out: DevicePtr,
    emb: DevicePtr,
    tokens: DevicePtr,
    t: number,
    H: number,
    V: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchRmsnorm(
    out: DevicePtr,
    input: DevicePtr,
    gain: DevicePtr,
    t: number,
    H: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  /**
   * `accumulate`: out = f32(out + the product), the residual add fused into it. `split` (0 to 8):
   * the blocks a column's K rows are cut over, which fixes the sum's order; 0 takes K's default.
   * Give every slice of one matrix the same split.
   */
  launchGemv(
    out: DevicePtr,
    ldo: number,
    x: DevicePtr,
    ldx: number,
    w: DevicePtr,
    ldw: number,
    K: number,
    cols: number,
    t: number,
    accumulate: boolean,
    split: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  /**
   * normOut = rmsnorm(x, gain) (launchRmsnorm's bits), then out = normOut @ w (launchGemv's at
   * split 8), in one launch: the MoE norm and the router's product. 1 <= cols <= 64 (one column
   * tile of that product); x and normOut are [t][K].
   */
  launchNormGemv(
    normOut: DevicePtr,
    out: DevicePtr,
    ldo: number,
    x: DevicePtr,
    gain: DevicePtr,
    w: DevicePtr,
    ldw: number,
    K: number,
    cols: number,
    t: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  /**
   * c = a @ Wdkv into this layer's cache rows at each row's position (slot s at cache + s *
   * slotStride floats), and q = a @ Wq beside it, in one launch: what launchGemv, launchCacheWrite
   * and launchGemv give apart, bit for bit.
   */
  launchLatentQuery(
    q: DevicePtr,
    a: DevicePtr,
    wdkv: DevicePtr,
    wq: DevicePtr,
    cache: DevicePtr,
    slotStride: number,
    pos: DevicePtr,
    K: number,
    R: number,
    qcols: number,
    t: number,
    P: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchCacheWrite(
    cache: DevicePtr,
    c: DevicePtr,
    pos: DevicePtr,
    t: number,
    layer: number,
    L: number,
    P: number,
    R: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  /**
   * Absorbed MLA attention (cu/model.h MemraMlaArgs): `cache` points at this layer's rows of slot
   * 0, slot s's at `cache + s * slotStride` floats; `work` holds mlaWorkspaceBytes(t, nh, P, R).
   * R is a multiple of 16 (a RangeError otherwise).
   */
  launchMlaAttention(
    u: DevicePtr,
    ldu: number,
    q: DevicePtr,
    ldq: number,
    cache: DevicePtr,
    slotStride: number,
    pos: DevicePtr,
    wuv: DevicePtr,
    work: DevicePtr,
    t: number,
    nh: number,
    P: number,
    R: number,
    Dv: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  /** Bytes of launchMlaAttention's workspace for t rows of nh heads over P positions of latent R. */
  mlaWorkspaceBytes(t: number, nh: number, P: number, R: number): number;
  /**
   * The P up to which launchMlaAttention is one kernel (same bits as its tiled form): a walk whose
   * rows are all below it passes it as P.
   */
  mlaShortPositions(R: number): number;
  launchRouter(
    ids: DevicePtr,
    wts: DevicePtr,
    logits: DevicePtr,
    t: number,
    E: number,
    K: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchQuantize(
    xq: DevicePtr,
    xs: DevicePtr,
    b: DevicePtr,
    t: number,
    H: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  /** launchRouter, launchQuantize and launchDequantize in one launch, bit for bit as the three give. */
  launchRouteQuant(
    ids: DevicePtr,
    wts: DevicePtr,
    logits: DevicePtr,
    xq: DevicePtr,
    xs: DevicePtr,
    xd: DevicePtr,
    b: DevicePtr,
    t: number,
    E: number,
    K: number,
    H: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchDequantize(
    xd: DevicePtr,
    xq: DevicePtr,
    xs: DevicePtr,
    t: number,
    H: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchExpertUp(
    act: DevicePtr,
    xd: DevicePtr,
    ids: DevicePtr,
    w1: DevicePtr,
    w3: DevicePtr,
    e0: number,
    nE: number,
    t: number,
    K: number,
    H: number,
    F: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchExpertDown(
    contrib: DevicePtr,
    act: DevicePtr,
    ids: DevicePtr,
    w2: DevicePtr,
    e0: number,
    nE: number,
    t: number,
    K: number,
    H: number,
    F: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchMoeCombine(
    h: DevicePtr,
    wts: DevicePtr,
    ids: DevicePtr,
    lo: DevicePtr,
    hi: DevicePtr,
    splitE: number,
    t: number,
    K: number,
    H: number,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  /** launchMoeCombine, then out = rmsnorm(h, gain) (launchRmsnorm's bits), in one launch. */
  launchMoeCombineNorm(
    h: DevicePtr,
    wts: DevicePtr,
    ids: DevicePtr,
    lo: DevicePtr,
    hi: DevicePtr,
    splitE: number,
    t: number,
    K: number,
    H: number,
    out: DevicePtr,
    gain: DevicePtr,
    stream: StreamHandle,
    pdl?: boolean,
  ): void;
  launchArgmax(out: DevicePtr, logits: DevicePtr, t: number, V: number, stream: StreamHandle, pdl?: boolean): void;

  // ---- the calling thread's CPU affinity (Linux) ----
  /** Pin the calling thread (not the process) to these CPUs. */
  setThreadAffinity(cpus: readonly number[]): void;
  /** The CPUs the calling thread may run on. */
  threadAffinity(): number[];

  // ---- CUDA graphs (stream capture) ----
  /** Begin capturing `stream` (cudaStreamCaptureModeRelaxed: other threads keep working). */
  streamBeginCapture(stream: StreamHandle): void;
  /** End the capture and instantiate it; returns the executable graph. */
  streamEndCapture(stream: StreamHandle): GraphHandle;
  /** Launch an executable graph on `stream`. */
  graphLaunch(graph: GraphHandle, stream: StreamHandle): void;
  /** Destroy an executable graph (and its graph) this thread instantiated; drains first. */
  graphDestroy(graph: GraphHandle): void;
  /**
   * End the capture WITHOUT instantiating: a child graph for a parent graph. Registered
   * process-wide, so the peer's thread may put it in a parent it builds.
   */
  streamEndCaptureChild(stream: StreamHandle): ChildGraphHandle;
  /** Destroy a child graph this thread captured; refused while a parent graph holds it. */
  childGraphDestroy(child: ChildGraphHandle): void;
  /**
   * Seed 003's EP parent graph, built on the owner's (this) thread: `ownerChild` beside the chain
   * copies[0..3] (owner -> peer) -> `peerChild` (captured on `peerDevice`'s thread) -> copies[4]
   * (peer -> owner, added under the peer's device); `postChild` after `ownerChild` and copies[4].
   * Instantiated and uploaded on `stream`; launch and destroy it as any executable graph. It holds
   * its three children until it is destroyed. `peerDevice` may be this thread's own device only
   * when this thread bound it in loopback.
   */
  parentGraphBuild(
    ownerChild: ChildGraphHandle,
    peerChild: ChildGraphHandle,
    postChild: ChildGraphHandle,
    peerDevice: number,
    copies: ReadonlyArray<{ dst: DevicePtr; src: DevicePtr; bytes: number }>,
    stream: StreamHandle,
  ): GraphHandle;

  // ---- NCCL, loaded at run time (dlopen libnccl.so.2) ----
  /**
   * Load libnccl once per process. Returns its version (e.g. 22803) or throws naming the
   * library and the dlopen error; the rest of the addon works without it.
   */
  ncclLoad(): number;
  /** A fresh ncclUniqueId (128 bytes) for a new communicator. */
  ncclGetUniqueId(): Uint8Array;
  /**
   * This thread's rank of a communicator on the bound device. Blocks until every rank has
   * called it, so each rank's thread must call it concurrently.
   */
  ncclCommInitRank(id: Uint8Array, nranks: number, rank: number): NcclComm;
  ncclCommDestroy(comm: NcclComm): void;
  /** f32 sum all-reduce, `count` elements, on `stream`. */
  ncclAllReduceF32(send: DevicePtr, recv: DevicePtr, count: number, comm: NcclComm, stream: StreamHandle): void;
  ncclBroadcastF32(
    send: DevicePtr,
    recv: DevicePtr,
    count: number,
    root: number,
    comm: NcclComm,
    stream: StreamHandle,
  ): void;
  /** `recv` holds nranks * count; rank r's `count` elements land at r * count. */
  ncclAllGatherF32(send: DevicePtr, recv: DevicePtr, count: number, comm: NcclComm, stream: StreamHandle): void;
  /**
   * Grouped send/recv (ncclGroupStart/End around them): `peer` is the other rank. Pointers must
   * be non-zero even on a side whose count is 0. Graphs that captured NCCL calls must be
   * destroyed before their communicator.
   */
  ncclSendRecvF32(
    send: DevicePtr,
    sendCount: number,
    recv: DevicePtr,
    recvCount: number,
    peer: number,
    comm: NcclComm,
    stream: StreamHandle,
  ): void;
}

/** The probe kernel's pattern, so a reader can check what a peer wrote. */
export function probePattern(seed: number, i: number): number {
  return (Math.imul(i, 0x9e3779b1) ^ seed) >>> 0;
}

const here = dirname(fileURLToPath(import.meta.url));

function addonPath(): string {
  // dist/src/runtime/binding.js or src/runtime/binding.ts: the build folder is at the root.
  for (const up of ['../../..', '../..']) {
    const p = join(here, up, 'build', 'Release', 'memra.node');
    if (existsSync(p)) return p;
  }
  throw new Error(
    'memra: the CUDA addon is not built (build/Release/memra.node is missing); ' +
      '`npm run build:addon` (or `npm rebuild memra` where memra is a dependency) builds it with CUDA 13 (nvcc) and cmake',
  );
}

let cached: NativeBinding | undefined;

/** Load the addon (once per thread: each worker thread gets its own module instance). */
export function loadBinding(): NativeBinding {
  if (!cached) cached = createRequire(import.meta.url)(addonPath()) as NativeBinding;
  return cached;
}
