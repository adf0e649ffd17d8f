/**
 * A process that uses memra ends the way a Node process does: a script that never closes its
 * session still exits (the session is drained and freed first, and stderr says so), workers start
 * under whatever flags the process was started with, and `await using` closes a session at the
 * end of its block. The scripts run in child processes on the CPU reference.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session, SessionStateError } from '../../src/index.js';
import { loaderExecArgv, workerExecArgv, workerExecArgvChoices } from '../../src/workers/worker-exec-argv.js';

const index = new URL('../../src/index.js', import.meta.url).href;

/** A script that opens a session, steps it and prints the tokens; `close` or not. */
function script(tokens: number[], close: boolean): string {
  return [
    `import { Session } from ${JSON.stringify(index)};`,
    "const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2 });",
    `console.log(JSON.stringify(await s.step(${JSON.stringify(tokens)})));`,
    close ? 'await s.close();' : '',
  ].join('\n');
}

function node(
  args: string[],
  cwd?: string,
): { status: number | null; signal: string | null; stdout: string; stderr: string; ms: number } {
  const t = performance.now();
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 20_000, ...(cwd ? { cwd } : {}) });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, ms: performance.now() - t };
}

describe('a process that uses memra (CPU backend)', function () {
  this.timeout(60_000);
  let dir = '';
  /** The tokens a fresh pair of rows gives, stepped in this process. */
  let tokens: number[] = [];
  let want = '';
  before(async () => {
    tokens = [randomInt(0, 256), randomInt(0, 256)];
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2 });
    try {
      want = JSON.stringify(await s.step(tokens));
    } finally {
      await s.close();
    }
  });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'memra-exit-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('exits without close(): the session is drained and freed first, and stderr says so', () => {
    const file = join(dir, 'forgets-close.mjs');
    writeFileSync(file, script(tokens, false));
    const r = node([file]);
    assert.equal(r.signal, null, `killed after ${r.ms.toFixed(0)} ms: the process did not exit by itself`);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), want);
    assert.match(
      r.stderr,
      /memra: a session \(cpu, model 'tiny', sharded\) was still open when the process ran out of work: drained and freed it/,
    );
    assert.doesNotMatch(r.stderr, /a runtime/, 'the session is reported once, not its runtime again');
  });

  it('says nothing at exit when the session was closed', () => {
    const file = join(dir, 'closes.mjs');
    writeFileSync(file, script(tokens, true));
    const r = node([file]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), want);
    assert.doesNotMatch(r.stderr, /memra:/);
  });

  it('starts its workers under `node --input-type=module -e`, and keeps an --import loader for them', () => {
    const marks = join(dir, 'marks.txt');
    const loader = join(dir, 'loader.mjs');
    // Runs in every thread the loader is given to: the workers must write their mark.
    writeFileSync(
      loader,
      `import { isMainThread } from 'node:worker_threads'; import { appendFileSync } from 'node:fs';\nappendFileSync(${JSON.stringify(marks)}, isMainThread ? 'main\\n' : 'worker\\n');\n`,
    );
    const r = node(['--import', loader, '--input-type=module', '-e', script(tokens, true)]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), want);
    assert.deepEqual(readFileSync(marks, 'utf8').split('\n').filter(Boolean).sort(), ['main', 'worker', 'worker']);
  });

  it('starts its workers when the process also has an option a worker cannot take (a V8 flag)', () => {
    const r = node(['--stack-trace-limit=20', '--input-type=module', '--eval', script(tokens, true)]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), want);
  });

  it("holds nothing of a closed session, the process's first included", () => {
    const file = join(dir, 'collects.mjs');
    writeFileSync(
      file,
      [
        `import { Session } from ${JSON.stringify(index)};`,
        'async function cycle() {',
        "  const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2 });",
        '  await s.step([1, 2]);',
        '  await s.close();',
        '  return [new WeakRef(s), new WeakRef(s.runtime)];',
        '}',
        // The first session and runtime the process opens, then one more: nothing may keep either.
        'const refs = [...(await cycle()), ...(await cycle())];',
        'for (let i = 0; i < 5; i++) { await new Promise((r) => setTimeout(r, 20)); globalThis.gc(); }',
        'console.log(refs.filter((r) => r.deref() !== undefined).length);',
      ].join('\n'),
    );
    const r = node(['--expose-gc', file]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), '0', 'sessions and runtimes still reachable after close');
  });

  it('`await using` closes the session at the end of its block', async () => {
    let kept: Session | undefined;
    {
      await using s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2 });
      assert.equal(JSON.stringify(await s.step(tokens)), want);
      kept = s;
    }
    await assert.rejects(
      kept.step(tokens),
      (e: Error) => e instanceof SessionStateError && e.code === 'ERR_SESSION_CLOSED',
    );
  });
});

describe('the execArgv a device worker starts with', () => {
  it('drops the entry point options and their values, and keeps the rest in order', () => {
    const cases: Array<[string[], string[]]> = [
      [['--input-type=module', '-e', 'code'], []],
      [
        ['--import', 'tsx', '--input-type', 'module', '--eval=code', '--enable-source-maps'],
        ['--import', 'tsx', '--enable-source-maps'],
      ],
      [['-pe', 'code', '--conditions=dev'], ['--conditions=dev']],
      [
        ['--require', './r.cjs', '-p', 'x', '--no-warnings'],
        ['--require', './r.cjs', '--no-warnings'],
      ],
      [
        ['--test', '--test-reporter', 'spec', '--loader', 'l.mjs'],
        ['--loader', 'l.mjs'],
      ],
      [['--watch', '--check', '-i', '--max-old-space-size=512'], ['--max-old-space-size=512']],
    ];
    for (const [given, want] of cases) assert.deepEqual(workerExecArgv(given), want, given.join(' '));
  });

  it('inherits as Node does when nothing needs dropping; else the filtered options, then the loaders alone', () => {
    assert.deepEqual(workerExecArgvChoices(['--import', 'x.mjs', '--stack-trace-limit=5']), [undefined]);
    assert.deepEqual(workerExecArgvChoices(['--stack-trace-limit=5', '--import', 'x.mjs', '-e', 'code']), [
      ['--stack-trace-limit=5', '--import', 'x.mjs'],
      ['--import', 'x.mjs'],
    ]);
    assert.deepEqual(loaderExecArgv(['--expose-gc', '-r', 'a', '--import=b', '--enable-source-maps', '--title=x']), [
      '-r',
      'a',
      '--import=b',
      '--enable-source-maps',
    ]);
  });
});
