/**
 * What every soak step is checked against. One window of slot 0 (positions 0 to maxPos - 1, the
 * whole KV cache), decoded greedily from a fresh start token by the unsharded walk, and the
 * in-process model (the oracle, docs/model.md) teacher-forced over the same inputs: its hidden
 * state and logits at every position.
 *
 * The walk is deterministic and its layouts bit-identical (the sharded walk in any transport,
 * eager or from the step graph), so a soak loop teacher-forces the window's inputs and wants
 * the window's token back at every step, exactly; each loop's `reset()` when the cache is full
 * starts the window over. At the oracle's checkpoints it also wants the step's hidden state near
 * the oracle's, by the GPU suite's rule: every one within relative L2 1e-2 and their median
 * within 1e-5. The GPU's kernels round differently from the oracle's f32 loops, and an fp8 code
 * of the MoE input that lands within rounding of a midpoint between two codes goes one way on
 * one and the other way on the other: one such flip put a step of `small` at 1.84e-3, every
 * other near 1e-7 (a wrong kernel is O(1) off, a systematic loss moves the median). The token
 * must be the oracle's, or one whose logit is as close to the largest as such a flip allows (a
 * near tie, where the two may pick differently and both be right).
 */
import { CpuModel } from '../../src/decode/cpu-model.js';
import { presetByName } from '../../src/decode/model-config.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import type { Session } from '../../src/decode/session.js';
import { openVariant } from './variants.js';

/** Relative L2 any one step's hidden state may differ from the oracle's by. */
export const HIDDEN_REL_L2 = 1e-2;
/** ... and the median over the steps checked. */
export const HIDDEN_MEDIAN = 1e-5;
/** A logit within this share of the largest logit's magnitude of it is a near tie. */
export const NEAR_TIE = 1e-2;

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[s.length >> 1]!;
}

export interface Reference {
  preset: string;
  maxPos: number;
  start: number;
  /** The input at position p (inputs[0] is the start token, then each output before it). */
  inputs: number[];
  /** The walk's greedy token at p. */
  outputs: number[];
  oracleHidden: Float32Array[];
  oracleLogits: Float32Array[];
}

/** What the oracle says of one step's token and hidden state at position p. */
export interface OracleVerdict {
  relL2: number;
  token: 'equal' | 'near tie' | 'wrong';
}

export function relativeL2(a: Float32Array, b: Float32Array): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num += ((a[i] ?? NaN) - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num / den);
}

export function askOracle(ref: Reference, p: number, token: number, hidden: Float32Array): OracleVerdict {
  const z = ref.oracleLogits[p]!;
  let best = 0;
  for (let i = 1; i < z.length; i++) if (z[i]! > z[best]!) best = i;
  const gap = z[best]! - (z[token] ?? -Infinity);
  const verdict = token === best ? 'equal' : gap <= NEAR_TIE * Math.max(1, Math.abs(z[best]!)) ? 'near tie' : 'wrong';
  return { relL2: relativeL2(hidden, ref.oracleHidden[p]!), token: verdict };
}

/** One teacher-forced step at the slot's next position: the reference's input there, and whether the token came back. */
export async function stepChecked(s: Session, ref: Reference): Promise<{ p: number; ok: boolean; got: number }> {
  const p = s.position(0);
  const got = (await s.step([ref.inputs[p]!]))[0]!;
  return { p, ok: got === ref.outputs[p], got };
}

/**
 * Decode the window on a fresh unsharded session, then run the oracle over it. Returns the
 * reference and how the window compared with the oracle at every position.
 */
export async function buildReference(
  backend: BackendKind,
  preset: string,
  start: number,
): Promise<{
  ref: Reference;
  agreement: { worstRelL2: number; medianRelL2: number; equal: number; nearTies: number; wrong: number };
  /** Seconds decoding the window, and running the oracle over it. */
  seconds: { window: number; oracle: number };
}> {
  const cfg = presetByName(preset);
  const P = cfg.maxPos;
  const inputs: number[] = [],
    outputs: number[] = [],
    hidden: Float32Array[] = [];
  const t0 = performance.now();
  const s = await openVariant(backend, preset, { loopback: false });
  try {
    let tok = start;
    for (let p = 0; p < P; p++) {
      const out = await s.stepDetailed([tok], { hidden: true });
      inputs.push(tok);
      outputs.push(out.next[0]!);
      hidden.push(out.hidden!);
      tok = out.next[0]!;
    }
  } finally {
    await s.close();
  }
  const t1 = performance.now();
  const oracle = new CpuModel(cfg, { maxBatch: 1 });
  const ref: Reference = { preset, maxPos: P, start, inputs, outputs, oracleHidden: [], oracleLogits: [] };
  for (let p = 0; p < P; p++) {
    const r = oracle.step([inputs[p]!], [p], { trace: true });
    ref.oracleHidden.push(r.hidden);
    ref.oracleLogits.push(r.trace!.logits);
  }
  const agreement = { worstRelL2: 0, medianRelL2: 0, equal: 0, nearTies: 0, wrong: 0 };
  const errs: number[] = [];
  for (let p = 0; p < P; p++) {
    const v = askOracle(ref, p, outputs[p]!, hidden[p]!);
    errs.push(v.relL2);
    agreement.worstRelL2 = Math.max(agreement.worstRelL2, v.relL2);
    if (v.token === 'equal') agreement.equal++;
    else if (v.token === 'near tie') agreement.nearTies++;
    else agreement.wrong++;
  }
  agreement.medianRelL2 = median(errs);
  return { ref, agreement, seconds: { window: (t1 - t0) / 1000, oracle: (performance.now() - t1) / 1000 } };
}
