/**
 * What the test suites ask of a soak loop (bench/soak/) run at a test's counts: it ran what was
 * asked without an error, and every check held but RSS and step-time drift, which a short run on
 * a shared machine cannot judge (the GPU soak judges them). Progress goes nowhere.
 */
import { strict as assert } from 'node:assert';
import { Writable } from 'node:stream';
import { Progress } from '../../src/cli/progress.js';
import type { LoopResult } from '../../bench/soak/loop-result.js';

const NOISY = new Set(['RSS', 'RSS trend', 'p99 drift']);

export function quietProgress(): Progress {
  return new Progress(new Writable({ write: (_c, _e, cb) => cb() }) as unknown as NodeJS.WriteStream);
}

export function assertHeld(l: LoopResult | undefined): void {
  assert.ok(l, 'the loop ran');
  assert.equal(l.error, undefined, l.error);
  assert.equal(l.cut, undefined, l.cut);
  assert.equal(l.ran, l.asked);
  const failed = l.checks.filter((c) => !c.pass && !NOISY.has(c.name));
  assert.deepEqual(
    failed.map((c) => `${c.name}: ${c.value} (${c.limit})`),
    [],
    l.notes.join('\n'),
  );
  assert.ok(l.checks.length >= 2, 'it checked something');
}
