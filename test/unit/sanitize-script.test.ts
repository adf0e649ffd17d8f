/**
 * scripts/sanitize.sh on the CPU reference (SANITIZE_BACKEND=cpu), under a stand-in for
 * compute-sanitizer that runs the runner as the tool would and, as initcheck, reports once during
 * the second target: the native run first, each tool's verdict and summary line, the report placed
 * in the target it came during, the seed printed and passed on, and a deadline too short for a
 * run skipping it, each with the exit status the script promises.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomInt } from 'node:crypto';

const script = new URL('../../../scripts/sanitize.sh', import.meta.url).pathname;

// As compute-sanitizer: a banner, the command's output, a summary line, 99 for a report.
const STAND_IN = `#!/usr/bin/env bash
if [ "$1" = --version ]; then echo "Stand-in Sanitizer 0.0"; exit 0; fi
tool=
while [ "$1" != node ]; do [ "$1" = --tool ] && tool=$2; shift; done
echo "========= COMPUTE-SANITIZER"
if [ "$tool" = initcheck ]; then
  "$@" | awk '{ print } /^sanitize-target walk@loopback begin/ { print "========= Uninitialized __global__ memory read" }'
  rc=\${PIPESTATUS[0]}
  echo "========= ERROR SUMMARY: 1 error"
  [ "$rc" -eq 0 ] && exit 99
  exit "$rc"
fi
"$@"; rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit "$rc"
`;

describe('scripts/sanitize.sh (CPU reference, a stand-in tool)', function () {
  this.timeout(180_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'memra-sanitize-sh-'));
    writeFileSync(join(dir, 'compute-sanitizer'), STAND_IN);
    chmodSync(join(dir, 'compute-sanitizer'), 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const sanitize = (out: string, env: Record<string, string>) =>
    spawnSync('bash', [script, out, 'unsharded', 'walk@loopback'], {
      encoding: 'utf8',
      // No deadline but the test's own: not one a gpu-session step handed this process.
      env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, SANITIZE_BACKEND: 'cpu', STEP_BOUND: '', ...env },
    });

  it('runs natively, then each tool with the same seed; a report is placed in its target and fails the run', () => {
    const seed = String(randomInt(0, 2 ** 31));
    const out = join(dir, 'a');
    const r = sanitize(out, { SANITIZE_TOOLS: 'memcheck initcheck', SANITIZE_SEED: seed });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    const summary = readFileSync(join(out, 'summary.txt'), 'utf8').split('\n');
    assert.deepEqual(summary, r.stdout.trim().split('\n').concat(''), 'summary.txt is what was printed');
    assert.match(summary[0]!, new RegExp(`Stand-in Sanitizer 0.0, the CPU reference, .*SANITIZE_SEED=${seed}$`));
    const verdict = (label: string) => summary.find((l) => l.startsWith(`sanitize: ${label}: `));
    assert.match(verdict('native (no tool)') ?? '', /: clean; 2 target\(s\) ok$/);
    assert.match(verdict('memcheck') ?? '', /: clean; ERROR SUMMARY: 0 errors ; 2 target\(s\) ok$/);
    assert.match(verdict('initcheck') ?? '', /: reported errors; ERROR SUMMARY: 1 error ; 2 target\(s\) ok$/);
    const targets = summary.slice(summary.indexOf(verdict('initcheck')!) + 1);
    assert.equal(targets[0], '  unsharded: ok, 0 report(s)');
    assert.equal(targets[1], '  walk@loopback: ok, 1 report(s); first: Uninitialized __global__ memory read');
    for (const tool of ['memcheck', 'initcheck']) {
      const log = readFileSync(join(out, `${tool}.log`), 'utf8');
      assert.match(log, new RegExp(`^sanitize-run seed ${seed}, held to the bits of ${out}/native.log$`, 'm'));
      assert.equal((log.match(/; the native run's bits \(\d walk\(s\)\)$/gm) ?? []).length, 2, tool);
    }
  });

  it('a deadline too short for a run skips it and fails the whole; a bad seed or backend stops it at once', () => {
    const out = join(dir, 'b');
    // A run needs 20 s of the deadline past the 40 a timed-out run may take to stop: 45 s leaves
    // none, whatever this machine's speed (a longer deadline would make the skip a race).
    const r = sanitize(out, { SANITIZE_TOOLS: 'memcheck', SANITIZE_DEADLINE: '45' });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^sanitize: native \(no tool\): skipped, \d+ s left of the run's 45 s bound$/m);
    assert.match(r.stdout, /^sanitize: memcheck: skipped, \d+ s left of the run's 45 s bound$/m);
    for (const [env, said] of [
      [{ SANITIZE_SEED: '-3' }, /SANITIZE_SEED must be an integer in \[0, 2\^32\), got '-3'/],
      [{ SANITIZE_DEADLINE: 'soon' }, /SANITIZE_DEADLINE must be whole seconds, got 'soon'/],
      [{ SANITIZE_BACKEND: 'tpu' }, /SANITIZE_BACKEND must be cuda or cpu, got 'tpu'/],
    ] as const) {
      const bad = sanitize(join(dir, 'c'), env);
      assert.equal(bad.status, 2, bad.stdout + bad.stderr);
      assert.match(bad.stderr, said);
    }
  });
});
