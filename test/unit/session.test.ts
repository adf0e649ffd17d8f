/**
 * The session API and `memra decode` on the CPU backend: the walk through the session equals the
 * reference model, bad input is refused by name and leaves the session usable.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { Session } from '../../src/decode/session.js';
import { CpuModel } from '../../src/decode/cpu-model.js';
import { presetByName } from '../../src/decode/model-config.js';
import { DEFAULT_CONFIG } from '../../src/decode/decode-config.js';

describe('session (CPU backend)', function () {
  this.timeout(120_000);
  let s: Session;
  beforeEach(async () => {
    s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 3 });
  });
  afterEach(async () => {
    await s.close();
  });

  it('steps a batch: each row follows its own slot, equal to the reference model stepped by hand', async () => {
    const ref = new CpuModel(presetByName('tiny'), { maxBatch: 3 });
    let cur = [randomInt(0, 256), randomInt(0, 256), randomInt(0, 256)];
    for (let i = 0; i < 6; i++) {
      const want = ref.step(cur, [i, i, i]).next;
      const got = await s.step(cur);
      assert.deepEqual(got, want, `step ${i}`);
      cur = got;
    }
    assert.equal(s.position(0), 6);
    // A shorter batch advances only its rows' slots.
    await s.step([cur[0]!]);
    assert.deepEqual([s.position(0), s.position(1), s.position(2)], [7, 6, 6]);
  });

  it('refuses bad tokens, batches and slots by name, and stays usable', async () => {
    await assert.rejects(s.step([256]), /row 0: token 256 is out of range \[0, 256\)/);
    await assert.rejects(s.step([1, -1]), /row 1: token -1 is out of range/);
    await assert.rejects(
      s.step([1.5]),
      (e: Error) => e instanceof TypeError && /step: token 1\.5 in row 0 is not an integer/.test(e.message),
    );
    await assert.rejects(s.step([]), /a step carries 1 to maxBatch \(3\) tokens, got 0/);
    await assert.rejects(s.step([1, 2, 3, 4]), /a step carries 1 to maxBatch \(3\) tokens, got 4/);
    assert.throws(() => s.position(3), /position: slot must be an integer in \[0, 2\], got 3/);
    assert.equal(s.position(0), 0, 'a refused step moved nothing');
    assert.equal((await s.step([5])).length, 1);
  });

  it('refuses a position past maxPos, and reset starts the slot over', async () => {
    const P = s.model.maxPos;
    let cur = [randomInt(0, 256)];
    for (let i = 0; i < P; i++) cur = await s.step(cur);
    await assert.rejects(
      s.step(cur),
      new RegExp(
        `row 0: slot 0 is full: position ${P} is past the KV cache \\(maxPos ${P}\\); reset\\(0\\) to start it over`,
      ),
    );
    s.reset(0);
    assert.equal(s.position(0), 0);
    assert.equal((await s.step([1])).length, 1);
  });

  it('refuses a bad config by JSON path (unknown transport, layer range outside the model) and keeps the old one', async () => {
    await assert.rejects(
      s.setConfig({ ...DEFAULT_CONFIG, transport: { default: 'carrier-pigeon' as never, layers: [] } }),
      /\$\.transport\.default: must be one of host, peer, push, oneshot, ll, nccl, got "carrier-pigeon"/,
    );
    await assert.rejects(
      s.setConfig({ ...DEFAULT_CONFIG, transport: { default: 'll', layers: [{ from: 0, to: 5, transport: 'push' }] } }),
      /\$\.transport\.layers\[0\]\.to: must be an integer in \[0, 1\], got 5/,
    );
    assert.equal(s.decodeConfig.transport.default, 'll');
    await assert.rejects(
      s.setConfig({ ...DEFAULT_CONFIG, transport: { default: 'nccl', layers: [] } }),
      /the nccl transport needs the CUDA backend/,
    );
    assert.equal(s.decodeConfig.transport.default, 'll');
    await s.setConfig({ ...DEFAULT_CONFIG, wo: 'allreduce' });
    assert.equal(s.decodeConfig.wo, 'allreduce');
    assert.equal((await s.step([1])).length, 1);
  });

  it('refuses a second call while a step is running, and every call after close', async () => {
    const first = s.step([1]);
    await assert.rejects(s.step([2]), /the previous call has not finished; await it first/);
    await first;
    await s.close();
    await assert.rejects(s.step([1]), /step: the session is closed \(closed by close\(\)\)/);
  });

  it('refuses an unknown preset and a bad maxBatch before opening anything', async () => {
    await assert.rejects(
      // @ts-expect-error: `model` is a preset's name or a ModelConfig
      Session.open({ backend: 'cpu', model: 'huge' }),
      /unknown model preset 'huge': the presets are tiny, small, bench/,
    );
    await assert.rejects(
      Session.open({ backend: 'cpu', maxBatch: 9 }),
      /maxBatch must be an integer in \[1, 8\], got 9/,
    );
  });
});

describe('memra decode (CPU backend)', function () {
  this.timeout(120_000);
  const cli = new URL('../../src/cli/main.js', import.meta.url).pathname;

  it("--json reports every row's tokens and each step's time, equal to the session stepped by hand", async () => {
    const out = JSON.parse(
      execFileSync(process.execPath, [cli, 'decode', '--backend', 'cpu', '--tokens', '5', '--batch', '2', '--json'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { tokens: number[][]; stepMs: number[]; backend: string; tokensPerSecond: number };
    assert.equal(out.backend, 'cpu');
    assert.equal(out.stepMs.length, 5);
    assert.ok(out.tokensPerSecond > 0);
    const ref = new CpuModel(presetByName('tiny'), { maxBatch: 2 });
    let cur = [0, 1];
    for (let i = 0; i < 5; i++) {
      cur = ref.step(cur, [i, i]).next;
      assert.deepEqual([out.tokens[0]![i], out.tokens[1]![i]], cur, `step ${i}`);
    }
  });

  it('times every join on its receiving rank and summarises them per hop (unless --no-profile)', () => {
    const quiet = JSON.parse(
      execFileSync(process.execPath, [cli, 'decode', '--backend', 'cpu', '--tokens', '2', '--no-profile', '--json'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { joins?: unknown };
    assert.equal(quiet.joins, undefined);
    const out = JSON.parse(
      execFileSync(process.execPath, [cli, 'decode', '--backend', 'cpu', '--tokens', '3', '--json'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { joins: { hops: Array<{ hop: string; joinsPerToken: number; medianUs: number }>; medianUsPerToken: number } };
    assert.deepEqual(
      out.joins.hops.map((h) => h.hop),
      ['fan-out', 'head all-gather', 'wo', 'ep fan-out', 'ep return'],
    );
    for (const h of out.joins.hops) {
      assert.equal(h.joinsPerToken, 2, `${h.hop}: one join per layer of tiny`);
      assert.ok(h.medianUs > 0, `${h.hop}: ${h.medianUs} us`);
    }
    assert.ok(out.joins.medianUsPerToken > 0);
    const replicated = JSON.parse(
      execFileSync(
        process.execPath,
        [cli, 'decode', '--backend', 'cpu', '--tokens', '3', '--walk', 'replicated', '--json'],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
      ),
    ) as typeof out & { tokens: number[][]; config: { walk: string } };
    assert.equal(replicated.config.walk, 'replicated');
    assert.deepEqual(
      replicated.joins.hops.map((h) => [h.hop, h.joinsPerToken]),
      ['head all-gather', 'wo all-gather', 'ep exchange'].map((h) => [h, 2]),
    );
    const seed = JSON.parse(
      execFileSync(process.execPath, [cli, 'decode', '--backend', 'cpu', '--tokens', '3', '--no-profile', '--json'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { tokens: number[][] };
    assert.deepEqual(replicated.tokens, seed.tokens, 'the two walks give the same tokens');
  });

  it('--devices picks the ranks and the layout, --loopback puts both on one device; the same tokens, and the choice said', () => {
    const json = (
      args: string[],
    ): { tokens: number[][]; layout: string; devices: number[]; loopback: boolean; why: string } =>
      JSON.parse(
        execFileSync(
          process.execPath,
          [cli, 'decode', '--backend', 'cpu', '--tokens', '4', '--no-profile', '--json', ...args],
          { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
        ),
      );
    const one = json(['--devices', '1']);
    assert.deepEqual([one.layout, one.devices, one.loopback], ['unsharded', [1], false]);
    assert.equal(one.why, 'backend cpu as asked; unsharded (one rank asked for), on device 1');
    const loop = json(['--loopback']);
    assert.deepEqual([loop.layout, loop.devices, loop.loopback], ['sharded', [0, 0], true]);
    const two = json([]);
    assert.equal(two.why, 'backend cpu as asked; sharded, on devices 0 and 1');
    assert.deepEqual(loop.tokens, one.tokens);
    assert.deepEqual(two.tokens, one.tokens);
    const text = execFileSync(
      process.execPath,
      [cli, 'decode', '--backend', 'cpu', '--tokens', '2', '--devices', '0'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    );
    assert.match(
      text,
      /^backend: cpu \(unsharded\), model: tiny, batch 1\nchose: backend cpu as asked; unsharded \(one rank asked for\), on device 0\n/,
    );
  });

  it('exits 2 with a message naming the bad option, and 1 naming a device choice that cannot run', () => {
    for (const [args, msg, status] of [
      [['--batch', '9'], /--batch must be an integer from 1 to 8, got '9'/, 2],
      [['--tokens', '0'], /--tokens must be a positive integer, got '0'/, 2],
      [['--backend', 'tpu'], /--backend must be auto, cuda or cpu, got 'tpu'/, 2],
      [['--walk', 'balanced'], /--walk must be seed or replicated, got 'balanced'/, 2],
      [
        ['--devices', '0,1,2'],
        /--devices must be one device ordinal or two separated by a comma \(0, or 0,1\), got '0,1,2'/,
        2,
      ],
      [
        ['--backend', 'cpu', '--devices', '0', '--layout', 'sharded'],
        /memra decode: layout 'sharded' needs two ranks, and devices \[0\] is one/,
        1,
      ],
      [
        ['--backend', 'cpu', '--devices', '1,1'],
        /memra decode: RuntimeOptions\.devices: both ranks are on device 1\..*pass loopback: true/,
        1,
      ],
      [
        ['--backend', 'cpu', '--devices', '0,1', '--loopback'],
        /memra decode: RuntimeOptions\.loopback puts both ranks on one device, but devices \[0, 1\] are two devices/,
        1,
      ],
    ] as const) {
      try {
        execFileSync(process.execPath, [cli, 'decode', ...args], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        assert.fail(`memra decode ${args.join(' ')} succeeded`);
      } catch (e) {
        const err = e as { status: number; stderr: string };
        assert.equal(err.status, status, `memra decode ${args.join(' ')}: ${err.stderr}`);
        assert.match(err.stderr, msg);
      }
    }
  });
});
