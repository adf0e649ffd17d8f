/**
 * A profile as a Chrome trace-event file (the JSON object form), which Perfetto and
 * chrome://tracing open: one process, one track for the main thread and one per rank's stream.
 *
 * Main thread: each step's host enqueue, and each join's host enqueue at its step's start +
 * hostStartUs (its first ring write). A join ends when both workers have enqueued it, which can
 * be after the next join began, so join slices may overlap. Perfetto draws overlapping complete
 * events on one track only when they nest, and mangles those that do not; so the joins stay on
 * the main thread's track, under their step, only when every slice there nests. Otherwise they
 * move to tracks of their own ("main thread: join enqueue"), as many as the deepest overlap
 * needs, each free of overlaps, and every time stays as measured.
 *
 * Rank streams: each join on its receiving rank, at its step's host start + deviceStartUs. A
 * device clock cannot be read against the host's, so the step's host start stands in for the
 * stream's step-start event; the stream starts no earlier than that, so slices may sit a little
 * early, never late, and their spacing within a step is exact.
 *
 * Times are µs from the first step's host start, rounded to whole ns: Perfetto stores ns, and
 * deciding whether slices nest on the very numbers it will see keeps the decision true there.
 */
import { HOPS, type JoinSample, type Profile, type StepSample } from './profile-data.js';

export interface TraceEvent {
  name: string;
  ph: 'X' | 'M';
  pid: number;
  tid: number;
  ts: number;
  dur?: number;
  cat?: string;
  args?: Record<string, unknown>;
}

export interface ChromeTrace {
  traceEvents: TraceEvent[];
  displayTimeUnit: 'ns' | 'ms';
  otherData: Record<string, unknown>;
}

export const TRACE_PID = 1;
export const MAIN_TID = 1;
/** Thread id of rank r's stream track. */
export function rankTid(rank: 0 | 1): number {
  return 10 + rank;
}
/** Thread id of the k-th own track of join enqueues (0-based), used when they cannot nest on the main thread's. */
export function joinEnqueueTid(lane: number): number {
  return 100 + lane;
}

/** A slice in whole ns before it becomes an event: integers, so nesting is decided exactly. */
interface Slice {
  startNs: number;
  endNs: number;
  event: Omit<TraceEvent, 'ts' | 'dur' | 'tid'>;
  parent: boolean;
}

