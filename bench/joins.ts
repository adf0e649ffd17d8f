/**
 * `joins`: every transport and op at 4 KB to 1 MB, on the two-GPU machine.
 *
 * - device: CUDA timing events around each replay of a graph holding JOINS_PER_GRAPH ops; one
 *   sample = elapsed / JOINS_PER_GRAPH; REPLAYS samples per row, >= 1,000 ops.
 *   - A multi-device graph (host, peer, push, oneshot) joins both devices itself: events on rank
 *     0's stream around each fenced launch.
 *   - Per-rank graphs (ll, nccl) replay back to back on both devices, as the ops of a walk do,
 *     with events on BOTH ranks' streams around each replay; a sample is the larger of the two
 *     ranks' elapsed times (each from its own device's events). Rank 0's alone would not do: in a
 *     one-way join (broadcast from rank 0) the sender runs a few joins ahead of the receiver.
 *   - `device-drained`, per-rank graphs only: the method of joins runs 0 to 27, kept beside it
 *     for comparison. Rank 0 waits on an event rank 1 records after each replay, so the pipeline
 *     empties between replays and each sample also carries that cross-device wait and a cold
 *     start (7-14 us a replay, 0.06-0.14 us an op at 100 ops a graph; see JOINS_PER_GRAPH).
 * - host: eager joins; one sample = the main thread's clock from the op's first ring record until
 *   both workers have published "enqueued" for their last record of it. For `ll` that is the LL
 *   server's path (a stream memory operation per join, joins up to 32 KB); `host-launch` is the
 *   same with the server off (a launch per join), for comparison.
 *
 * `bytes` is what each rank holds after the op: the vector for broadcast and all-reduce, the full
 * gathered buffer for the gathers (each rank's part is half of it).
 */
import { Runtime } from '../src/runtime/runtime.js';
import { ArLink, LL_SERVE_IDLE_MICROS } from '../src/runtime/link.js';
import { CapturedGraph } from '../src/runtime/graph.js';
import { openTransport } from '../src/runtime/transports/open.js';
import type { PerRank, Transport, TransportName } from '../src/runtime/transports/transport.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import type { DeviceEvent, Rank } from '../src/runtime/rank.js';
import { placementNote, row, type Row } from './results-file.js';
import type { Progress } from '../src/cli/progress.js';
import { count as scaled, pairOf, type JoinOp, type SuiteContext } from './suite-context.js';

export const JOIN_BYTES = [4096, 8192, 16_384, 65_536, 262_144, 1_048_576];
/** The sizes of a smoke run on the CPU reference: one small join, one large. */
const SMOKE_BYTES = [4096, 65_536];
/**
 * Ops per captured graph (default 100; MEMRA_JOINS_PER_GRAPH sets another, and the method string
 * records it). Each replay also pays fixed costs no join pays in a walk: the graphs' launch and
 * rank 0's wait on rank 1's end event, which empties the pipeline between replays. Measured with
 * 100 and with 1000 ops a graph on one machine (`scripts/gpu-session.sh graph-ops`), those cost 7-14
 * us a replay: at 100 ops they put 0.06-0.14 us on every `ll` 4-16 KB op (8 KB all-gather
 * 2.02-2.03 against 1.96; broadcast 1.36 against 1.24). That measured the drained method (the
 * `device-drained` rows now); the `device` rows of per-rank graphs no longer wait between
 * replays, so what is left of it is the graph's launch. 1000 is not the default: in a
 * multi-device graph of 1000 ops the push, oneshot and peer broadcasts slowed (8 KB: push and
 * oneshot 3.8 -> 10.2 us, peer 10-12 -> 77), a cost of the graph's size, not of a join.
 */
