/**
 * The command line follows Node's conventions: each command's own --help (options, defaults,
 * limits), --version and `help`, bad values refused in the CLI's words, messages in CLI syntax,
 * errors as JSON under --json with a non-zero status, a summary whose rate and step time are one
 * figure, and a bench that refuses what it cannot run (CPU reference).
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { detectBackend } from '../../src/runtime/runtime.js';
import { runCli } from '../../src/cli/run-cli.js';
import { costCell, medianInterval } from '../../bench/paired-difference.js';
import type { Row } from '../../bench/results-file.js';

const cli = new URL('../../src/cli/main.js', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };

interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** `memra ...args` as a process: its exit status is the process's. */
function memraProcess(...args: string[]): Ran {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * `memra ...args` in this process (runCli, what main.ts runs), its output captured: the same
 * command line without a process start for each case.
 */
async function memra(...args: string[]): Promise<Ran> {
  const out = { stdout: '', stderr: '' };
  const write = { stdout: process.stdout.write, stderr: process.stderr.write };
  const capture =
    (to: 'stdout' | 'stderr') =>
    (chunk: string | Uint8Array): boolean => {
      out[to] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      return true;
    };
  process.stdout.write = capture('stdout') as typeof process.stdout.write;
  process.stderr.write = capture('stderr') as typeof process.stderr.write;
  try {
    return { status: await runCli(args), ...out };
  } finally {
    process.stdout.write = write.stdout;
    process.stderr.write = write.stderr;
  }
}

describe('memra: conventions of the command line', function () {
  this.timeout(120_000);

  it('--version prints the package version; help and --help print the commands', async () => {
    const v = memraProcess('--version');
    assert.equal(v.status, 0);
    assert.equal(v.stdout.trim(), pkg.version);
    for (const args of [['help'], ['--help']]) {
      const r = await memra(...args);
      assert.equal(r.status, 0, args.join(' '));
      for (const c of ['selfcheck', 'decode', 'profile', 'bench', 'help'])
        assert.match(r.stdout, new RegExp(`^  ${c}\\b`, 'm'));
    }
  });

  it("each command's --help lists its own options with their defaults and limits", async () => {
    const want: Record<string, RegExp[]> = {
      decode: [
        /^usage: memra decode \[options\]/,
        /--tokens N +.*\(a positive integer; default 32\)/,
        /--batch T +.*\(an integer from 1 to 8; default 1\)/,
        /--backend auto\|cuda\|cpu .*\(default auto\)/,
        /--layout sharded\|unsharded .*default: sharded over two GPUs, unsharded on one/,
        /--devices D\[,D\] +the device ordinals, one per rank/,
        /--loopback +both ranks of the sharded walk on one device/,
        /--no-profile/,
      ],
      profile: [
        /^usage: memra profile \[options\]/,
        /--out DIR .*\(default memra-profile\)/,
        /--preset tiny\|small\|bench/,
      ],
      bench: [
        /^usage: memra bench \[suite\.\.\.\] \[options\]/,
        /\[suite\.\.\.\] +the suites to run \(default: ring, joins, decode, ep; roofline is decode.s one-GPU part alone\): ring, joins, decode, ep, roofline/,
        /--joins N .*\(an integer of at least 100\)/,
        /--transports T\[,T\.\.\.\] .*any of host, peer, push, oneshot, ll, nccl/,
        /--backend cuda\|cpu/,
      ],
      selfcheck: [/^usage: memra selfcheck \[options\]/, /--joins N .*\(an integer from 1 to 10000000; default 2000\)/],
    };
    for (const [command, res] of Object.entries(want)) {
      for (const help of [await memra(command, '--help'), await memra('help', command)]) {
        assert.equal(help.status, 0, `${command} --help`);
        // As one line: a long description wraps, so an option's notes may start on the next line.
        const flat = help.stdout.replace(/\s+/g, ' ');
        for (const re of res) assert.match(flat, re, `${command} --help`);
        assert.doesNotMatch(help.stdout, /^commands:/m, `${command} --help is the command's own, not the global usage`);
      }
    }
    assert.doesNotMatch((await memra('bench', '--help')).stdout, /--preset/);
  });

  it("refuses a bad number in the CLI's own words, never the parser's", async () => {
    for (const [args, msg] of [
      [['decode', '--tokens', '-1'], /^memra decode: --tokens must be a positive integer, got '-1'$/m],
      [['decode', '--tokens=-1'], /^memra decode: --tokens must be a positive integer, got '-1'$/m],
      [['decode', '--batch', '2.5'], /^memra decode: --batch must be an integer from 1 to 8, got '2\.5'$/m],
      [['decode', '--batch', '0x2'], /^memra decode: --batch must be an integer from 1 to 8, got '0x2'$/m],
      [['decode', '--tokens'], /^memra decode: --tokens needs a value \(N\)$/m],
      [
        ['decode', '--tokns', '3'],
        /^memra decode: unknown option '--tokns' \(did you mean --tokens\?\); the options are --preset, /m,
      ],
      [['decode', '--json=yes'], /^memra decode: --json takes no value, got '--json=yes'$/m],
      [['decode', '--preset', 'huge'], /^memra decode: --preset must be tiny, small or bench, got 'huge'$/m],
      [['frob'], /^memra: unknown command 'frob'; the commands are selfcheck, decode, profile, bench, help$/m],
    ] as const) {
      const r = await memra(...args);
      assert.equal(r.status, 2, args.join(' '));
      assert.match(r.stderr, msg, args.join(' '));
      assert.doesNotMatch(r.stderr, /ambiguous|ERR_PARSE_ARGS/);
    }
  });

  it('refuses --tokens past the KV cache before loading the model, by its flags', async () => {
    const r = await memra('decode', '--backend', 'cpu', '--preset', 'tiny', '--tokens', '65');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--tokens 65 is past the KV cache of --preset tiny \(maxPos 64\): at most 64/);
    assert.doesNotMatch(r.stderr, /weights/, 'nothing was loaded');
  });

  it('words a fix in CLI syntax: --backend cuda where there is no GPU', async function () {
    if (detectBackend().devices >= 1) this.skip(); // this machine has the GPU it would miss
    const r = await memra('decode', '--backend', 'cuda', '--tokens', '2');
    assert.equal(r.status, 1);
    // Installed without the CUDA toolkit there is no addon to find a device with: that is the fix.
    const built = existsSync(new URL('../../../build/Release/memra.node', import.meta.url));
    assert.match(
      r.stderr,
      built
        ? /^memra decode: device ordinal 0 is out of range: 0 CUDA devices visible.*; use --backend cpu$/m
        : /^memra decode: memra: the CUDA addon is not built .*`npm run build:addon`/m,
    );
    assert.doesNotMatch(r.stderr, /backend: /, 'no API syntax');
  });

  it('with --json, an error is { "error": { "code", "message" } } on stdout and the status is non-zero', async () => {
    for (const [args, code, status] of [
      [['decode', '--json', '--tokens', '-1'], 'ERR_INVALID_ARG_VALUE', 2],
      [['decode', '--json', '--bogus'], 'ERR_UNKNOWN_OPTION', 2],
      [['decode', '--json', '--backend', 'cpu', '--config', 'nowhere.json', '--tokens', '1'], 'ERR_CONFIG', 1],
      [['selfcheck', '--json', '--joins', '0'], 'ERR_INVALID_ARG_VALUE', 2],
    ] as const) {
      // One case as a process, to see its exit status; the others through runCli, as main.ts runs it.
      const r = code === 'ERR_CONFIG' ? memraProcess(...args) : await memra(...args);
      assert.equal(r.status, status, args.join(' '));
      const out = JSON.parse(r.stdout) as { error: { code: string; message: string } };
      assert.deepEqual(Object.keys(out), ['error']);
      assert.equal(out.error.code, code, args.join(' '));
      assert.ok(out.error.message.length > 10, out.error.message);
    }
  });

  it("the summary's tokens/s and step time are the same figure: batch / the median step", async () => {
    const r = await memra('decode', '--backend', 'cpu', '--tokens', '4', '--batch', '2', '--no-profile');
    assert.equal(r.status, 0, r.stderr);
    const m =
      /^([\d.]+) tokens\/s at the median step of ([\d.]+) ms \(batch 2 \/ step; .* over 3 steps, first excluded\); mean step ([\d.]+) ms$/m.exec(
        r.stdout,
      );
    assert.ok(m, r.stdout);
    const [rate, median] = [Number(m[1]), Number(m[2])];
    assert.ok(Math.abs(rate - 2000 / median) <= 0.05 + rate * 1e-3, `${rate} tokens/s against 2000 / ${median} ms`);
    const json = JSON.parse(
      (await memra('decode', '--backend', 'cpu', '--tokens', '3', '--json', '--no-profile')).stdout,
    ) as {
      tokensPerSecond: number;
      medianStepMs: number;
      meanStepMs: number;
      stepMs: number[];
    };
    assert.ok(Math.abs(json.tokensPerSecond - 1000 / json.medianStepMs) < 1e-9);
    const steady = json.stepMs.slice(1);
    assert.ok(Math.abs(json.meanStepMs - steady.reduce((a, b) => a + b, 0) / steady.length) < 1e-9);
  });
});