export function chromeTrace(profile: Profile): ChromeTrace {
  const steps = new Map<number, StepSample>();
  for (const s of profile.steps) {
    checkStep(s);
    if (steps.has(s.step)) throw new RangeError(`chromeTrace: step ${s.step} appears twice in the profile's steps`);
    steps.set(s.step, s);
  }
  const byStep = new Map<number, Array<{ j: JoinSample; i: number }>>();
  profile.joins.forEach((j, i) => {
    checkJoin(j, i, steps);
    let list = byStep.get(j.step);
    if (!list) {
      list = [];
      byStep.set(j.step, list);
    }
    list.push({ j, i });
  });
  const ordered = [...steps.values()].sort((a, b) => a.hostStartMs - b.hostStartMs || a.step - b.step);
  const t0 = ordered[0]?.hostStartMs ?? 0;

  const stepSlices: Slice[] = [],
    joinSlices: Slice[] = [];
  /** Each step's slice drawn wide enough to hold its joins: what the main track shows if they nest there. */
  const widened: Slice[] = [];
  const ranks: [Slice[], Slice[]] = [[], []];
  for (const s of ordered) {
    const startUs = (s.hostStartMs - t0) * 1000,
      startNs = ns(startUs);
    const joins = (byStep.get(s.step) ?? []).sort(
      (a, b) => a.j.layer - b.j.layer || HOPS.indexOf(a.j.hop) - HOPS.indexOf(b.j.hop) || a.i - b.i,
    );
    const mine = joins.map(
      ({ j }): Slice => ({
        startNs: ns(startUs + j.hostStartUs),
        endNs: ns(startUs + j.hostStartUs + j.hostEnqueueUs),
        parent: false,
        event: {
          name: `enqueue ${j.hop} L${j.layer}`,
          cat: 'join enqueue',
          ph: 'X',
          pid: TRACE_PID,
          args: joinArgs(j),
        },
      }),
    );
    joinSlices.push(...mine);
    const stepArgs: Record<string, unknown> = {
      step: s.step,
      rows: s.rows,
      wallUs: s.wallUs,
      hostEnqueueUs: s.hostEnqueueUs,
    };
    const step: Slice = {
      startNs,
      endNs: ns(startUs + s.hostEnqueueUs),
      parent: true,
      event: { name: `step ${s.step} enqueue`, cat: 'step', ph: 'X', pid: TRACE_PID, args: stepArgs },
    };
    stepSlices.push(step);
    // The joins' enqueue can outlast the step's (workers finish enqueueing after the main thread
    // has moved on); to hold them as children the step is drawn wider, its args keeping the measured time.
    const joinsEndNs = Math.max(step.endNs, ...mine.map((m) => m.endNs));
    widened.push(
      joinsEndNs > step.endNs
        ? {
            ...step,
            endNs: joinsEndNs,
            event: { ...step.event, args: { ...stepArgs, drawnWiderToHoldJoinsUs: (joinsEndNs - startNs) / 1000 } },
          }
        : step,
    );
    for (const { j } of joins) {
      ranks[j.rank].push({
        startNs: ns(startUs + j.deviceStartUs),
        endNs: ns(startUs + j.deviceStartUs + j.deviceUs),
        parent: false,
        event: { name: `${j.hop} L${j.layer}`, cat: j.transport, ph: 'X', pid: TRACE_PID, args: joinArgs(j) },
      });
    }
  }

  const together = [...widened, ...joinSlices].sort(byStartLongestFirst);
  const joinsNest = nests(together);
  const lanes = joinsNest ? [] : intoLanes(joinSlices);
  const main = joinsNest ? together : stepSlices.sort(byStartLongestFirst);

  const m = profile.meta;
  const meta: TraceEvent[] = [
    {
      name: 'process_name',
      ph: 'M',
      pid: TRACE_PID,
      tid: 0,
      ts: 0,
      args: { name: `memra decode: ${m.preset} (${m.machine})` },
    },
    {
      name: 'thread_name',
      ph: 'M',
      pid: TRACE_PID,
      tid: MAIN_TID,
      ts: 0,
      args: { name: 'main thread (host enqueue)' },
    },
    { name: 'thread_sort_index', ph: 'M', pid: TRACE_PID, tid: MAIN_TID, ts: 0, args: { sort_index: 0 } },
  ];
  lanes.forEach((_, k) => {
    const name = k === 0 ? 'main thread: join enqueue' : `main thread: join enqueue (${k + 1})`;
    meta.push({ name: 'thread_name', ph: 'M', pid: TRACE_PID, tid: joinEnqueueTid(k), ts: 0, args: { name } });
    meta.push({
      name: 'thread_sort_index',
      ph: 'M',
      pid: TRACE_PID,
      tid: joinEnqueueTid(k),
      ts: 0,
      args: { sort_index: 1 + k },
    });
  });
  for (const r of [0, 1] as const) {
    meta.push({
      name: 'thread_name',
      ph: 'M',
      pid: TRACE_PID,
      tid: rankTid(r),
      ts: 0,
      args: { name: `rank ${r} stream (device)` },
    });
    meta.push({
      name: 'thread_sort_index',
      ph: 'M',
      pid: TRACE_PID,
      tid: rankTid(r),
      ts: 0,
      args: { sort_index: 1 + lanes.length + r },
    });
  }
  return {
    traceEvents: [
      ...meta,
      ...events(main, MAIN_TID),
      ...lanes.flatMap((lane, k) => events(lane, joinEnqueueTid(k))),
      ...events(ranks[0].sort(byStartLongestFirst), rankTid(0)),
      ...events(ranks[1].sort(byStartLongestFirst), rankTid(1)),
    ],
    // Joins last microseconds: the legacy viewer shows them in ns rather than rounding to 0 ms.
    displayTimeUnit: 'ns',
    otherData: {
      preset: m.preset,
      layers: m.layers,
      backend: m.backend,
      machine: m.machine,
      date: m.date,
      originHostMs: t0,
      joinEnqueue: joinsNest
        ? 'nested under their steps on the main thread track'
        : `on ${lanes.length} track(s) of their own: on the main thread track they would overlap without nesting`,
      deviceTimeline: "each stream's slices are placed from their step's host start; see deviceStartUs",
    },
  };
}

