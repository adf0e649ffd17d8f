/**
 * The decode walk is deterministic: from one start token it gives the same bits every run, and
 * its layouts, eager or from the step graph, give the same bits as each other. So a walk under a
 * compute-sanitizer tool must give exactly the bits it gives without one. The oracle's bound
 * cannot say that: the oracle rounds differently, and one e4m3 flip of the MoE input early in a
 * short run moves every later step (docs/model.md), so a median over four steps is the flip's
 * whatever the tool does. scripts/sanitize.sh runs the targets natively first, with the seed the
 * tools then get, and each tool's run holds every walk to the native run's digest.
 *
 * The record is the target's `ok` line: each walk in it says `bits XXXXXXXX`, in the order run.
 */
import { readFileSync } from 'node:fs';

/** FNV-1a over the bytes of every hidden state, in order: a change of one bit changes it. */
export function hiddenBits(hidden: readonly Float32Array[]): string {
  let h = 0x811c9dc5;
  for (const x of hidden) {
    const b = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
    for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i]!, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

const OK = /^sanitize-target (\S+) ok: (.*)$/;
const BITS = /\bbits ([0-9a-f]{8})\b/g;

/** Each target's digests, in order, from a runner's output; targets that failed are absent. */
export function parseNativeBits(log: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of log.split('\n')) {
    const m = OK.exec(line);
    if (m)
      out.set(
        m[1]!,
        [...m[2]!.matchAll(BITS)].map((b) => b[1]!),
      );
  }
  return out;
}

export function readNativeBits(path: string): Map<string, string[]> {
  let log: string;
  try {
    log = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`--native ${path}: cannot read the native run's output (${(e as Error).message})`);
  }
  return parseNativeBits(log);
}

/**
 * Refuses, by walk, a target whose digests are not the native run's. A target the native run did
 * not finish has nothing to be held to: that is said, not refused (its own checks still ran).
 */
export function checkNativeBits(target: string, okLine: string, native: Map<string, string[]>): string {
  const want = native.get(target);
  if (want === undefined) return 'no native run to compare with';
  const got = [...okLine.matchAll(BITS)].map((b) => b[1]!);
  if (got.length !== want.length)
    throw new Error(`${got.length} walk(s) here against ${want.length} in the native run: not the same targets`);
  const differ = got.flatMap((g, i) => (g === want[i] ? [] : [`walk ${i + 1}: ${g}, natively ${want[i]}`]));
  if (differ.length > 0) throw new Error(`hidden-state bits differ from the native run: ${differ.join('; ')}`);
  return `the native run's bits (${got.length} walk(s))`;
}