function graphOps(v: string | undefined): number {
  if (v === undefined || v === '') return 100;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1 || n > 10_000)
    throw new RangeError(`MEMRA_JOINS_PER_GRAPH must be an integer from 1 to 10000, got '${v}'`);
  return n;
}
/**
 * Whether the `ll` rows include the LL server's host row (MEMRA_JOINS_LL_SERVER: 'on', the
 * default, or 'off'). Off, no server grid runs on either device during the whole suite, to see
 * whether its earlier runs change the device rows that follow them.
 */
function llServerRows(v: string | undefined): boolean {
  if (v === undefined || v === '' || v === 'on') return true;
  if (v === 'off') return false;
  throw new RangeError(`MEMRA_JOINS_LL_SERVER must be 'on' or 'off', got '${v}'`);
}
/**
 * Untimed eager joins before each host row. With 100, the first row after each size's setup
 * (its reserve and allocations) came out 1 to 3 us above the rest, whatever the op: `ll`
 * broadcast at 4 KB 8.4 to 9.4 us against 5.9 to 7.6 for the other ops (joins runs 14 to 17).
 */
const HOST_WARM = { full: 1000, smoke: 1 };
/** Eager joins a host row times on the CPU reference (a smoke run). */
const SMOKE_HOST_JOINS = 5;
const REPLAYS = 48;

interface Buffers {
  src: PerRank;
  dst: PerRank;
}

/** Every join here is between two ranks. */
const ranksOf = (rt: Runtime): readonly [Rank, Rank] => rt.pair('the joins suite');

function issue(t: Transport, op: JoinOp, b: Buffers, bytes: number): void {
  const n = bytes / 4;
  switch (op) {
    case 'broadcast':
      t.broadcast(0, b.src[0], b.dst, n);
      break;
    case 'allGather':
      t.allGather(b.src, b.dst, n / 2);
      break;
    case 'gather':
      t.gather(0, b.src, b.dst[0], n / 2);
      break;
    case 'allReduce':
      t.allReduce(b.src, n, b.dst);
      break;
  }
}

/** Per rank, REPLAYS + 1 timing events (marks); on rank 1 also REPLAYS plain ones (ends). */
interface TimingEvents {
  marks: [DeviceEvent[], DeviceEvent[]];
  ends: DeviceEvent[];
}

async function timingEvents(rt: Runtime): Promise<TimingEvents> {
  const make = async (r: 0 | 1, n: number, timing: boolean): Promise<DeviceEvent[]> => {
    const out: DeviceEvent[] = [];
    for (let i = 0; i < n; i++) out.push(await ranksOf(rt)[r].createEvent(timing));
    return out;
  };
  return {
    marks: [await make(0, REPLAYS + 1, true), await make(1, REPLAYS + 1, true)],
    ends: await make(1, REPLAYS, false),
  };
}

/** Per-op samples from one rank's marks around REPLAYS replays (after the replays have run). */
async function perOp(rt: Runtime, r: 0 | 1, marks: DeviceEvent[], ops: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < REPLAYS; i++) out.push(((await ranksOf(rt)[r].elapsedMs(marks[i]!, marks[i + 1]!)) * 1000) / ops);
  return out;
}

/**
 * Replays back to back on both ranks, no cross-device wait between them: the larger of the two
 * ranks' times per replay. The two ranks' marks i are not the same instant (each device's own
 * events), but over a replay both ranks run the same joins, and each two-way join holds both.
 */
async function pipelinedSamples(rt: Runtime, g: CapturedGraph, ev: TimingEvents, ops: number): Promise<number[]> {
  const [a, b] = ranksOf(rt);
  a.record(ev.marks[0][0]!);
  b.record(ev.marks[1][0]!);
  for (let i = 0; i < REPLAYS; i++) {
    g.launch();
    a.record(ev.marks[0][i + 1]!);
    b.record(ev.marks[1][i + 1]!);
  }
  await rt.drain();
  const [s0, s1] = [await perOp(rt, 0, ev.marks[0], ops), await perOp(rt, 1, ev.marks[1], ops)];
  return s0.map((x, i) => Math.max(x, s1[i]!));
}

