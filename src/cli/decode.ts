/**
 * `memra decode`: greedy decoding of the synthetic model through the session API, the way a
 * user's own loop would drive it. Progress on stderr (weights, then tokens); the tokens and a
 * summary on stdout, or one JSON document with --json.
 */
import { Session } from '../decode/session.js';
import { DEFAULT_CONFIG, loadDecodeConfig, type DecodeConfig, type WalkName } from '../decode/decode-config.js';
import type { StepOutput } from '../decode/session.js';
import { HOPS, type JoinTiming } from '../decode/join-profile.js';
import { Progress } from './progress.js';
import type { BackendKind } from '../runtime/device-api.js';
import { detectBackend } from '../runtime/runtime.js';
import type { Layout } from '../decode/device-weights.js';
import { summarize } from './stats.js';

export interface DecodeOptions {
  preset?: string;
  tokens: number;
  batch: number;
  config?: string;
  backend: 'auto' | BackendKind;
  /** Default: what the machine allows (src/decode/run-plan.ts). */
  layout?: Layout;
  /** The sharded layout's walk, over the config's (`walk`). */
  walk?: WalkName;
  /** Device ordinals, one per rank (RuntimeOptions.devices). */
  devices?: number[];
  /** Both ranks on one device (RuntimeOptions.loopback). */
  loopback: boolean;
  json: boolean;
  /** Time every join on the device (the config's `profile`), and summarise per hop. */
  profile: boolean;
  /** Gets every step as it comes back (memra profile keeps them all). */
  onStep?: (rows: number, out: StepOutput) => void;
}

/** One hop's joins over the run (steps after the first). */
export interface HopSummary {
  hop: string;
  joinsPerToken: number;
  medianUs: number;
  p99Us: number;
  usPerToken: number;
}

export interface DecodeReport {
  backend: BackendKind;
  layout: Layout;
  /** One ordinal per rank. */
  devices: number[];
  loopback: boolean;
  /** Why this backend, layout and these devices (src/decode/run-plan.ts). */
  why: string;
  preset: string;
  layers: number;
  batch: number;
  /** tokens[s] = the tokens row s produced, in order (its first input is token s). */
  tokens: number[][];
  /** Main-thread wall time of each step, ms. */
  stepMs: number[];
  tokensPerSecond: number;
  medianStepMs: number;
  weightBytesPerRank: number[];
  /** Per-hop join latency, with --profile on a sharded run. */
  joins?: { hops: HopSummary[]; medianUsPerToken: number };
  /** Where each worker thread ran (its CPU core), or why it was not pinned. */
  placement: Array<{ rank: number; cpu: number | null; why?: string }>;
  /** The decode config the run used. */
  config?: DecodeConfig;
  /** The step graphs, when the config's `stepGraph` is on. */
  stepGraph?: { launches: number; captures: number; refused: Array<{ t: number; reason: string }> };
  /** The EP graph slots, when the config's `epGraph` gate is on. */
  epGraph?: { dispatches: number; captures: number; refused: Array<{ layer: number; reason: string }> };
}

export async function decode(o: DecodeOptions): Promise<DecodeReport> {
  if (o.backend === 'auto') {
    // The user asked for the best backend; when that is the CPU reference, say why before the wait.
    const pick = detectBackend();
    if (pick.backend === 'cpu') process.stderr.write(`memra: decoding on the CPU reference backend: ${pick.why}\n`);
  }
  const progress = new Progress();
  const session = await Session.open({
    backend: o.backend,
    ...(o.layout ? { layout: o.layout } : {}),
    runtime: { loopback: o.loopback, ...(o.devices ? { devices: o.devices } : {}) },
    maxBatch: o.batch,
    ...(o.preset ? { model: o.preset } : {}),
    ...(o.config || o.profile || o.walk
      ? {
          config: {
            ...(o.config ? loadDecodeConfig(o.config) : DEFAULT_CONFIG),
            ...(o.profile ? { profile: true } : {}),
            ...(o.walk ? { walk: o.walk } : {}),
          },
        }
      : {}),
    onProgress: (done, total) => progress.tick('weights', done, total),
  });
  progress.done();
  try {
    const preset = o.preset ?? (session.backend === 'cuda' ? 'small' : 'tiny');
    if (o.tokens > session.model.maxPos)
      throw new RangeError(`--tokens ${o.tokens} is past the model's KV cache (maxPos ${session.model.maxPos})`);
    const out: number[][] = Array.from({ length: o.batch }, () => []);
    const stepMs: number[] = [];
    const joinReads: Array<Promise<JoinTiming[]>> = [];
    let cur = Array.from({ length: o.batch }, (_, s) => s % session.model.vocab);
    for (let i = 0; i < o.tokens; i++) {
      const r = await session.stepDetailed(cur);
      o.onStep?.(cur.length, r);
      stepMs.push(r.ms);
      if (r.joins) joinReads.push(r.joins);
      r.next.forEach((x, s) => {
        out[s]!.push(x);
      });
      cur = r.next;
      progress.tick('tokens', i + 1, o.tokens);
    }
    progress.done();
    const joins = await Promise.all(joinReads);
    // The first step also pays for first-touch costs; it is kept in stepMs but not in the rate.
    const steady = stepMs.length > 1 ? stepMs.slice(1) : stepMs;
    const total = steady.reduce((a, b) => a + b, 0);
    const report: DecodeReport = {
      backend: session.backend,
      layout: session.layout,
      devices: session.plan.devices,
      loopback: session.plan.loopback,
      why: session.plan.why,
      preset,
      layers: session.model.layers,
      batch: o.batch,
      tokens: out,
      stepMs,
      tokensPerSecond: (steady.length * o.batch) / (total / 1000),
      medianStepMs: summarize(steady).median,
      weightBytesPerRank: session.weightBytes(),
      placement: session.runtime.placement,
    };
    if (joins.length > 0) report.joins = summarizeJoins(joins.length > 1 ? joins.slice(1) : joins);
    if (session.decodeConfig.epGraph) report.epGraph = session.epGraph();
    if (session.decodeConfig.stepGraph) report.stepGraph = session.stepGraph();
    report.config = session.decodeConfig;
    return report;
  } finally {
    await session.close();
  }
}

