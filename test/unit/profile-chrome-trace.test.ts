/**
 * The Chrome trace: valid JSON in the trace-event object form, named tracks for the main thread
 * and each rank's stream, one slice per step and per join where the profile says they belong,
 * starts that never go backwards on a track, and slices on every track that nest (the only
 * overlap Perfetto draws): joins whose enqueues overlap without nesting move to tracks of their
 * own, at their measured times.
 */
import { strict as assert } from 'node:assert';
import {
  MAIN_TID,
  TRACE_PID,
  chromeTraceJson,
  rankTid,
  type ChromeTrace,
  type TraceEvent,
} from '../../src/profile/chrome-trace.js';
import { SEED_HOPS, type Profile } from '../../src/profile/profile-data.js';
import { syntheticProfile, type JoinSite } from '../support/synthetic-profile.js';

/** Times are rounded to whole ns in the trace. */
const NS = 1e-3;

function parse(text: string): ChromeTrace {
  return JSON.parse(text) as ChromeTrace;
}

function slices(t: ChromeTrace, tid: number): TraceEvent[] {
  return t.traceEvents.filter((e) => e.ph === 'X' && e.tid === tid);
}

function trackNames(t: ChromeTrace): Map<number, string> {
  return new Map(
    t.traceEvents.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => [e.tid, e.args!.name as string]),
  );
}

/** The join's index within its step in walk order (every layer runs every hop here). */
function indexInStep(site: JoinSite): number {
  return site.layer * SEED_HOPS.length + SEED_HOPS.indexOf(site.hop);
}

function stepStartUs(p: Profile, step: number): number {
  return (p.steps[step]!.hostStartMs - p.steps[0]!.hostStartMs) * 1000;
}

function near(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= NS, `${what}: ${actual}, expected ${expected}`);
}

/** The join enqueue slice of the join at (step, layer, hop) among `events`. */
function joinSlice(events: TraceEvent[], step: number, layer: number, hop: string): TraceEvent {
  const found = events.filter(
    (e) => e.cat === 'join enqueue' && e.args!.step === step && e.args!.layer === layer && e.args!.hop === hop,
  );
  assert.equal(found.length, 1, `one enqueue slice for step ${step} layer ${layer} ${hop}`);
  return found[0]!;
}

/** Every two slices on the track are disjoint or one holds the other. */
function assertNests(track: TraceEvent[], what: string): void {
  const eps = 1e-6;
  for (const a of track) {
    for (const b of track) {
      if (a === b) continue;
      const disjoint = a.ts + a.dur! <= b.ts + eps || b.ts + b.dur! <= a.ts + eps;
      const aHoldsB = a.ts <= b.ts + eps && b.ts + b.dur! <= a.ts + a.dur! + eps;
      const bHoldsA = b.ts <= a.ts + eps && a.ts + a.dur! <= b.ts + b.dur! + eps;
      assert.ok(
        disjoint || aHoldsB || bHoldsA,
        `${what}: ${a.name} [${a.ts}, +${a.dur}] and ${b.name} [${b.ts}, +${b.dur}] overlap without nesting`,
      );
    }
  }
}

/** Each join slice lies inside its own step's slice. */
function assertJoinsInsideSteps(main: TraceEvent[]): void {
  const steps = new Map(main.filter((e) => e.cat === 'step').map((e) => [e.args!.step, e]));
  for (const j of main.filter((e) => e.cat === 'join enqueue')) {
    const s = steps.get(j.args!.step)!;
    assert.ok(
      j.ts >= s.ts - 1e-6 && j.ts + j.dur! <= s.ts + s.dur! + 1e-6,
      `${j.name} [${j.ts}, +${j.dur}] outside step ${s.args!.step} [${s.ts}, +${s.dur}]`,
    );
  }
}

