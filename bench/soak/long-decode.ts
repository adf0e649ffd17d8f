/**
 * The long decode: one session decoding slot 0 step after step, teacher-forced with the
 * reference window's inputs and `reset()` whenever the cache is full. Every step's token must be
 * the window's; every `checkEvery`-th step (and the first) also returns its hidden state for the
 * oracle. Device memory, RSS, descriptors and threads are taken once a warm-up is done (the
 * first step captures the step graph; the first few percent fill the JIT's and the heap's
 * caches) and again before close; each step's wall time is kept, and the first and last 10% of
 * them are the loop's rows.
 */
import { row, type Row } from '../results-file.js';
import { summarize } from '../../src/cli/stats.js';
import type { Progress } from '../../src/cli/progress.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { Deadline } from './budget.js';
import {
  finish,
  fmtBytes,
  noneWrong,
  resourceChecks,
  warmUp,
  warmUpText,
  type Check,
  type LoopResult,
} from './loop-result.js';
import { HIDDEN_MEDIAN, HIDDEN_REL_L2, askOracle, median, type Reference } from './reference.js';
import { sessionDeviceUsed, snapshot, type Snapshot } from './resources.js';
import { RssSeries, flatRss, rssTrend } from './rss.js';
import { SmapsTrace, describeGrowth } from './smaps.js';
import { openVariant, variantName, type Variant } from './variants.js';

export interface LongDecodeSpec {
  backend: BackendKind;
  preset: string;
  variant: Variant;
  steps: number;
  /** Every this many steps, the oracle's checkpoint. */
  checkEvery: number;
  machine: string;
  /** Where to write the loop's smaps checkpoints (smaps.ts); none when unset. */
  smapsDir?: string;
}

/** The most steps a warm-up takes. */
const WARM_CAP = 1000;

/** The last 10% of steps may be this much slower at p99 than the first 10%. */
const P99_DRIFT = 0.1;

