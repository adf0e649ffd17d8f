/**
 * `memra decode`: greedy decoding of the synthetic model through the session API, the way a
 * user's own loop would drive it. Progress on stderr (weights, then tokens); the tokens and a
 * summary on stdout, or one JSON document with --json.
 */
import { Session } from '../decode/session.js';
import { Progress } from './progress.js';
import type { BackendKind } from '../runtime/device-api.js';
import type { Layout } from '../decode/device-weights.js';
import { summarize } from './stats.js';

export interface DecodeOptions {
  preset?: string;
  tokens: number;
  batch: number;
  config?: string;
  backend: 'auto' | BackendKind;
  layout: Layout;
  json: boolean;
}

export interface DecodeReport {
  backend: BackendKind;
  layout: Layout;
  preset: string;
  batch: number;
  /** tokens[s] = the tokens row s produced, in order (its first input is token s). */
  tokens: number[][];
  /** Main-thread wall time of each step, ms. */
  stepMs: number[];
  tokensPerSecond: number;
  medianStepMs: number;
  weightBytesPerRank: number[];
}

export async function decode(o: DecodeOptions): Promise<DecodeReport> {
  const progress = new Progress();
  const session = await Session.open({
    backend: o.backend,
    layout: o.layout,
    maxBatch: o.batch,
    ...(o.preset ? { model: o.preset } : {}),
    ...(o.config ? { config: o.config } : {}),
    onProgress: (done, total) => progress.tick('weights', done, total),
  });
  progress.done();
  try {
    const preset = o.preset ?? (session.backend === 'cuda' ? 'small' : 'tiny');
    if (o.tokens > session.model.maxPos) throw new RangeError(`--tokens ${o.tokens} is past the model's KV cache (maxPos ${session.model.maxPos})`);
    const out: number[][] = Array.from({ length: o.batch }, () => []);
    const stepMs: number[] = [];
    let cur = Array.from({ length: o.batch }, (_, s) => s % session.model.vocab);
    for (let i = 0; i < o.tokens; i++) {
      const r = await session.stepDetailed(cur);
      stepMs.push(r.ms);
      r.next.forEach((x, s) => out[s]!.push(x));
      cur = r.next;
      progress.tick('tokens', i + 1, o.tokens);
    }
    progress.done();
    // The first step also pays for first-touch costs; it is kept in stepMs but not in the rate.
    const steady = stepMs.length > 1 ? stepMs.slice(1) : stepMs;
    const total = steady.reduce((a, b) => a + b, 0);
    return {
      backend: session.backend,
      layout: session.layout,
      preset,
      batch: o.batch,
      tokens: out,
      stepMs,
      tokensPerSecond: (steady.length * o.batch) / (total / 1000),
      medianStepMs: summarize(steady).median,
      weightBytesPerRank: session.weightBytes(),
    };
  } finally {
    await session.close();
  }
}

export function printDecode(r: DecodeReport): void {
  console.log(`backend: ${r.backend} (${r.layout}), model: ${r.preset}, batch ${r.batch}`);
  if (r.weightBytesPerRank.length) console.log(`weights per GPU: ${r.weightBytesPerRank.map((b) => `${(b / 2 ** 30).toFixed(2)} GiB`).join(', ')}`);
  r.tokens.forEach((row, s) => console.log(`row ${s}: ${row.join(' ')}`));
  console.log(`${r.tokensPerSecond.toFixed(1)} tokens/s; step ${r.medianStepMs.toFixed(3)} ms median over ${Math.max(1, r.stepMs.length - 1)} steps (main-thread wall time, first step excluded)`);
}