describe('memra bench: refuses what it cannot run (CPU backend)', function () {
  this.timeout(120_000);
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'memra-bench-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('an unknown transport, op or suite, or a transport the backend lacks, is exit 2 and no file', async () => {
    for (const [args, msg] of [
      [
        ['joins', '--transports', 'bogus'],
        /--transports: unknown transport 'bogus'; the choices are host, peer, push, oneshot, ll, nccl/,
      ],
      [
        ['joins', '--ops', 'scatter'],
        /--ops: unknown op 'scatter'; the choices are broadcast, allGather, gather, allReduce/,
      ],
      [
        ['joins', '--transports', 'nccl'],
        /--transports nccl: the CPU reference has no nccl transport \(it needs CUDA\)/,
      ],
      [['ring', '--transports', 'll'], /--transports and --ops choose the joins suite's rows; this run has ring/],
      [['warp'], /unknown suite 'warp'; suites: ring, joins, decode, ep/],
    ] as const) {
      const r = await memra('bench', ...args, '--backend', 'cpu', '--out', dir);
      assert.equal(r.status, 2, args.join(' '));
      assert.match(r.stderr, msg);
      assert.deepEqual(readdirSync(dir), [], 'nothing written');
    }
  });

  it('runs small counts on the CPU reference, says it is a smoke run, and writes only rows it measured', async () => {
    const t = performance.now();
    const r = await memra(
      'bench',
      'joins',
      '--backend',
      'cpu',
      '--transports',
      'll,push',
      '--ops',
      'broadcast',
      '--out',
      dir,
    );
    assert.equal(r.status, 0, r.stderr);
    assert.ok(performance.now() - t < 30_000, 'seconds, not minutes');
    assert.match(r.stderr, /a smoke run of each suite's code with small counts; its figures are not a measurement/);
    const [file] = readdirSync(dir);
    const data = JSON.parse(readFileSync(join(dir, file!), 'utf8')) as { rows: Row[] };
    assert.deepEqual([...new Set(data.rows.map((x) => `${x.transport} ${x.op}`))].sort(), [
      'll broadcast',
      'push broadcast',
    ]);
    for (const row of data.rows) assert.ok(row.n > 0 && row.samples.length === row.n);
  });
});