/**
 * Rank 0's events around each replay. After a per-rank graph rank 0 waits on an event rank 1
 * records after its replay, so the end mark completes only when both devices are done.
 */
async function drainedSamples(
  rt: Runtime,
  g: CapturedGraph,
  perRank: boolean,
  ev: TimingEvents,
  ops: number,
): Promise<number[]> {
  const [a, b] = ranksOf(rt);
  a.record(ev.marks[0][0]!);
  for (let i = 0; i < REPLAYS; i++) {
    g.launch();
    if (perRank) {
      b.record(ev.ends[i]!);
      a.wait(ev.ends[i]!);
    }
    a.record(ev.marks[0][i + 1]!);
  }
  await rt.drain();
  return perOp(rt, 0, ev.marks[0], ops);
}

/** Host time per eager join, after `warm` untimed ones; drains and checks for faults after. */
async function hostSamples(
  rt: Runtime,
  t: Transport,
  op: JoinOp,
  bufs: Buffers,
  bytes: number,
  joins: number,
  warm: number,
): Promise<number[]> {
  const [a, b] = ranksOf(rt);
  const host: number[] = [];
  for (let i = -warm; i < joins; i++) {
    const t0 = performance.now();
    issue(t, op, bufs, bytes);
    const h0 = a.ring.view.head(),
      h1 = b.ring.view.head();
    while (!(a.enqueued(h0) && b.enqueued(h1))) {
      /* spin */
    }
    if (i >= 0) host.push((performance.now() - t0) * 1000);
  }
  await rt.drain();
  if (rt.failure) throw rt.failure;
  return host;
}

/** What every transport's run shares. */
interface Plan {
  backend: BackendKind;
  pair: ReturnType<typeof pairOf>;
  ops: readonly JoinOp[];
  sizes: readonly number[];
  progress: Progress;
  counter: { done: number; total: number };
  /** Eager joins timed per host row, and untimed before it. */
  hostJoins: number;
  hostWarm: number;
  JOINS_PER_GRAPH: number;
  llServer: boolean;
}

export async function benchJoins(ctx: SuiteContext): Promise<Row[]> {
  const { backend, progress, transports, ops } = ctx;
  const pair = pairOf(ctx, 'joins');
  // A bad value fails the suite, not each transport.
  const perGraph = graphOps(process.env.MEMRA_JOINS_PER_GRAPH);
  const llServer = llServerRows(process.env.MEMRA_JOINS_LL_SERVER);
  const rows: Row[] = [];
  const sizes = ctx.smoke ? SMOKE_BYTES : JOIN_BYTES;
  const total = transports.length * ops.length * sizes.length;
  const plan: Plan = {
    backend,
    pair,
    ops,
    sizes,
    progress,
    counter: { done: 0, total },
    hostJoins: scaled(ctx, Math.max(1000, ctx.joins / 20), SMOKE_HOST_JOINS),
    hostWarm: scaled(ctx, HOST_WARM.full, HOST_WARM.smoke),
    JOINS_PER_GRAPH: perGraph,
    llServer,
  };
  for (const name of transports) {
    // A runtime per transport: one transport's refusal costs its own rows, not the others'.
    try {
      rows.push(...(await benchTransport(name, plan)));
      ctx.flush(rows); // a later transport that crashes the process must not take these with it
    } catch (e) {
      ctx.fail(name, e as Error);
    }
  }
  progress.tick('joins', total, total);
  return rows;
}

