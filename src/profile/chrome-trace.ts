/**
 * A profile as a Chrome trace-event file (the JSON object form), which Perfetto and
 * chrome://tracing open: one process, one track for the main thread and one per rank's stream.
 *
 * Main thread: each step's host enqueue, and inside it each join's host enqueue. The profile
 * records a join's enqueue duration, not its start, so the joins are laid back to back from the
 * step's start in walk order (layer, then hop): their lengths are measured, their places are not.
 *
 * Rank streams: each join on its receiving rank, at its step's host start + deviceStartUs. A
 * device clock cannot be read against the host's, so the step's host start stands in for the
 * stream's step-start event; the stream starts no earlier than that, so slices may sit a little
 * early, never late, and their spacing within a step is exact.
 *
 * Times are µs from the first step's host start.
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
    if (!list) byStep.set(j.step, list = []);
    list.push({ j, i });
  });
  const ordered = [...steps.values()].sort((a, b) => a.hostStartMs - b.hostStartMs || a.step - b.step);
  const t0 = ordered[0]?.hostStartMs ?? 0;

  const main: TraceEvent[] = [];
  const ranks: [TraceEvent[], TraceEvent[]] = [[], []];
  for (const s of ordered) {
    const start = (s.hostStartMs - t0) * 1000;
    const joins = (byStep.get(s.step) ?? []).sort((a, b) => a.j.layer - b.j.layer || HOPS.indexOf(a.j.hop) - HOPS.indexOf(b.j.hop) || a.i - b.i);
    const joinsUs = joins.reduce((sum, { j }) => sum + j.hostEnqueueUs, 0);
    // Perfetto nests slices on a track only when each child lies inside its parent. The joins'
    // enqueue can outlast the step's (workers finish enqueueing after the main thread has moved
    // on), so the step's slice is drawn wide enough to hold them; its args keep the measured time.
    const stepArgs: Record<string, unknown> = { step: s.step, rows: s.rows, wallUs: s.wallUs, hostEnqueueUs: s.hostEnqueueUs };
    if (joinsUs > s.hostEnqueueUs) stepArgs.drawnWiderToHoldJoinsUs = joinsUs;
    main.push({ name: `step ${s.step} enqueue`, cat: 'step', ph: 'X', pid: TRACE_PID, tid: MAIN_TID, ts: start, dur: Math.max(s.hostEnqueueUs, joinsUs), args: stepArgs });
    let at = start;
    for (const { j } of joins) {
      main.push({ name: `enqueue ${j.hop} L${j.layer}`, cat: 'join enqueue', ph: 'X', pid: TRACE_PID, tid: MAIN_TID, ts: at, dur: j.hostEnqueueUs, args: joinArgs(j) });
      at += j.hostEnqueueUs;
    }
    for (const { j } of joins) {
      ranks[j.rank].push({ name: `${j.hop} L${j.layer}`, cat: j.transport, ph: 'X', pid: TRACE_PID, tid: rankTid(j.rank), ts: start + j.deviceStartUs, dur: j.deviceUs, args: joinArgs(j) });
    }
  }
  // Stable sort: of two slices starting together the parent was pushed first, and stays first.
  for (const track of [main, ...ranks]) track.sort((a, b) => a.ts - b.ts);

  const m = profile.meta;
  const meta: TraceEvent[] = [
    { name: 'process_name', ph: 'M', pid: TRACE_PID, tid: 0, ts: 0, args: { name: `memra decode: ${m.preset} (${m.machine})` } },
    { name: 'thread_name', ph: 'M', pid: TRACE_PID, tid: MAIN_TID, ts: 0, args: { name: 'main thread (host enqueue)' } },
    { name: 'thread_sort_index', ph: 'M', pid: TRACE_PID, tid: MAIN_TID, ts: 0, args: { sort_index: 0 } },
  ];
  for (const r of [0, 1] as const) {
    meta.push({ name: 'thread_name', ph: 'M', pid: TRACE_PID, tid: rankTid(r), ts: 0, args: { name: `rank ${r} stream (device)` } });
    meta.push({ name: 'thread_sort_index', ph: 'M', pid: TRACE_PID, tid: rankTid(r), ts: 0, args: { sort_index: 1 + r } });
  }
  return {
    traceEvents: [...meta, ...main, ...ranks[0], ...ranks[1]],
    // Joins last microseconds: the legacy viewer shows them in ns rather than rounding to 0 ms.
    displayTimeUnit: 'ns',
    otherData: {
      preset: m.preset, layers: m.layers, backend: m.backend, machine: m.machine, date: m.date,
      originHostMs: t0,
      deviceTimeline: "each stream's slices are placed from their step's host start; see deviceStartUs",
    },
  };
}

export function chromeTraceJson(profile: Profile): string {
  return JSON.stringify(chromeTrace(profile));
}

function joinArgs(j: JoinSample): Record<string, unknown> {
  return {
    step: j.step, token: j.token, layer: j.layer, hop: j.hop, transport: j.transport, bytes: j.bytes, rank: j.rank,
    deviceUs: j.deviceUs, deviceStartUs: j.deviceStartUs, hostEnqueueUs: j.hostEnqueueUs,
  };
}

function checkJoin(j: JoinSample, i: number, steps: Map<number, StepSample>): void {
  const where = `chromeTrace: join ${i} (step ${j.step}, layer ${j.layer}, hop ${JSON.stringify(j.hop)})`;
  if (!steps.has(j.step)) throw new RangeError(`${where}: step ${j.step} is not among the profile's steps, so the join has no place on the timeline`);
  if (j.rank !== 0 && j.rank !== 1) throw new RangeError(`${where}: rank must be 0 or 1, got ${String(j.rank)}`);
  for (const field of ['deviceUs', 'deviceStartUs', 'hostEnqueueUs'] as const) {
    const v = j[field];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`${where}: ${field} must be a finite number ≥ 0, got ${String(v)}`);
  }
}

function checkStep(s: StepSample): void {
  if (typeof s.hostStartMs !== 'number' || !Number.isFinite(s.hostStartMs)) throw new RangeError(`chromeTrace: step ${s.step}: hostStartMs must be a finite number, got ${String(s.hostStartMs)}`);
  if (typeof s.hostEnqueueUs !== 'number' || !Number.isFinite(s.hostEnqueueUs) || s.hostEnqueueUs < 0) {
    throw new RangeError(`chromeTrace: step ${s.step}: hostEnqueueUs must be a finite number ≥ 0, got ${String(s.hostEnqueueUs)}`);
  }
}
