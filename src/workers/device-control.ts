/**
 * A pinned worker's control plane: the cold calls the main thread makes over comlink (open,
 * allocate, upload, read back, events, graphs, NCCL, close). Each waits for the ring's earlier
 * records where what it touches may still be in use by them. Addresses come as the main thread
 * computed them, plain numbers; each call makes them pointers where it hands them to the device.
 */
import * as Comlink from 'comlink';
import type { LinkConstants } from '../runtime/link-constants.js';
import {
  asDevicePtr,
  asHostPtr,
  asNcclComm,
  asStreamHandle,
  type ChildGraphHandle,
  type DevicePtr,
  type EventHandle,
  type GraphHandle,
  type HostPtr,
  loadBinding,
} from '../runtime/binding.js';
import { hostMicros } from '../runtime/host-clock.js';
import { ProfileBoard } from './profile-board.js';
import type { WorkerFault } from './worker-init.js';
import { parentPort } from 'node:worker_threads';
import v8 from 'node:v8';
import { drain, enqueuedSoFar, serve, until } from './serve-loop.js';
import type { StreamState } from './stream-watch.js';
import type { LlConfig, WorkerContext } from './worker-context.js';

/** One space of an isolate's V8 heap (heapSpaces). */
export interface HeapSpace {
  name: string;
  /** Reserved and committed for the space. */
  sizeBytes: number;
  /** Of which resident. */
  physicalBytes: number;
  usedBytes: number;
}