/** Per hop: joins per token, median and p99 latency per join, and the hop's time per token. */
function summarizeJoins(steps: JoinTiming[][]): { hops: HopSummary[]; medianUsPerToken: number } {
  const hops: HopSummary[] = [];
  for (const hop of HOPS) {
    const perStep = steps.map((js) => js.filter((j) => j.hop === hop));
    const all = perStep.flat().map((j) => j.deviceUs);
    if (all.length === 0) continue;
    const s = summarize(all);
    hops.push({
      hop,
      joinsPerToken: perStep[0]!.length,
      medianUs: s.median,
      p99Us: s.p99,
      usPerToken: summarize(perStep.map((js) => js.reduce((a, j) => a + j.deviceUs, 0))).median,
    });
  }
  return { hops, medianUsPerToken: summarize(steps.map((js) => js.reduce((a, j) => a + j.deviceUs, 0))).median };
}

export function printDecode(r: DecodeReport): void {
  console.log(
    `backend: ${r.backend} (${r.layout}${r.layout === 'sharded' ? `, ${r.config?.walk ?? 'seed'} walk` : ''}${r.loopback ? ', loopback' : ''}), model: ${r.preset}, batch ${r.batch}`,
  );
  console.log(`chose: ${r.why}`);
  const size = (b: number): string =>
    b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(2)} GiB` : `${(b / 2 ** 20).toFixed(1)} MiB`;
  if (r.weightBytesPerRank.length)
    console.log(`weights per ${r.loopback ? 'rank' : 'device'}: ${r.weightBytesPerRank.map(size).join(', ')}`);
  if (r.placement.some((p) => p.cpu !== null))
    console.log(`workers: ${r.placement.map((p) => `rank ${p.rank} on CPU ${p.cpu ?? `? (${p.why})`}`).join(', ')}`);
  for (const [s, row] of r.tokens.entries()) console.log(`row ${s}: ${row.join(' ')}`);
  console.log(
    `${r.tokensPerSecond.toFixed(1)} tokens/s; step ${r.medianStepMs.toFixed(3)} ms median over ${Math.max(1, r.stepMs.length - 1)} steps (main-thread wall time, first step excluded)`,
  );
  if (r.epGraph) {
    const g = r.epGraph;
    console.log(
      `EP graph: ${g.dispatches} launches, ${g.captures} captures${g.refused.length ? `; ${g.refused.length} layer(s) on the eager twin: ${g.refused[0]!.reason}` : ''}`,
    );
  }
  if (r.stepGraph) {
    const g = r.stepGraph;
    console.log(
      `step graph: ${g.launches} launches, ${g.captures} captures${g.refused.length ? `; refused at t = ${g.refused[0]!.t}: ${g.refused[0]!.reason}` : ''}${r.joins ? ' (profiled steps run eagerly: --no-profile times the graph)' : ''}`,
    );
  }
  if (!r.joins) return;
  console.log(
    `joins per token: ${r.joins.medianUsPerToken.toFixed(1)} us median (device time on each join's receiving rank)`,
  );
  for (const h of r.joins.hops) {
    console.log(
      `  ${h.hop.padEnd(16)} ${String(h.joinsPerToken).padStart(3)} a token   ${h.medianUs.toFixed(2).padStart(8)} us median  ${h.p99Us.toFixed(2).padStart(8)} us p99   ${h.usPerToken.toFixed(1).padStart(8)} us a token`,
    );
  }
}