async function benchTransport(
  name: TransportName,
  { backend, pair, ops, sizes, progress, counter, hostJoins, hostWarm, JOINS_PER_GRAPH, llServer }: Plan,
): Promise<Row[]> {
  const rows: Row[] = [];
  const rt = await Runtime.open({ backend, ...pair, spinMicros: 2000 });
  const link = await ArLink.open(rt);
  try {
    const maxN = Math.max(...sizes) / 4;
    await link.reserve(maxN);
    const [a, b] = ranksOf(rt);
    const bufs: Buffers = {
      src: [await a.alloc(maxN * 4), await b.alloc(maxN * 4)],
      dst: [await a.alloc(maxN * 4), await b.alloc(maxN * 4)],
    };
    for (const r of [0, 1]) ranksOf(rt)[r]!.fill(bufs.src[r]!, maxN, 1 + r); // never time on zeros
    const ev = await timingEvents(rt);
    const t = await openTransport(name, link);
    for (const op of ops) {
      for (const bytes of sizes) {
        progress.tick(`joins ${name}`, counter.done++, counter.total);
        if (process.env.MEMRA_BENCH_TRACE) console.error(`joins: ${name} ${op} ${bytes}`);
        const base = { suite: 'joins', op, transport: name, bytes, unit: 'us', preset: null };
        if (backend === 'cuda') {
          const g = await CapturedGraph.capture(
            rt,
            () => {
              for (let j = 0; j < JOINS_PER_GRAPH; j++) issue(t, op, bufs, bytes);
            },
            t.graphMode,
          );
          try {
            for (let w = 0; w < 3; w++) g.launch();
            const of = `${JOINS_PER_GRAPH} ops; sample = elapsed / ${JOINS_PER_GRAPH}`;
            if (t.graphMode === 'per-rank') {
              rows.push(
                row(
                  {
                    ...base,
                    metric: 'device',
                    method: `CUDA events on both ranks around each of ${REPLAYS} back-to-back replays of per-rank graphs of ${of}, the larger rank's`,
                  },
                  await pipelinedSamples(rt, g, ev, JOINS_PER_GRAPH),
                ),
              );
              rows.push(
                row(
                  {
                    ...base,
                    metric: 'device-drained',
                    method: `CUDA events on rank 0 around each replay of per-rank graphs of ${of}, rank 0 waiting on rank 1's end event after each`,
                  },
                  await drainedSamples(rt, g, true, ev, JOINS_PER_GRAPH),
                ),
              );
            } else {
              rows.push(
                row(
                  {
                    ...base,
                    metric: 'device',
                    method: `CUDA events on rank 0 around each replay of a multi-device graph of ${of}`,
                  },
                  await drainedSamples(rt, g, false, ev, JOINS_PER_GRAPH),
                ),
              );
            }
          } finally {
            await g.destroy();
          }
        }
        const hostMethod = `main-thread clock per eager join: first ring record until both workers published enqueued for their last; ${placementNote(rt.placement)}`;
        const hostRow = async (metric: string, method: string): Promise<void> => {
          rows.push(row({ ...base, metric, method }, await hostSamples(rt, t, op, bufs, bytes, hostJoins, hostWarm)));
        };
        if (name === 'll') {
          // Both ways an eager LL join can go (link.ts, llServeIdleMicros): through the LL server
          // (joins up to 32 KB; larger ones launch either way), and a launch per join.
          if (llServer) {
            await link.setLlServe(LL_SERVE_IDLE_MICROS);
            await hostRow('host', `${hostMethod}; LL server on: a stream write per join up to 32 KB`);
            await link.setLlServe(0);
          }
          await hostRow('host-launch', `${hostMethod}; LL server off: a launch per join`);
        } else {
          await hostRow('host', hostMethod);
        }
      }
    }
  } catch (e) {
    // Report the root cause: a refusal usually makes the other rank refuse too.
    for (const f of rt.faults) console.error(`joins: ${name}: fault: ${f.message}`);
    throw e;
  } finally {
    await link.close().catch((e: Error) => console.error(`joins: ${name}: link close: ${e.message}`));
    await rt.close().catch((e: Error) => console.error(`joins: ${name}: runtime close: ${e.message}`));
  }
  return rows;
}
