/**
 * Greedy or teacher-forced runs of a session, and of the in-process model (the oracle), keeping
 * every step's tokens and hidden state; a session's run checked against a reference step by step.
 */
import { strict as assert } from 'node:assert';
import type { Session } from '../../src/decode/session.js';
import { CpuModel } from '../../src/decode/cpu-model.js';
import type { ModelConfig } from '../../src/decode/model-config.js';

export interface Run {
  next: number[][];
  hidden: Float32Array[];
}

/** `steps` greedy steps from `start` (with `force`, step i is fed force[i] instead). Resets every slot first. */
export async function runSession(s: Session, start: number[], steps: number, force?: number[][]): Promise<Run> {
  s.reset();
  const out: Run = { next: [], hidden: [] };
  let cur = start;
  for (let i = 0; i < steps; i++) {
    const r = await s.stepDetailed(force ? force[i]! : cur, { hidden: true });
    out.next.push(r.next);
    out.hidden.push(r.hidden!);
    cur = r.next;
  }
  return out;
}

/** `steps` greedy steps of the in-process model from `start`, row s at position i in step i. */
export function oracleRun(cfg: ModelConfig, start: number[], steps: number): Run {
  const m = new CpuModel(cfg, { maxBatch: start.length });
  const out: Run = { next: [], hidden: [] };
  let cur = start;
  for (let i = 0; i < steps; i++) {
    const r = m.step(
      cur,
      cur.map(() => i),
    );
    out.next.push(r.next);
    out.hidden.push(r.hidden);
    cur = r.next;
  }
  return out;
}

/** sqrt(Σ (a − b)²) / sqrt(Σ b²), in double. */
export function relL2(a: Float32Array, b: Float32Array): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num / den);
}

export function sameBits(a: Float32Array, b: Float32Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/**
 * Greedy steps of `s` from `start`, each held to `ref`'s bit for bit (tokens and hidden state);
 * in the replicated walk rank 1's copy of h too. `between` runs before each step (a config
 * change, say) and names what it did.
 */
export async function expectRun(
  s: Session,
  ref: Run,
  start: number[],
  what: string,
  between?: (i: number) => Promise<string>,
): Promise<void> {
  s.reset();
  let cur = start;
  for (let i = 0; i < ref.next.length; i++) {
    const how = between ? `${what} (${await between(i)})` : what;
    const r = await s.stepDetailed(cur, { hidden: true });
    assert.deepEqual(r.next, ref.next[i], `${how} step ${i}: tokens`);
    assert.ok(
      sameBits(r.hidden!, ref.hidden[i]!),
      `${how} step ${i}: hidden state not bit-identical (relative L2 ${relL2(r.hidden!, ref.hidden[i]!).toExponential(2)})`,
    );
    if (s.layout === 'sharded' && s.decodeConfig.walk === 'replicated') {
      const h = await s.residuals();
      assert.equal(h.length, 2, `${how} step ${i}: both ranks hold h`);
      assert.ok(sameBits(h[1]!, ref.hidden[i]!), `${how} step ${i}: rank 1's h is not the reference's`);
    }
    cur = r.next;
  }
}