describe('bench decode: a difference is a cost only where it stands out of the noise (CPU backend)', function () {
  this.timeout(120_000);

  it('prints no negative cost: every paired difference carries its interval and reads as what it is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'memra-bench-decode-'));
    try {
      const r = await memra('bench', 'decode', '--backend', 'cpu', '--out', dir);
      assert.equal(r.status, 0, r.stderr);
      const [file] = readdirSync(dir);
      const rows = (JSON.parse(readFileSync(join(dir, file!), 'utf8')) as { rows: Row[] }).rows;
      const diffs = rows.filter((x) => x.op === 'joins' || x.op === 'profile overhead');
      assert.ok(diffs.length >= 8, `${diffs.length} difference rows`);
      for (const d of diffs) {
        assert.ok(d.interval && d.n >= 6, `${d.op} ${d.transport}: an interval over ${d.n} samples`);
        const cell = costCell(d);
        assert.ok(typeof cell === 'string' || cell > 0, `${d.op} ${d.transport}: ${cell}`);
      }
      // The printed table: a difference row's median cell is never a negative number.
      for (const line of r.stdout.split('\n').filter((l) => /'joins'|'profile overhead'/.test(l))) {
        const median = line.split('│')[7]!.trim();
        assert.doesNotMatch(median, /^-[\d.]+$/, line);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bench: a difference is a cost only where it stands out of the noise', () => {
  const diffRow = (samples: number[]): Row => {
    const sorted = [...samples].sort((a, b) => a - b);
    return {
      suite: 'decode',
      op: 'joins',
      transport: 'll',
      bytes: 0,
      preset: 'tiny',
      unit: 'ms',
      method: '',
      samples,
      n: samples.length,
      median: sorted[Math.ceil(samples.length / 2) - 1]!,
      p90: 0,
      p99: 0,
      min: sorted[0]!,
      max: sorted.at(-1)!,
      mean: 0,
      interval: medianInterval(samples),
    };
  };

  it("the median's interval holds the median, and narrows with more samples", () => {
    const draw = (n: number): number[] => Array.from({ length: n }, () => 1 + Math.random());
    for (const n of [1, 5, 9, 40, 400]) {
      const xs = draw(n);
      const [lo, hi] = medianInterval(xs);
      const r = diffRow(xs);
      assert.ok(lo <= r.median && r.median <= hi, `n ${n}: ${lo} <= ${r.median} <= ${hi}`);
    }
    const wide = medianInterval(draw(9)),
      narrow = medianInterval(draw(4000));
    assert.ok(narrow[1] - narrow[0] < wide[1] - wide[0]);
  });

  it('prints a negative or noisy difference as such, never as a negative cost', () => {
    const noisy = diffRow(Array.from({ length: 41 }, (_, i) => (i % 2 ? 1 : -1) * (0.1 + i / 100) - 0.01));
    assert.match(String(costCell(noisy)), /^within noise \(-?[\d.]+; 95% -[\d.]+ to [\d.]+\)$/);
    const faster = diffRow(Array.from({ length: 41 }, () => -0.2 - Math.random() / 10));
    assert.match(String(costCell(faster)), /^none: faster than its baseline by 0\.\d+$/);
    const few = diffRow([-0.3, -0.2, -0.25, -0.4, -0.1]);
    assert.match(String(costCell(few)), /^too few samples to tell from noise \(-0\.25; n 5\)$/);
    const cost = diffRow(Array.from({ length: 41 }, () => 0.5 + Math.random() / 10));
    assert.equal(typeof costCell(cost), 'number');
    assert.ok((costCell(cost) as number) > 0.5);
  });
});
