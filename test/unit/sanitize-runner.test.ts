/**
 * The sanitize runner (test/sanitize/run.ts) on the CPU reference: a seed replays every walk's
 * start and bits, the walks of one start agree, and `--native` holds each walk to a native run's
 * bits, refusing a target whose bits differ by naming the walk and both digests.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomInt } from 'node:crypto';
import { sanitizeMain } from '../sanitize/run.js';
import { checkNativeBits, hiddenBits, parseNativeBits } from '../sanitize/native-bits.js';

const TARGETS = ['walk@loopback', 'unsharded'];

async function runner(args: string[]): Promise<{ rc: number; lines: string[] }> {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...xs: unknown[]) => void lines.push(xs.join(' '));
  try {
    return { rc: await sanitizeMain(['--backend', 'cpu', ...args]), lines };
  } finally {
    console.log = log;
  }
}

const okLines = (lines: string[]): string[] => lines.filter((l) => / ok: /.test(l));

describe('the sanitize runner (CPU reference)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'memra-sanitize-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a seed replays every start and every bit, another seed draws others; the walks of one start give one digest', async () => {
    const seed = randomInt(0, 2 ** 31);
    const a = await runner(['--seed', String(seed), ...TARGETS]);
    const b = await runner(['--seed', String(seed), ...TARGETS]);
    const c = await runner(['--seed', String(seed + 1), 'unsharded']);
    for (const r of [a, b, c]) assert.equal(r.rc, 0, r.lines.join('\n'));
    assert.equal(a.lines[0], `sanitize-run seed ${seed}`);
    assert.deepEqual(okLines(b.lines), okLines(a.lines));
    const batchStart = (lines: string[]): string => /tiny t=4: start ([\d,]+),/.exec(okLines(lines).join('\n'))![1]!;
    assert.notEqual(batchStart(c.lines), batchStart(a.lines), 'four tokens of 256 drawn again alike');
    const walks = parseNativeBits(a.lines.join('\n'));
    assert.deepEqual([...walks.keys()], TARGETS);
    assert.deepEqual(
      walks.get('walk@loopback')!.map((w) => w.name),
      ['ll', 'll+graph', 'push', 'push+graph'],
    );
    assert.equal(new Set(walks.get('walk@loopback')!.map((w) => w.bits)).size, 1, 'one start, one digest');
    const [t1, g1, t4, g4] = walks.get('unsharded')!.map((w) => w.bits);
    assert.ok(t1 === g1 && t4 === g4 && t1 !== t4, 'eager and graph agree at each t; t = 1 and 4 differ');
  });

  it('--native: the same bits pass; a flipped digest fails that target alone, naming the walk and both digests', async () => {
    const seed = randomInt(0, 2 ** 31);
    const native = await runner(['--seed', String(seed), ...TARGETS]);
    const path = join(dir, 'native.log');
    writeFileSync(path, native.lines.join('\n'));
    const held = await runner(['--seed', String(seed), '--native', path, ...TARGETS]);
    assert.equal(held.rc, 0, held.lines.join('\n'));
    for (const l of okLines(held.lines)) assert.match(l, /; the native run's bits \(4 walk\(s\)\)$/);

    const want = parseNativeBits(native.lines.join('\n')).get('unsharded')![2]!;
    assert.equal(want.name, 'tiny t=4');
    const flipped = ((Number.parseInt(want.bits, 16) ^ 1) >>> 0).toString(16).padStart(8, '0');
    writeFileSync(path, native.lines.join('\n').replace(`bits ${want.bits}`, `bits ${flipped}`));
    const off = await runner(['--seed', String(seed), '--native', path, ...TARGETS]);
    assert.equal(off.rc, 1);
    assert.ok(
      off.lines.some((l) => l.startsWith('sanitize-target walk@loopback ok: ')),
      off.lines.join('\n'),
    );
    const failed = off.lines.find((l) => l.startsWith('sanitize-target unsharded FAILED'));
    assert.ok(failed, off.lines.join('\n'));
    assert.ok(failed.includes(`tiny t=4: ${want.bits}, natively ${flipped}`), failed);
  });

  it('holds the transports to nothing, and says so by silence', async () => {
    const native = new Map([['transports@loopback', []]]);
    assert.equal(checkNativeBits('transports@loopback', 'host 24 ops, peer 24 ops', native), '');
  });

  it('a target the native run did not finish is said, not refused; other walks are refused', () => {
    const native = parseNativeBits(
      [
        'sanitize-target walk@loopback FAILED: something',
        'sanitize-target unsharded ok: a: start 1, bits 0000000a; b: start 1, bits 0000000b',
      ].join('\n'),
    );
    assert.equal(
      checkNativeBits('walk@loopback', 'x: start 3, bits 00000001', native),
      'no native run to compare with',
    );
    assert.throws(
      () => checkNativeBits('unsharded', 'a: start 1, bits 0000000a', native),
      /walks a here against a, b in the native run/,
    );
    assert.throws(
      () => checkNativeBits('unsharded', 'a: start 1, bits 0000000a; c: start 1, bits 0000000b', native),
      /walks a, c here against a, b/,
    );
  });

  it('refuses a bad seed and an unreadable native log by name', async () => {
    for (const bad of ['-1', '1.5', 'x', String(2 ** 32)])
      await assert.rejects(runner([`--seed=${bad}`, 'unsharded']), new RegExp(`--seed must be an integer.*'${bad}'`));
    await assert.rejects(
      runner(['--native', join(dir, 'absent.log'), 'unsharded']),
      /--native .*absent\.log: cannot read/,
    );
  });

  it('the digest sees one bit of one hidden state', () => {
    const h = [Float32Array.from({ length: 64 }, () => Math.random()), new Float32Array(64).fill(0.5)];
    const before = hiddenBits(h);
    const u = new Uint32Array(h[1]!.buffer);
    u[randomInt(0, 64)]! ^= 1 << randomInt(0, 32);
    assert.notEqual(hiddenBits(h), before);
  });
});