function assertStartsInOrder(t: ChromeTrace): void {
  for (const tid of trackNames(t).keys()) {
    const s = slices(t, tid);
    for (let i = 1; i < s.length; i++)
      assert.ok(s[i]!.ts >= s[i - 1]!.ts, `tid ${tid}: slice ${i} starts at ${s[i]!.ts} before ${s[i - 1]!.ts}`);
  }
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
      if (e.ph === 'M')
        assert.equal(typeof e.args?.name === 'string' || typeof e.args?.sort_index === 'number', true, e.name);
    }
  });

  it('names one track for the main thread and one per rank stream when the joins nest', () => {
    const t = parse(chromeTraceJson(profile));
    const names = trackNames(t);
    assert.equal(names.size, 3);
    assert.match(names.get(MAIN_TID)!, /main thread/);
    assert.match(names.get(rankTid(0))!, /rank 0 stream/);
    assert.match(names.get(rankTid(1))!, /rank 1 stream/);
    const proc = t.traceEvents.find((e) => e.ph === 'M' && e.name === 'process_name')!;
    assert.match(proc.args!.name as string, /tiny.*2x test GPU/);
    // Every slice is on one of the named tracks.
    for (const e of t.traceEvents.filter((e) => e.ph === 'X'))
      assert.ok(names.has(e.tid), `${e.name} on unnamed tid ${e.tid}`);
  });

  it('holds one main-thread slice per step and per join, and one stream slice per join on its rank', () => {
    const t = parse(chromeTraceJson(profile));
    const main = slices(t, MAIN_TID);
    assert.equal(main.filter((e) => e.cat === 'step').length, profile.steps.length);
    assert.equal(main.filter((e) => e.cat === 'join enqueue').length, profile.joins.length);
    for (const r of [0, 1] as const)
      assert.equal(slices(t, rankTid(r)).length, profile.joins.filter((j) => j.rank === r).length, `rank ${r}`);
    assert.equal(t.traceEvents.filter((e) => e.ph === 'X').length, profile.steps.length + 2 * profile.joins.length);
  });

  it("places each stream slice at its step's host start plus deviceStartUs, with the join in its args", () => {
    const t = parse(chromeTraceJson(profile));
    for (const j of profile.joins) {
      const e = slices(t, rankTid(j.rank)).find(
        (e) => e.args!.step === j.step && e.args!.layer === j.layer && e.args!.hop === j.hop,
      )!;
      assert.ok(e, `step ${j.step} layer ${j.layer} ${j.hop}`);
      near(e.ts, stepStartUs(profile, j.step) + j.deviceStartUs, 'ts');
      near(e.dur!, j.deviceUs, 'dur');
      assert.deepEqual([e.args!.transport, e.args!.bytes, e.args!.token], [j.transport, j.bytes, j.token]);
    }
  });

  it("places each join's host enqueue at its step's host start plus hostStartUs, for its measured time", () => {
    // 10 µs apart, each 1 to 5 µs long: gaps between them, so back to back would be wrong.
    const p = syntheticProfile({ seed: 5, layers: 2, steps: 3, hostStartUs: (site) => 10 * indexInStep(site) });
    const main = slices(parse(chromeTraceJson(p)), MAIN_TID);
    for (const j of p.joins) {
      const e = joinSlice(main, j.step, j.layer, j.hop);
      near(e.ts, stepStartUs(p, j.step) + 10 * (j.layer * SEED_HOPS.length + SEED_HOPS.indexOf(j.hop)), `${e.name} ts`);
      near(e.dur!, j.hostEnqueueUs, `${e.name} dur`);
      assert.equal(e.args!.hostStartUs, j.hostStartUs);
    }
    assertNests(main, 'main thread');
  });

  it("never goes backwards on a track, and nests the joins' enqueue inside their step's", () => {
    const t = parse(chromeTraceJson(profile));
    assertStartsInOrder(t);
    const main = slices(t, MAIN_TID);
    assertNests(main, 'main thread');
    assertJoinsInsideSteps(main);
  });

  it('draws a step wide enough to hold its joins when their enqueue outlasts it, keeping the measured time', () => {
    // Back to back, the joins' enqueue sums to ~(1..5 µs)·15 per step; the step says it took 10 µs.
    const p = syntheticProfile({ layers: 3, steps: 2, stepEnqueueUs: () => 10 });
    const t = parse(chromeTraceJson(p));
    const main = slices(t, MAIN_TID);
    for (const step of main.filter((e) => e.cat === 'step')) {
      const joinsUs = p.joins.filter((j) => j.step === step.args!.step).reduce((s, j) => s + j.hostEnqueueUs, 0);
      assert.ok(joinsUs > 10);
      assert.equal(step.args!.hostEnqueueUs, 10);
      near(step.dur!, joinsUs, 'step dur');
      near(step.args!.drawnWiderToHoldJoinsUs as number, joinsUs, 'drawnWiderToHoldJoinsUs');
    }
    assertNests(main, 'main thread');
    assertJoinsInsideSteps(main);
  });

  it('keeps overlapping joins on the main thread where they nest', () => {
    // Per step: [0, 8] holding [2, 5], [10, 18] holding [12, 15], [20, 28].
    const p = syntheticProfile({
      layers: 1,
      steps: 3,
      hostStartUs: (site) => {
        const k = indexInStep(site);
        return 10 * Math.floor(k / 2) + (k % 2) * 2;
      },
      hostEnqueueUs: (site) => (indexInStep(site) % 2 === 0 ? 8 : 3),
    });
    const t = parse(chromeTraceJson(p));
    assert.equal(trackNames(t).size, 3, 'no track beyond the main thread and the streams');
    const main = slices(t, MAIN_TID);
    assert.equal(main.filter((e) => e.cat === 'join enqueue').length, p.joins.length);
    for (const step of [0, 1, 2]) {
      const outer = joinSlice(main, step, 0, 'fan-out'),
        inner = joinSlice(main, step, 0, 'head all-gather');
      near(outer.ts, stepStartUs(p, step), 'outer ts');
      near(inner.ts, stepStartUs(p, step) + 2, 'inner ts');
      near(inner.dur!, 3, 'inner dur');
    }
    assertStartsInOrder(t);
    assertNests(main, 'main thread');
    assertJoinsInsideSteps(main);
  });

  it('moves joins that overlap without nesting to their own tracks, none overlapping there, every time as measured', () => {
    // Per step: [0, 4], [3, 7], [6, 10], ...: each overlaps the next by 1 µs, so two tracks hold them.
    const p = syntheticProfile({
      layers: 2,
      steps: 3,
      hostStartUs: (site) => 3 * indexInStep(site),
      hostEnqueueUs: () => 4,
    });
    const t = parse(chromeTraceJson(p));
    const names = trackNames(t);
    const laneTids = [...names].filter(([, n]) => /^main thread: join enqueue/.test(n)).map(([tid]) => tid);
    assert.equal(laneTids.length, 2);
    assert.equal(names.size, 3 + 2);

    const main = slices(t, MAIN_TID);
    assert.deepEqual(
      main.map((e) => e.cat),
      p.steps.map(() => 'step'),
      'the main thread keeps the steps, and only them',
    );
    for (const s of main) {
      // Default step enqueue: the joins' 10 × 4 µs + 40 µs, drawn as measured.
      near(s.dur!, 80, `${s.name} dur`);
      assert.equal(s.args!.drawnWiderToHoldJoinsUs, undefined);
    }
    const onLanes = laneTids.flatMap((tid) => slices(t, tid));
    assert.equal(onLanes.length, p.joins.length);
    for (const j of p.joins) {
      const e = joinSlice(onLanes, j.step, j.layer, j.hop);
      near(e.ts, stepStartUs(p, j.step) + 3 * (j.layer * SEED_HOPS.length + SEED_HOPS.indexOf(j.hop)), `${e.name} ts`);
      near(e.dur!, 4, `${e.name} dur`);
    }
    for (const tid of laneTids) {
      const lane = slices(t, tid);
      for (let i = 1; i < lane.length; i++)
        assert.ok(
          lane[i]!.ts >= lane[i - 1]!.ts + lane[i - 1]!.dur! - 1e-6,
          `tid ${tid}: ${lane[i]!.name} overlaps ${lane[i - 1]!.name}`,
        );
    }
    assertStartsInOrder(t);

    // Track order: the main thread, then the join tracks, then the streams.
    const sortIndex = new Map(
      t.traceEvents.filter((e) => e.name === 'thread_sort_index').map((e) => [e.tid, e.args!.sort_index as number]),
    );
    const order = [...sortIndex].sort((a, b) => a[1] - b[1]).map(([tid]) => tid);
    assert.deepEqual(order, [
      MAIN_TID,
      ...laneTids.sort((a, b) => sortIndex.get(a)! - sortIndex.get(b)!),
      rankTid(0),
      rankTid(1),
    ]);
    assert.match(String(t.otherData.joinEnqueue), /track\(s\) of their own/);
  });

  it('moves the joins off the main thread when holding them would stretch a step over the next', () => {
    // Steps 51 µs apart (1 µs wall + the synthetic 50 µs pause), each 30 µs of enqueue; its five
    // joins back to back take 5 × 20 µs, so a step drawn to hold them would cross the next.
    const p = syntheticProfile({
      layers: 1,
      steps: 3,
      wallUs: () => 1,
      stepEnqueueUs: () => 30,
      hostEnqueueUs: () => 20,
    });
    const t = parse(chromeTraceJson(p));
    const main = slices(t, MAIN_TID);
    assert.deepEqual(
      main.map((e) => [e.cat, e.dur]),
      p.steps.map(() => ['step', 30]),
    );
    assertNests(main, 'main thread');
    const lanes = [...trackNames(t)].filter(([, n]) => /join enqueue/.test(n)).map(([tid]) => slices(t, tid));
    assert.equal(lanes.flat().length, p.joins.length);
    for (const lane of lanes) assertNests(lane, 'join track');
  });

  it('refuses a join whose step is missing, or a time it cannot place, by name', () => {
    const p = syntheticProfile({ layers: 1, steps: 2 });
    p.joins[4]!.step = 99;
    assert.throws(
      () => chromeTraceJson(p),
      /join 4 \(step 99, layer 0, hop "ep return"\): step 99 is not among the profile's steps/,
    );
    const q = syntheticProfile({ layers: 1, steps: 2 });
    q.joins[1]!.deviceStartUs = NaN;
    assert.throws(() => chromeTraceJson(q), /join 1 .*deviceStartUs must be a finite number ≥ 0, got NaN/);
    const r = syntheticProfile({ layers: 1, steps: 2 });
    r.steps[1]!.hostStartMs = Infinity;
    assert.throws(() => chromeTraceJson(r), /step 1: hostStartMs must be a finite number, got Infinity/);
    const s = syntheticProfile({ layers: 1, steps: 2 });
    delete (s.joins[2] as Partial<(typeof s.joins)[2]>).hostStartUs;
    assert.throws(() => chromeTraceJson(s), /join 2 .*hostStartUs must be a finite number ≥ 0, got undefined/);
  });
});
