/**
 * Seed 003's multi-device parent graph (seed 003: the Rust engine's multi-device graph of one
 * expert-parallel step, docs/architecture.md#terms): per-device child graphs joined by explicit
 * peer copies.
 *
 *   owner child (rank 0) ─────────────────────────────────────────────────┐
 *   tx copies (rank 0 -> rank 1) ── peer child (rank 1) ── rx copy (rank 1 -> rank 0) ── post child (rank 0)
 *
 * Why this shape and not one capture spanning both streams (runtime/graph.ts): the seed found
 * that a captured `cudaMemcpyPeerAsync` is refused, so the copies are graph nodes built by hand,
 * and each device's work is captured on that device's own stream by the thread that owns it.
 * The hazards it records, each kept here:
 * - Peer pointers resolved under the right device: the rx copy node is added under the PEER's
 *   device (the seed's `graph_ctx`), and the addon refuses a copy whose ends are not on the
 *   devices its direction says.
 * - Children outlive the parent: the executable parent holds its three children; a held child
 *   refuses to be destroyed, so `destroy()` goes parent first, then children.
 * - A launch on rank 0's stream runs rank 1's nodes on streams rank 1 does not know: it is fenced
 *   both ways (`launchFenced`).
 * - In loopback both ranks are on one device: the copies are then copies within it, and the addon
 *   builds the graph only because both threads bound the device in loopback (addon/device.cpp).
 *
 * CPU reference: there are no graphs, so a launch issues the parts with one event per edge of the
 * graph, in the graph's order (tx before the owner child, so rank 1's chain is ordered after the
 * copies and NOT after the owner child, as in the graph). The reference's ordering checks then
 * prove the graph's edges suffice: a part that needed an edge the graph lacks is refused.
 */
import type { DevicePtr } from './binding.js';
import type { Runtime } from './runtime.js';
import type { DeviceEvent, Rank } from './rank.js';
import {
  createFences,
  destroyFences,
  fenceIn,
  fenceOut,
  launchFenced,
  nextGraphSlot,
  untilCaptured,
  type LaunchFences,
} from './graph.js';

/** `bytes` from `src` to `dst`, one contiguous range. */
export interface PeerCopy {
  dst: DevicePtr;
  src: DevicePtr;
  bytes: number;
}

export interface ParentGraphParts {
  /** Rank 0's records for its half (the owner child). */
  owner(): void;
  /** Rank 1's records for its half (the peer child), after the tx copies. */
  peer(): void;
  /** Rank 0's records after the owner child and the rx copy (the post child). */
  post(): void;
  /** Rank 0 -> rank 1, before the peer child (seed 003: xq, xs, ids, weights). */
  tx: readonly PeerCopy[];
  /** Rank 1 -> rank 0, after the peer child (the contributions). */
  rx: PeerCopy;
}

const TX_COPIES = 4;

interface CudaHandles {
  exec: number;
  owner: number;
  post: number;
  peer: number;
}

export class ParentGraph {
  private destroyed = false;

  private constructor(
    private readonly rt: Runtime,
    private readonly ranks: readonly [Rank, Rank],
    private readonly parts: ParentGraphParts,
    private readonly fences: LaunchFences,
    private readonly cuda?: CudaHandles,
    private readonly edges?: { tx: DeviceEvent; rx: DeviceEvent },
  ) {}

  static async build(rt: Runtime, parts: ParentGraphParts): Promise<ParentGraph> {
    const ranks = rt.pair('the EP parent graph');
    if (parts.tx.length !== TX_COPIES)
      throw new TypeError(`parent graph: ${TX_COPIES} tx copies (xq, xs, ids, weights), got ${parts.tx.length}`);
    for (const [i, c] of [...parts.tx, parts.rx].entries()) {
      if (!Number.isSafeInteger(c.bytes) || c.bytes <= 0)
        throw new TypeError(`parent graph: copy ${i} needs a positive byte count, got ${c.bytes}`);
    }
    return rt.backend === 'cpu' ? ParentGraph.emulate(rt, ranks, parts) : ParentGraph.capture(rt, ranks, parts);
  }

  private static async emulate(
    rt: Runtime,
    [a, b]: readonly [Rank, Rank],
    parts: ParentGraphParts,
  ): Promise<ParentGraph> {
    const [tx, rx] = await Promise.all([a.createEvent(), b.createEvent()]);
    return new ParentGraph(rt, [a, b], parts, await createFences(rt), undefined, { tx, rx });
  }

  private static async capture(
    rt: Runtime,
    [a, b]: readonly [Rank, Rank],
    parts: ParentGraphParts,
  ): Promise<ParentGraph> {
    const h: CudaHandles = {
      exec: nextGraphSlot(),
      owner: nextGraphSlot(),
      post: nextGraphSlot(),
      peer: nextGraphSlot(),
    };
    const made: Array<[typeof a, number]> = [];
    try {
      // Each child on its own device's stream, by the thread that owns that stream.
      a.beginCapture();
      parts.owner();
      a.endCaptureChild(h.owner);
      a.beginCapture();
      parts.post();
      const endA = a.endCaptureChild(h.post);
      b.beginCapture();
      parts.peer();
      const endB = b.endCaptureChild(h.peer);
      await untilCaptured(rt, [endA, endB]);
      made.push([a, h.owner], [a, h.post], [b, h.peer]);
      const peerChild = await b.control.call('childGraphHandle', h.peer);
      await a.control.call('buildParentGraph', {
        slot: h.exec,
        owner: h.owner,
        post: h.post,
        peerChild,
        peerDevice: b.ordinal,
        copies: [...parts.tx, parts.rx].map((c) => ({ dst: c.dst, src: c.src, bytes: c.bytes })),
      });
    } catch (e) {
      for (const [r, slot] of made) await r.control.call('destroyChildGraph', slot).catch(() => undefined);
      throw e;
    }
    return new ParentGraph(rt, [a, b], parts, await createFences(rt), h);
  }

  /** One replay: the EP step from the fan-out to the merge. */
  launch(): void {
    if (this.destroyed) throw new Error('parent graph launch after destroy()');
    if (this.cuda) {
      launchFenced(this.rt, this.cuda.exec, this.fences);
      return;
    }
    const [a, b] = this.ranks;
    const { tx, rx } = this.edges!;
    fenceIn(this.rt, this.fences);
    for (const c of this.parts.tx) a.copy(c.dst, c.src, c.bytes);
    a.record(tx);
    this.parts.owner();
    b.wait(tx);
    this.parts.peer();
    b.copy(this.parts.rx.dst, this.parts.rx.src, this.parts.rx.bytes);
    b.record(rx);
    a.wait(rx);
    this.parts.post();
    fenceOut(this.rt, this.fences);
  }

  /** Parent first, then its children (a held child refuses to go), then the events. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    const [a, b] = this.ranks;
    if (this.cuda) {
      await a.control.call('destroyGraph', this.cuda.exec);
      await a.control.call('destroyChildGraph', this.cuda.owner);
      await a.control.call('destroyChildGraph', this.cuda.post);
      await b.control.call('destroyChildGraph', this.cuda.peer);
    } else {
      await this.rt.drain();
      await Promise.all([a.destroyEvent(this.edges!.tx), b.destroyEvent(this.edges!.rx)]);
    }
    await destroyFences(this.rt, this.fences);
  }
}
