/**
 * The Chrome trace: valid JSON in the trace-event object form, named tracks for the main thread
 * and each rank's stream, one slice per step and per join where the profile says they belong,
 * starts that never go backwards on a track, and main-thread slices that nest.
 */
import { strict as assert } from 'node:assert';
import { MAIN_TID, TRACE_PID, chromeTraceJson, rankTid, type ChromeTrace, type TraceEvent } from '../../src/profile/chrome-trace.js';
import { syntheticProfile } from '../support/synthetic-profile.js';

function parse(text: string): ChromeTrace {
  return JSON.parse(text) as ChromeTrace;
}

function slices(t: ChromeTrace, tid: number): TraceEvent[] {
  return t.traceEvents.filter((e) => e.ph === 'X' && e.tid === tid);
}

describe('profile Chrome trace', () => {
  const profile = syntheticProfile({ seed: 3, layers: 3, steps: 5, preset: 'tiny', machine: '2x test GPU' });

  it('is a trace-event object whose every event carries the required fields', () => {
    const t = parse(chromeTraceJson(profile));
    assert.ok(Array.isArray(t.traceEvents));
    assert.ok(['ns', 'ms'].includes(t.displayTimeUnit));
    for (const e of t.traceEvents) {
      assert.equal(typeof e.name, 'string', JSON.stringify(e));
      assert.ok(e.ph === 'X' || e.ph === 'M', `ph ${e.ph}`);
      assert.equal(e.pid, TRACE_PID);
      assert.ok(Number.isInteger(e.tid));
      assert.ok(Number.isFinite(e.ts) && e.ts >= 0, `ts ${e.ts} of ${e.name}`);
      if (e.ph === 'X') assert.ok(Number.isFinite(e.dur) && e.dur! >= 0, `dur ${e.dur} of ${e.name}`);
      if (e.ph === 'M') assert.equal(typeof e.args?.name === 'string' || typeof e.args?.sort_index === 'number', true, e.name);
    }
  });

  it('names one track for the main thread and one per rank stream', () => {
    const t = parse(chromeTraceJson(profile));
    const names = new Map(t.traceEvents.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => [e.tid, e.args!.name as string]));
    assert.equal(names.size, 3);
    assert.match(names.get(MAIN_TID)!, /main thread/);
    assert.match(names.get(rankTid(0))!, /rank 0 stream/);
    assert.match(names.get(rankTid(1))!, /rank 1 stream/);
    const proc = t.traceEvents.find((e) => e.ph === 'M' && e.name === 'process_name')!;
    assert.match(proc.args!.name as string, /tiny.*2x test GPU/);
    // Every slice is on one of the named tracks.
    for (const e of t.traceEvents.filter((e) => e.ph === 'X')) assert.ok(names.has(e.tid), `${e.name} on unnamed tid ${e.tid}`);
  });

  it('holds one main-thread slice per step and per join, and one stream slice per join on its rank', () => {
    const t = parse(chromeTraceJson(profile));
    const main = slices(t, MAIN_TID);
    assert.equal(main.filter((e) => e.cat === 'step').length, profile.steps.length);
    assert.equal(main.filter((e) => e.cat === 'join enqueue').length, profile.joins.length);
    for (const r of [0, 1] as const) assert.equal(slices(t, rankTid(r)).length, profile.joins.filter((j) => j.rank === r).length, `rank ${r}`);
    assert.equal(t.traceEvents.filter((e) => e.ph === 'X').length, profile.steps.length + 2 * profile.joins.length);
  });

  it('places each stream slice at its step\'s host start plus deviceStartUs, with the join in its args', () => {
    const t = parse(chromeTraceJson(profile));
    const t0 = profile.steps[0]!.hostStartMs;
    for (const j of profile.joins) {
      const e = slices(t, rankTid(j.rank)).find((e) => e.args!.step === j.step && e.args!.layer === j.layer && e.args!.hop === j.hop)!;
      assert.ok(e, `step ${j.step} layer ${j.layer} ${j.hop}`);
      const stepStartUs = (profile.steps[j.step]!.hostStartMs - t0) * 1000;
      assert.ok(Math.abs(e.ts - (stepStartUs + j.deviceStartUs)) < 1e-6, `ts ${e.ts}`);
      assert.equal(e.dur, j.deviceUs);
      assert.deepEqual([e.args!.transport, e.args!.bytes, e.args!.token], [j.transport, j.bytes, j.token]);
    }
  });

  it('never goes backwards on a track, and nests the joins\' enqueue inside their step\'s', () => {
    const t = parse(chromeTraceJson(profile));
    for (const tid of [MAIN_TID, rankTid(0), rankTid(1)]) {
      const s = slices(t, tid);
      for (let i = 1; i < s.length; i++) assert.ok(s[i]!.ts >= s[i - 1]!.ts, `tid ${tid}: slice ${i} starts at ${s[i]!.ts} before ${s[i - 1]!.ts}`);
    }
    assertNested(slices(t, MAIN_TID));
  });

  it('draws a step wide enough to hold its joins when their enqueue outlasts it, keeping the measured time', () => {
    // The joins' enqueue sums to ~(1..5 µs)·15 per step; the step says it took 10 µs.
    const p = syntheticProfile({ layers: 3, steps: 2, stepEnqueueUs: () => 10 });
    const t = parse(chromeTraceJson(p));
    const main = slices(t, MAIN_TID);
    for (const step of main.filter((e) => e.cat === 'step')) {
      const joinsUs = p.joins.filter((j) => j.step === step.args!.step).reduce((s, j) => s + j.hostEnqueueUs, 0);
      assert.ok(joinsUs > 10);
      assert.equal(step.args!.hostEnqueueUs, 10);
      assert.ok(Math.abs(step.dur! - joinsUs) < 1e-9);
    }
    assertNested(main);
  });

  it('refuses a join whose step is missing, or a time it cannot place, by name', () => {
    const p = syntheticProfile({ layers: 1, steps: 2 });
    p.joins[4]!.step = 99;
    assert.throws(() => chromeTraceJson(p), /join 4 \(step 99, layer 0, hop "ep return"\): step 99 is not among the profile's steps/);
    const q = syntheticProfile({ layers: 1, steps: 2 });
    q.joins[1]!.deviceStartUs = NaN;
    assert.throws(() => chromeTraceJson(q), /join 1 .*deviceStartUs must be a finite number ≥ 0, got NaN/);
    const r = syntheticProfile({ layers: 1, steps: 2 });
    r.steps[1]!.hostStartMs = Infinity;
    assert.throws(() => chromeTraceJson(r), /step 1: hostStartMs must be a finite number, got Infinity/);
  });
});

/** Each join slice lies inside the step slice before it, and the join slices do not overlap. */
function assertNested(main: TraceEvent[]): void {
  let step: TraceEvent | undefined, lastEnd = -Infinity;
  const eps = 1e-6;
  for (const e of main) {
    if (e.cat === 'step') { step = e; lastEnd = e.ts; continue; }
    assert.ok(step, `${e.name} before any step`);
    assert.equal(e.args!.step, step!.args!.step, `${e.name} under step ${step!.args!.step}`);
    assert.ok(e.ts >= step!.ts - eps && e.ts + e.dur! <= step!.ts + step!.dur! + eps, `${e.name} [${e.ts}, +${e.dur}] outside its step [${step!.ts}, +${step!.dur}]`);
    assert.ok(e.ts >= lastEnd - eps, `${e.name} overlaps the join before it`);
    lastEnd = e.ts + e.dur!;
  }
}