export function deviceControl(ctx: WorkerContext) {
  return {
    /** Bind the device; returns where in the completion buffer the GPU-visible counters start. */
    async open(): Promise<{
      ordinal: number;
      backend: string;
      deviceCount: number;
      completionOffset: number;
      pinned: { cpu: number | null; why?: string };
    }> {
      // Pinned before the device is bound, so what the context allocates for this thread is
      // first touched on the core (and NUMA node) the thread will stay on.
      // Unasked, the runtime knows why (its placement plan); the worker reports only what it saw.
      let pinned: { cpu: number | null; why?: string } = { cpu: null };
      if (ctx.init.cpu !== undefined) {
        try {
          loadBinding().setThreadAffinity([ctx.init.cpu]);
          pinned = { cpu: ctx.init.cpu };
        } catch (e) {
          pinned = { cpu: null, why: (e as Error).message };
        }
      }
      ctx.dev.bindDevice(ctx.init.ordinal, ctx.init.loopback);
      ctx.stream = ctx.dev.streamCreate();
      // Registration takes whole pages; a SharedArrayBuffer need not start on one, so the buffer
      // carries a spare page and the counters start where the registered pages do.
      ctx.registration = ctx.dev.hostRegister(new Uint8Array(ctx.init.completion));
      if (ctx.registration.bytes < ctx.init.mailboxOffset + ctx.init.mailboxBytes) {
        throw new Error(
          `${ctx.tag}: only ${ctx.registration.bytes} bytes of the completion buffer could be registered; ${ctx.init.mailboxOffset + ctx.init.mailboxBytes} needed`,
        );
      }
      ctx.completion = new Uint32Array(ctx.init.completion, ctx.registration.byteOffset, ctx.init.completionSlots);
      ctx.signalBase = ctx.registration.devicePtr;
      ctx.mailbox = {
        devicePtr: asDevicePtr(ctx.registration.devicePtr + ctx.init.mailboxOffset),
        bytes: ctx.init.mailboxBytes,
      };
      ctx.serving = serve(ctx).catch((e: unknown) => {
        parentPort?.postMessage({
          type: 'fault',
          rank: ctx.init.rank,
          seq: 0,
          op: -1,
          code: 'ERR_WORKER_LOOP',
          message: `${ctx.tag}: ${(e as Error).message}`,
        } satisfies WorkerFault);
      });
      return {
        ordinal: ctx.init.ordinal,
        backend: ctx.init.backend,
        deviceCount: ctx.dev.deviceCount(),
        completionOffset: ctx.registration.byteOffset,
        pinned,
      };
    },

    async alloc(bytes: number): Promise<DevicePtr> {
      ctx.needOpen('alloc');
      return ctx.dev.malloc(bytes);
    },

    async free(ptr: number): Promise<void> {
      ctx.needOpen('free');
      // Records still in the ring or on the stream may use this memory: the seed's lifetime hazard.
      await drain(ctx, 10_000);
      ctx.dev.free(asDevicePtr(ptr));
    },

    async upload(ptr: number, data: Uint8Array): Promise<void> {
      ctx.needOpen('upload');
      // A synchronous copy does not order against a non-blocking stream: drain it first.
      await drain(ctx, 10_000);
      ctx.dev.upload(asDevicePtr(ptr), data);
    },

    async download(ptr: number, bytes: number): Promise<Uint8Array> {
      ctx.needOpen('download');
      await drain(ctx, 10_000);
      const out = new Uint8Array(bytes);
      ctx.dev.download(out, asDevicePtr(ptr));
      return Comlink.transfer(out, [out.buffer]);
    },

    /**
     * n i32 words as the device holds them now, NOT ordered after the stream's records: a stalled
     * step's diagnosis (a link's refusal words), where a drain would wait out the stall itself.
     */
    async peekI32(ptr: number, n: number): Promise<Int32Array> {
      ctx.needOpen('peekI32');
      const out = new Int32Array(n);
      ctx.dev.download(out, asDevicePtr(ptr));
      return Comlink.transfer(out, [out.buffer]);
    },

    async createEvent(timing: boolean): Promise<EventHandle> {
      ctx.needOpen('createEvent');
      return ctx.dev.eventCreate(timing);
    },

    async destroyEvent(event: EventHandle): Promise<void> {
      ctx.needOpen('destroyEvent');
      await drain(ctx, 10_000);
      ctx.dev.eventDestroy(event);
    },

    async elapsedMs(start: EventHandle, end: EventHandle): Promise<number> {
      ctx.needOpen('elapsedMs');
      await drain(ctx, 10_000);
      return ctx.dev.eventElapsedMs(start, end);
    },

    /**
     * Milliseconds between each pair [start0, end0, start1, end1, ...]: one call for a step's joins.
     * The caller has seen every record of these events ENQUEUED (the profiler waits for its stamp
     * records). This waits for the events themselves, never for the stream: the profiler reads a
     * step while the next one runs, and a drain here waited for that next step too, then held up
     * the step after it behind this worker's once-a-millisecond event-loop turn (profiling cost
     * 31% of tokens/s on bench, decode-2xH200-2026-11-30).
     */
    async elapsedMsPairs(events: EventHandle[], newest?: EventHandle): Promise<number[]> {
      ctx.needOpen('elapsedMsPairs');
      if (events.length % 2 !== 0)
        throw new Error(`elapsedMsPairs: an even number of events (start, end pairs), got ${events.length}`);
      // Records published before this call are enqueued first, so no event is queried on an older
      // record; then, when the caller names the newest event (one stream records them in order,
      // so its completion is everyone's), one query instead of one per event.
      await enqueuedSoFar(ctx, 10_000);
      const awaited = newest === undefined ? events : [newest];
      await until(
        ctx,
        () => awaited.every((e) => ctx.dev.eventQuery(e)),
        10_000,
        `${awaited.length} event(s) completed`,
      );
      const out: number[] = [];
      for (let i = 0; i < events.length; i += 2) out.push(ctx.dev.eventElapsedMs(events[i]!, events[i + 1]!));
      return out;
    },

    async linkConstants(): Promise<LinkConstants> {
      const refusal = ctx.dev.refusalWords();
      return {
        signalBytes: ctx.dev.arSignalBytes(),
        maxBlocks: ctx.dev.arMaxBlocks(),
        llStateBytes: ctx.dev.llStateBytes(),
        llDepth: ctx.dev.llDepth(),
        llMaxValues: ctx.dev.llMaxValues(),
        refusedEntry: refusal.entry,
        refusedExit: refusal.exit,
      };
    },

    /** Where this rank's LL joins find their buffers (set again when the link grows them). */
    async llConfigure(c: LlConfig): Promise<void> {
      ctx.needOpen('llConfigure');
      await drain(ctx, 10_000);
      ctx.dev.llConfigure(
        asDevicePtr(c.selfRecv),
        asDevicePtr(c.peerRecv),
        c.cap,
        asDevicePtr(c.selfState),
        asDevicePtr(c.peerState),
        ctx.init.rank,
        asDevicePtr(c.err),
        c.spinLimit,
        c.serveIdleMicros,
      );
      ctx.llReady = true;
    },

    /** What this rank's LL server has done (zeros on the CPU reference, which has none). */
    async llServeStats(deep = false): Promise<{ jobs: number; launches: number }> {
      ctx.needOpen('llServeStats');
      return ctx.dev.llServeStats(deep);
    },

    /**
     * Generate a bf16 weight slice on this rank's stream (cold: model load), after every record
     * published before the call: without that wait a memset of the same buffer, published first,
     * could still be in the ring when the slice was enqueued, and land on it afterwards (the GPU
     * suite's generator test read its poison back, once, on one GPU). The loader drains before
     * the first step.
     */
    async genWeights(
      dst: number,
      seed: string,
      id: number,
      base: number,
      rows: number,
      srcCols: number,
      colStart: number,
      cols: number,
      kind: number,
      scale: number,
    ): Promise<void> {
      ctx.needOpen('genWeights');
      await enqueuedSoFar(ctx, 10_000);
      // The next step kernel must not start before the weights it may read ahead are written.
      ctx.pdlChain.reset();
      const ptr = asDevicePtr(dst);
      ctx.dev.launchGenWeights(ptr, seed, id, base, rows, srcCols, colStart, cols, kind, scale, ctx.stream);
    },

    /**
     * The card's read floor: `bytes` of device memory filled with a non-zero byte, then read by a
     * kernel that only reads, `reps` times (replays of a captured graph on CUDA), each bracketed by
     * timing events. Returns each read's GB/s. Cold path: it drains first and frees what it took.
     */
    async readFloor(bytes: number, reps: number): Promise<number[]> {
      ctx.needOpen('readFloor');
      await drain(ctx, 10_000);
      ctx.pdlChain.reset();
      const buf = ctx.dev.malloc(bytes);
      const sink = ctx.dev.malloc(4);
      const e0 = ctx.dev.eventCreate(true);
      const e1 = ctx.dev.eventCreate(true);
      let graph: GraphHandle | undefined;
      try {
        ctx.dev.memsetAsync(buf, 0x3c, bytes, ctx.stream);
        ctx.dev.launchReadFloor(buf, bytes, sink, ctx.stream);
        if (ctx.init.backend === 'cuda') {
          ctx.dev.streamBeginCapture(ctx.stream);
          ctx.dev.launchReadFloor(buf, bytes, sink, ctx.stream);
          graph = ctx.dev.streamEndCapture(ctx.stream);
        }
        const gbps: number[] = [];
        for (let r = 0; r < reps; r++) {
          ctx.dev.eventRecord(e0, ctx.stream);
          if (graph !== undefined) ctx.dev.graphLaunch(graph, ctx.stream);
          else ctx.dev.launchReadFloor(buf, bytes, sink, ctx.stream);
          ctx.dev.eventRecord(e1, ctx.stream);
          ctx.dev.streamSynchronize(ctx.stream);
          gbps.push(bytes / (ctx.dev.eventElapsedMs(e0, e1) * 1e6));
        }
        return gbps;
      } finally {
        ctx.dev.streamSynchronize(ctx.stream);
        if (graph !== undefined) ctx.dev.graphDestroy(graph);
        ctx.dev.eventDestroy(e0);
        ctx.dev.eventDestroy(e1);
        ctx.dev.free(sink);
        ctx.dev.free(buf);
      }
    },

    async hostAlloc(bytes: number): Promise<HostPtr> {
      ctx.needOpen('hostAlloc');
      return ctx.dev.hostAlloc(bytes);
    },
    async hostFree(ptr: number): Promise<void> {
      ctx.needOpen('hostFree');
      await drain(ctx, 10_000);
      ctx.dev.hostFree(asHostPtr(ptr));
    },

    async destroyGraph(slot: number): Promise<void> {
      ctx.needOpen('destroyGraph');
      await drain(ctx, 10_000);
      const g = ctx.graphs.get(slot);
      if (g === undefined) throw new Error(`${ctx.tag}: no graph in slot ${slot}`);
      ctx.graphs.delete(slot);
      ctx.dev.graphDestroy(g);
    },

    /** The CPUs this worker's thread may run on (CUDA backend: the addon asks the kernel). */
    async threadAffinity(): Promise<number[]> {
      if (ctx.init.backend !== 'cuda') throw new Error(`${ctx.tag}: threadAffinity needs the CUDA backend's addon`);
      return loadBinding().threadAffinity();
    },

    /** This ring's profile board (or none), and the host clock base the main thread counts from. */
    async setProfileBoard(buffer: SharedArrayBuffer | undefined, base: bigint): Promise<void> {
      if (!buffer) {
        ctx.board = undefined;
        return;
      }
      const b = new ProfileBoard(buffer, ctx.ring.view.capacity);
      ctx.board = { marks: b.marks, stamps: b.stamps, offsetUs: hostMicros(base) - performance.now() * 1000 };
    },

    /** The native handle of child graph `slot`, for the peer's thread to build a parent with. */
    async childGraphHandle(slot: number): Promise<ChildGraphHandle> {
      ctx.needOpen('childGraphHandle');
      const c = ctx.children.get(slot);
      if (c === undefined) throw new Error(`${ctx.tag}: no child graph in slot ${slot}`);
      return c;
    },

    /**
     * Seed 003's parent graph from this thread's children `owner` and `post` and the peer's child
     * (its native handle); stored as executable graph `slot`.
     */
    async buildParentGraph(spec: {
      slot: number;
      owner: number;
      post: number;
      peerChild: ChildGraphHandle;
      peerDevice: number;
      copies: Array<{ dst: number; src: number; bytes: number }>;
    }): Promise<void> {
      ctx.needOpen('buildParentGraph');
      if (ctx.graphs.has(spec.slot)) throw new Error(`${ctx.tag}: graph slot ${spec.slot} is in use`);
      const owner = ctx.children.get(spec.owner),
        post = ctx.children.get(spec.post);
      if (owner === undefined || post === undefined)
        throw new Error(`${ctx.tag}: no child graph in slot ${owner === undefined ? spec.owner : spec.post}`);
      ctx.graphs.set(
        spec.slot,
        ctx.dev.parentGraphBuild(
          owner,
          spec.peerChild,
          post,
          spec.peerDevice,
          spec.copies.map((c) => ({ dst: asDevicePtr(c.dst), src: asDevicePtr(c.src), bytes: c.bytes })),
          ctx.stream,
        ),
      );
    },

    /** Refused (by the addon) while a parent graph holds it: destroy the parent first. */
    async destroyChildGraph(slot: number): Promise<void> {
      ctx.needOpen('destroyChildGraph');
      const c = ctx.children.get(slot);
      if (c === undefined) throw new Error(`${ctx.tag}: no child graph in slot ${slot}`);
      ctx.dev.childGraphDestroy(c);
      ctx.children.delete(slot);
    },

    /** NCCL's version, loading the library; throws naming it when it is missing. */
    async ncclLoad(): Promise<number> {
      return ctx.dev.ncclLoad();
    },
    async ncclUniqueId(): Promise<Uint8Array> {
      ctx.dev.ncclLoad();
      return ctx.dev.ncclGetUniqueId();
    },
    /** Blocks this thread until every rank has joined: call it on all ranks at once. */
    async ncclInit(id: Uint8Array, nranks: number, rank: number): Promise<void> {
      ctx.needOpen('ncclInit');
      if (ctx.comm !== 0) return;
      ctx.comm = ctx.dev.ncclCommInitRank(id, nranks, rank);
    },

    async enablePeer(peer: number): Promise<void> {
      ctx.needOpen('enablePeer');
      ctx.dev.enablePeerAccess(peer);
    },
    async disablePeer(peer: number): Promise<void> {
      ctx.needOpen('disablePeer');
      ctx.dev.disablePeerAccess(peer);
    },
    async canAccessPeer(peer: number): Promise<boolean> {
      return ctx.dev.canAccessPeer(ctx.init.ordinal, peer);
    },
    async memInfo(): Promise<{ free: number; total: number }> {
      ctx.needOpen('memInfo');
      return ctx.dev.memGetInfo();
    },

    /**
     * This worker's own V8 heap, space by space: its isolate is in the process's RSS but in none
     * of the main thread's figures (the soak's smaps checkpoints ask for it). `physicalBytes` is
     * what of a space is resident: a young generation's pages count once first written.
     */
    async heapSpaces(): Promise<HeapSpace[]> {
      return v8.getHeapSpaceStatistics().map((s) => ({
        name: s.space_name,
        sizeBytes: s.space_size,
        physicalBytes: s.physical_space_size,
        usedBytes: s.space_used_size,
      }));
    },

    async drain(timeoutMs = 10_000): Promise<void> {
      ctx.needOpen('drain');
      await drain(ctx, timeoutMs);
    },

    /** The stream as a query finds it now (runtime/stream-report.ts); throws the device's error. */
    async streamState(): Promise<StreamState> {
      ctx.needOpen('streamState');
      return ctx.watch.state(ctx, performance.now());
    },

    async stats(): Promise<{ executed: number; faulted: boolean; tail: number }> {
      return { executed: ctx.executed, faulted: ctx.faulted, tail: ctx.ring.view.tail() >>> 0 };
    },

    /**
     * Drain, then release everything. Nothing may be freed while the stream can still touch it:
     * a pending kernel would write into memory the allocator has handed to someone else.
     */
    async close(timeoutMs = 10_000): Promise<void> {
      if (ctx.stream === 0) {
        ctx.ring.stop();
        return;
      }
      let drained: unknown;
      try {
        await drain(ctx, timeoutMs);
      } catch (e) {
        drained = e;
      }
      ctx.closing = true;
      ctx.ring.stop();
      await ctx.serving;
      // Parents before children (a held child refuses to go); a child the PEER's parent still holds
      // is left to releaseDevice, whose teardown forces it (CUDA cloned it into that parent).
      for (const g of ctx.graphs.values()) ctx.dev.graphDestroy(g);
      ctx.graphs.clear();
      for (const c of ctx.children.values()) {
        try {
          ctx.dev.childGraphDestroy(c);
        } catch {
          /* held by the peer's parent */
        }
      }
      ctx.children.clear();
      ctx.progress?.destroy(ctx.dev);
      if (ctx.comm !== 0) ctx.dev.ncclCommDestroy(ctx.comm);
      ctx.comm = asNcclComm(0);
      if (ctx.registration) ctx.dev.hostUnregister(ctx.registration.hostPtr);
      ctx.registration = undefined;
      // releaseDevice synchronizes the device before it frees anything.
      ctx.dev.releaseDevice();
      ctx.stream = asStreamHandle(0);
      if (drained) throw drained;
    },
  };
}
