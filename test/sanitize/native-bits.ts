/**
 * The decode walk is deterministic: from one start token it gives the same bits every run, and
 * its transports, eager or from the step graph, give the same bits as each other. So a walk under
 * a compute-sanitizer tool must give exactly the bits it gives without one. The oracle cannot say
 * that: it rounds differently, and where an element of the MoE input sits within that rounding
 * of a midpoint between two e4m3 codes (docs/model.md's quantization), the two pick neighbouring
 * codes and the step moves by up to ~2e-3. scripts/sanitize.sh runs the targets natively first,
 * with the seed the tools then get, and each tool's run holds every walk to the native digests.
 *
 * The record is the target's `ok` line: each walk in it says `NAME: start ..., bits XXXXXXXX`.
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
const WALK = /([^;:]+): start [^;]*?\bbits ([0-9a-f]{8})\b/g;

interface Walk {
  name: string;
  bits: string;
}

const walksOf = (text: string): Walk[] => [...text.matchAll(WALK)].map((m) => ({ name: m[1]!.trim(), bits: m[2]! }));

/** Each target's walks, in order, from a runner's output; targets that failed are absent. */
export function parseNativeBits(log: string): Map<string, Walk[]> {
  const out = new Map<string, Walk[]>();
  for (const line of log.split('\n')) {
    const m = OK.exec(line);
    if (m) out.set(m[1]!, walksOf(m[2]!));
  }
  return out;
}

export function readNativeBits(path: string): Map<string, Walk[]> {
  let log: string;
  try {
    log = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`--native ${path}: cannot read the native run's output (${(e as Error).message})`);
  }
  return parseNativeBits(log);
}

/**
 * What holding `target`'s walks to the native run's found, for its `ok` line ('' for a target
 * with no walks, the transports); refuses, naming each walk and both digests, where bits differ.
 * A target the native run did not finish has nothing to be held to: that is said, not refused
 * (its own checks still ran).
 */
export function checkNativeBits(target: string, okText: string, native: Map<string, Walk[]>): string {
  const got = walksOf(okText);
  if (got.length === 0) return '';
  const want = native.get(target);
  if (want === undefined) return 'no native run to compare with';
  if (got.length !== want.length || got.some((g, i) => g.name !== want[i]!.name))
    throw new Error(
      `walks ${got.map((g) => g.name).join(', ')} here against ${want.map((w) => w.name).join(', ') || 'none'} in the native run`,
    );
  const differ = got.flatMap((g, i) =>
    g.bits === want[i]!.bits ? [] : [`${g.name}: ${g.bits}, natively ${want[i]!.bits}`],
  );
  if (differ.length > 0) throw new Error(`hidden-state bits differ from the native run: ${differ.join('; ')}`);
  return `the native run's bits (${got.length} walk(s))`;
}