export async function longDecode(
  spec: LongDecodeSpec,
  ref: Reference,
  deadline: Deadline,
  progress: Progress,
): Promise<{ result: LoopResult; rows: Row[] }> {
  const name = variantName(spec.variant);
  const label = spec.variant.loopback ? `loopback ${name}` : name;
  const times = new Float64Array(spec.steps);
  const notes: string[] = [];
  const checks: Check[] = [];
  let ran = 0,
    wrong = 0,
    oracleChecks = 0,
    oracleWrong = 0,
    nearTies = 0,
    worstRelL2 = 0;
  const errs: number[] = [];
  const t0 = performance.now();
  const base = {
    loop: 'long decode',
    variant: name,
    machine: spec.machine,
    loopback: spec.variant.loopback,
    preset: spec.preset,
    unit: 'steps' as const,
    asked: spec.steps,
  };
  const s = await openVariant(spec.backend, spec.preset, spec.variant);
  let result: Omit<LoopResult, 'pass'>;
  try {
    await s.step([ref.inputs[0]!]);
    s.reset();
    const afterOne = snapshot(await sessionDeviceUsed(s));
    const warm = warmUp(spec.steps, WARM_CAP);
    let start: Snapshot | undefined;
    const series = new RssSeries(warm, spec.steps);
    const smaps = spec.smapsDir
      ? new SmapsTrace(spec.smapsDir, `long-decode-${name}`, warm, spec.steps, () =>
          Promise.all(s.runtime.ranks.map((r) => r.control.call('heapSpaces'))),
        )
      : undefined;
    if (smaps) await smaps.take('after the first step', 0);
    let error: string | undefined;
    try {
      for (; ran < spec.steps && !deadline.expired; ran++) {
        if (ran === warm) {
          start = snapshot(await sessionDeviceUsed(s));
          series.add(ran, start.rssBytes);
          if (smaps) await smaps.take('warm-up', ran);
        }
        if (s.position(0) === ref.maxPos) s.reset();
        const p = s.position(0);
        const oracle = ran === 0 || (ran + 1) % spec.checkEvery === 0;
        const at = performance.now();
        const out = oracle
          ? await s.stepDetailed([ref.inputs[p]!], { hidden: true })
          : { next: await s.step([ref.inputs[p]!]) };
        times[ran] = performance.now() - at;
        const got = out.next[0]!;
        if (got !== ref.outputs[p]) {
          if (wrong++ < 5) notes.push(`step ${ran} (position ${p}): token ${got}, the window's ${ref.outputs[p]}`);
        }
        if (oracle) {
          const v = askOracle(ref, p, got, (out as { hidden?: Float32Array }).hidden!);
          oracleChecks++;
          worstRelL2 = Math.max(worstRelL2, v.relL2);
          errs.push(v.relL2);
          if (v.token === 'near tie') nearTies++;
          if (v.token === 'wrong' || !(v.relL2 <= HIDDEN_REL_L2)) {
            if (oracleWrong++ < 5)
              notes.push(
                `step ${ran} (position ${p}): oracle says ${v.token}, relative L2 ${v.relL2.toExponential(2)}`,
              );
          }
        }
        series.maybeSample(ran);
        const due = smaps?.due(ran);
        if (due) await smaps!.take(due, ran + 1);
        progress.tick(`soak ${label}`, ran + 1, spec.steps);
      }
    } catch (e) {
      error = `step ${ran}: ${(e as Error).message}`;
    }
    const end = snapshot(await sessionDeviceUsed(s).catch(() => NaN));
    if (start) series.add(ran, end.rssBytes);
    if (smaps) {
      await smaps.take('end', ran).catch(() => undefined);
      const w = smaps.write();
      notes.push(`smaps checkpoints in ${w.path}`);
      if (w.growth) notes.push(describeGrowth(w.growth));
    }
    start ??= afterOne;
    notes.push(
      `resources from step ${Math.min(warm, ran)} on (a warm-up before); after the first step: RSS ${fmtBytes(afterOne.rssBytes)}, ` +
        `device ${fmtBytes(afterOne.deviceUsedBytes)}, ${afterOne.fds} fds, ${afterOne.threads} threads`,
    );
    notes.push(series.describe('steps'));
    checks.push(noneWrong('tokens', wrong, ran, 'steps'));
    checks.push({
      name: 'oracle',
      value:
        `${oracleChecks} checkpoints, ${oracleWrong} wrong, relative L2 worst ${worstRelL2.toExponential(2)}, ` +
        `median ${median(errs).toExponential(2)}${nearTies ? `, ${nearTies} near ties` : ''}`,
      limit: `relative L2 ≤ ${HIDDEN_REL_L2.toExponential(0)} each, the median ≤ ${HIDDEN_MEDIAN.toExponential(0)}; the oracle's token or a near tie`,
      pass: oracleChecks > 0 && oracleWrong === 0 && median(errs) <= HIDDEN_MEDIAN,
    });
    const rss = [
      flatRss(start, end, warmUpText(Math.min(warm, ran), WARM_CAP, 'steps')),
      rssTrend(series, start, 'steps'),
    ];
    checks.push(...resourceChecks(start, end, rss));
    const tenth = Math.max(1, Math.floor(ran / 10));
    const first = Array.from(times.subarray(0, tenth));
    const last = Array.from(times.subarray(ran - tenth, ran));
    const [p99a, p99b] = [summarize(first).p99, summarize(last).p99];
    const drift = p99b / p99a - 1;
    checks.push({
      name: 'p99 drift',
      value: `${drift >= 0 ? '+' : ''}${(100 * drift).toFixed(1)}% (${p99a.toFixed(3)} → ${p99b.toFixed(3)} ms)`,
      limit: `last 10% at most ${100 * P99_DRIFT}% slower than the first`,
      pass: drift <= P99_DRIFT,
    });
    result = {
      ...base,
      ran,
      ...(error ? { cut: 'an error', error } : ran < spec.steps ? { cut: deadline.why } : {}),
      seconds: (performance.now() - t0) / 1000,
      start,
      end,
      checks,
      notes,
    };
    const fields = (what: string) => ({
      suite: 'soak',
      op: `step, ${what} 10%`,
      transport: label,
      bytes: 0,
      preset: spec.preset,
      unit: 'ms',
      metric: 'host',
      method: `main-thread wall time of session.step, t = 1, ${what} 10% of ${ran} steps (machine ${spec.machine})`,
    });
    return { result: finish(result), rows: ran > 0 ? [row(fields('first'), first), row(fields('last'), last)] : [] };
  } finally {
    await s.close();
  }
}
