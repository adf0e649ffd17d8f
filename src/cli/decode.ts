/**
 * `memra decode`: greedy decoding of the synthetic model through the session API, the way a
 * user's own loop would drive it. Progress on stderr (weights, then tokens); the tokens and a
 * summary on stdout, or one JSON document with --json.
 */
import { Session } from '../decode/session.js';
import { WALKS, type DecodeConfig, type WalkName } from '../decode/decode-config.js';
import type { StepOutput } from '../decode/session.js';
import { HOPS, type JoinTiming } from '../decode/join-profile.js';
import { PRESETS, type PresetName } from '../decode/model-config.js';
import { detectBackend } from '../runtime/runtime.js';
import { Progress } from './progress.js';
import type { BackendKind } from '../runtime/device-api.js';
import { LAYOUTS, type Layout } from '../decode/device-weights.js';
import { summarize } from './stats.js';
import { UsageError, defineCommand, type CliValues } from './options.js';
import { BACKEND_OPTION, JSON_OPTION } from './shared-options.js';

/** decode's options; profile takes them too, less --no-profile, plus --out. */
export const DECODE_OPTIONS = {
  preset: {
    type: 'choice',
    choices: Object.keys(PRESETS),
    help: 'the model (default: small on the GPU, tiny on the CPU reference)',
  },
  tokens: {
    type: 'int',
    min: 1,
    default: 32,
    value: 'N',
    help: `tokens each row produces, at most the model's maxPos (${Object.entries(PRESETS)
      .map(([k, p]) => `${k} ${p.maxPos}`)
      .join(', ')})`,
  },
  batch: {
    type: 'int',
    min: 1,
    max: 8,
    default: 1,
    value: 'T',
    help: 'rows a step, one sequence each (row s starts from token s)',
  },
  config: {
    type: 'path',
    value: 'FILE',
    help: "a JSON decode config (transports per layer, wo variant, graphs, spin bounds), found against the working directory, then among memra's own bench/configs/",
  },
  backend: BACKEND_OPTION,
  walk: {
    type: 'choice',
    choices: WALKS,
    help: "the sharded layout's walk, over the config's: seed (root-centred, five joins a layer) or replicated (both ranks hold h, three joins a layer)",
  },
  layout: {
    type: 'choice',
    choices: LAYOUTS,
    help: 'sharded over two ranks, or unsharded on one (default: sharded over two GPUs, unsharded on one; it prints which it chose and why)',
  },
  devices: {
    type: 'ints',
    min: 0,
    count: [1, 2],
    value: 'D[,D]',
    what: 'one device ordinal or two separated by a comma (0, or 0,1)',
    help: 'the device ordinals, one per rank: one runs unsharded, two sharded',
  },
  loopback: {
    type: 'flag',
    help: 'both ranks of the sharded walk on one device (for testing two-rank code on one card; its timings are not two-GPU figures)',
  },
  json: JSON_OPTION,
} as const;

export const decodeCommand = defineCommand(
  {
    name: 'decode',
    summary: "greedy decoding of the synthetic model, with tokens/s and each hop's join latency",
    description:
      'Greedy decoding of the synthetic model through the session API: row s starts from token s and feeds its tokens back. ' +
      "Prints the tokens, tokens/s at the median step, and each hop's join latency (device time on the receiving rank); --no-profile leaves the joins untimed. " +
      'Progress goes to stderr.',
    options: {
      ...DECODE_OPTIONS,
      'no-profile': { type: 'flag', help: "leave the joins untimed (the config's profile: false)" },
    },
  },
  async (v) => {
    const r = await decode({ ...decodeOptions(v), profile: !v['no-profile'] });
    if (v.json) console.log(JSON.stringify(r));
    else printDecode(r);
  },
);

/** The parsed options as DecodeOptions (less the profile switch, which differs by command). */
export function decodeOptions(v: CliValues<typeof DECODE_OPTIONS>): Omit<DecodeOptions, 'profile'> {
  return {
    tokens: v.tokens,
    batch: v.batch,
    json: v.json,
    backend: v.backend as DecodeOptions['backend'],
    loopback: v.loopback,
    ...(v.layout ? { layout: v.layout as Layout } : {}),
    ...(v.devices ? { devices: v.devices } : {}),
    ...(v.preset ? { preset: v.preset as PresetName } : {}),
    ...(v.config ? { config: v.config } : {}),
    ...(v.walk ? { walk: v.walk as WalkName } : {}),
  };
}

export interface DecodeOptions {
  preset?: PresetName;
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
  /** batch / medianStepMs: the rate at the median step (first step excluded). */
  tokensPerSecond: number;
  medianStepMs: number;
  /** The mean step (first excluded): with it, batch / meanStepMs is the rate over the whole run. */
  meanStepMs: number;
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
  // The model is settled here, so a count past its cache is refused before anything loads.
  const pick = o.backend === 'auto' ? detectBackend() : undefined;
  // The user asked for the best backend; when that is the CPU reference, say why before the wait.
  if (pick?.backend === 'cpu') process.stderr.write(`memra: decoding on the CPU reference backend: ${pick.why}\n`);
  const preset: PresetName = o.preset ?? ((pick?.backend ?? o.backend) === 'cuda' ? 'small' : 'tiny');
  const maxPos = PRESETS[preset].maxPos;
  if (o.tokens > maxPos)
    throw new UsageError(
      `--tokens ${o.tokens} is past the KV cache of --preset ${preset} (maxPos ${maxPos}): at most ${maxPos}`,
      'ERR_INVALID_ARG_VALUE',
    );
  const progress = new Progress();
  const session = await Session.open({
    backend: o.backend,
    ...(o.layout ? { layout: o.layout } : {}),
    runtime: { loopback: o.loopback, ...(o.devices ? { devices: o.devices } : {}) },
    maxBatch: o.batch,
    model: preset,
    ...(o.config ? { config: o.config } : {}),
    onProgress: (done, total) => progress.tick('weights', done, total),
  });
  progress.done();
  try {
    if (o.profile) await session.setConfig({ profile: true });
    if (o.walk) await session.setConfig({ walk: o.walk });
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
    const steady = summarize(stepMs.length > 1 ? stepMs.slice(1) : stepMs);
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
      tokensPerSecond: (o.batch * 1000) / steady.median,
      medianStepMs: steady.median,
      meanStepMs: steady.mean,
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
  const steps = Math.max(1, r.stepMs.length - 1);
  console.log(
    `${r.tokensPerSecond.toFixed(1)} tokens/s at the median step of ${r.medianStepMs.toFixed(3)} ms (batch ${r.batch} / step; main-thread wall time over ${steps} step${steps === 1 ? '' : 's'}, first excluded); mean step ${r.meanStepMs.toFixed(3)} ms`,
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