export function chromeTraceJson(profile: Profile): string {
  return JSON.stringify(chromeTrace(profile));
}

function joinArgs(j: JoinSample): Record<string, unknown> {
  return {
    step: j.step,
    token: j.token,
    layer: j.layer,
    hop: j.hop,
    transport: j.transport,
    bytes: j.bytes,
    rank: j.rank,
    deviceUs: j.deviceUs,
    deviceStartUs: j.deviceStartUs,
    hostStartUs: j.hostStartUs,
    hostEnqueueUs: j.hostEnqueueUs,
  };
}

function checkJoin(j: JoinSample, i: number, steps: Map<number, StepSample>): void {
  const where = `chromeTrace: join ${i} (step ${j.step}, layer ${j.layer}, hop ${JSON.stringify(j.hop)})`;
  if (!steps.has(j.step))
    throw new RangeError(
      `${where}: step ${j.step} is not among the profile's steps, so the join has no place on the timeline`,
    );
  if (j.rank !== 0 && j.rank !== 1) throw new RangeError(`${where}: rank must be 0 or 1, got ${String(j.rank)}`);
  for (const field of ['deviceUs', 'deviceStartUs', 'hostStartUs', 'hostEnqueueUs'] as const) {
    const v = j[field];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
      throw new RangeError(`${where}: ${field} must be a finite number ≥ 0, got ${String(v)}`);
  }
}

function checkStep(s: StepSample): void {
  if (typeof s.hostStartMs !== 'number' || !Number.isFinite(s.hostStartMs))
    throw new RangeError(
      `chromeTrace: step ${s.step}: hostStartMs must be a finite number, got ${String(s.hostStartMs)}`,
    );
  if (typeof s.hostEnqueueUs !== 'number' || !Number.isFinite(s.hostEnqueueUs) || s.hostEnqueueUs < 0) {
    throw new RangeError(
      `chromeTrace: step ${s.step}: hostEnqueueUs must be a finite number ≥ 0, got ${String(s.hostEnqueueUs)}`,
    );
  }
}

/** µs to whole ns. */
function ns(us: number): number {
  return Math.round(us * 1000);
}

function events(slices: Slice[], tid: number): TraceEvent[] {
  return slices.map((s) => ({ ...s.event, tid, ts: s.startNs / 1000, dur: (s.endNs - s.startNs) / 1000 }));
}

/** Start order; of two slices starting together the longer (and then the step) first, as a parent precedes its children. */
function byStartLongestFirst(a: Slice, b: Slice): number {
  return a.startNs - b.startNs || b.endNs - a.endNs || Number(b.parent) - Number(a.parent);
}

/** Whether slices in start order form a forest: each one ends inside every slice still open around it. */
function nests(sorted: Slice[]): boolean {
  const open: number[] = [];
  for (const s of sorted) {
    while (open.length > 0 && open[open.length - 1]! <= s.startNs) open.pop();
    if (open.length > 0 && s.endNs > open[open.length - 1]!) return false;
    open.push(s.endNs);
  }
  return true;
}

/**
 * Slices into as few tracks as hold them without any overlap: each goes on the first track free
 * by its start. Taken in start order, first fit needs no more tracks than the most slices open at once.
 */
function intoLanes(slices: Slice[]): Slice[][] {
  const lanes: Slice[][] = [],
    ends: number[] = [];
  for (const s of [...slices].sort(byStartLongestFirst)) {
    let k = ends.findIndex((end) => end <= s.startNs);
    if (k < 0) {
      k = lanes.length;
      lanes.push([]);
      ends.push(0);
    }
    lanes[k]!.push(s);
    ends[k] = s.endNs;
  }
  return lanes;
}
