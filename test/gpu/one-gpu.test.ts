/**
 * What one GPU runs: the unsharded walk on one worker against the in-process model (docs/model.md's
 * oracle), and `memra decode` (what `npm start` runs) choosing the GPU and the layout the machine
 * allows, saying why, with the tokens of the unsharded walk; `--devices` and `--loopback` as
 * asked, and refused by name where they cannot be. Fails (does not skip) without a GPU.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { promisify } from 'node:util';
import { Session } from '../../src/decode/session.js';
import { presetByName } from '../../src/decode/model-config.js';
import type { DecodeReport } from '../../src/cli/decode.js';
import { oracleRun, relL2, runSession, sameBits } from '../support/decode-run.js';
import { GPUS, gpuSuite } from '../support/gpu-machine.js';

gpuSuite();

const cli = new URL('../../src/cli/main.js', import.meta.url).pathname;
const run = promisify(execFile);

/** `memra decode ARGS --json`: its report, or its exit code and stderr when it fails. */
/** With --json a failed run's error is a JSON object on stdout: `stderr` then carries its message. */
async function decodeCli(args: string[]): Promise<{ report?: DecodeReport; code: number; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [cli, 'decode', '--json', ...args], { maxBuffer: 64 << 20 });
    return { report: JSON.parse(stdout) as DecodeReport, code: 0, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    let message = err.stderr;
    try {
      message = (JSON.parse(err.stdout) as { error: { message: string } }).error.message;
    } catch {
      // not a JSON error report: keep what went to stderr
    }
    return { code: err.code, stderr: message };
  }
}

/** Row 0's greedy tokens of `small` from token 0, on the unsharded walk of one worker. */
async function unshardedTokens(steps: number): Promise<number[]> {
  const s = await Session.open({ backend: 'cuda', model: 'small', maxBatch: 1, layout: 'unsharded' });
  try {
    return (await runSession(s, [0], steps)).next.map((x) => x[0]!);
  } finally {
    await s.close();
  }
}

describe('one GPU', function () {
  this.timeout(600_000);

  // Against the in-process model at t = 1; at t > 1 each row must be, bit for bit, what the same
  // row gives decoded alone (the slice rule: no output depends on t), so a batch is held to the
  // t = 1 bound exactly, and its rows to the oracle's only within a flip (below), since more rows
  // are more chances of one: t = 4 and 8 runs saw medians of 1.2e-4 and 3e-4 with every row
  // equal to its t = 1 run. From t = 3 the experts run in passes of four slots, and past 16
  // accumulators a thread the products keep part[] in dynamic shared memory (cu/gemv_tile.cuh).
  for (const t of [1, 3, 4, 8]) {
    // An fp8 code of the MoE input that lands within f32 rounding of a midpoint between two codes
    // rounds one way here and the other on the CPU (test/gpu/decode.test.ts): on small one such
    // flip put a step at 1.84e-3, every other step near 1e-7; and the flipped step's cache row
    // then differs for every later step (a t = 3 run's median 5.3e-5 after an early flip). One
    // t = 4 run read 4.89e-2 at step 21 of 24, every step before it within 1e-2: the size of another
    // expert picked where a router logit is within rounding of a tie (not confirmed: its start
    // tokens were not recorded; a failure now names them). So: every step within 1e-1 (a flip,
    // not a wrong kernel, whose error is O(1)), and at t = 1 the median within 1e-4 (a systematic
    // loss, bf16 activations say, lands near 1e-3 on every step).
    const title =
      t === 1
        ? "small, t=1, unsharded on one worker: every step's hidden state within relative L2 1e-1 of the in-process model under teacher forcing, the median within 1e-4 (a start that misses it drawn again, up to three)"
        : `small, t=${t}, unsharded on one worker: every row bit-identical to that row decoded alone, every step within relative L2 1e-1 of the in-process model under teacher forcing`;
    it(title, async () => {
      const steps = 24;
      const small = presetByName('small');
      const s = await Session.open({ backend: 'cuda', model: 'small', maxBatch: t, layout: 'unsharded' });
      try {
        assert.deepEqual(s.plan.devices, [0]);
        assert.equal(s.runtime.ranks.length, 1, 'the unsharded walk opens one worker');
        // At t = 1 a start whose median misses is drawn again, up to three starts: a flip in an
        // early step leaves every later step's cache row apart from the oracle's (start 2964
        // flipped at step 2 of 24 on an H100, then read 4e-5 to 9e-4 a step, a median of 3.4e-4,
        // the same with the build before), where a systematic loss misses on every start.
        // One start, decoded and held to the oracle step by step; the checks after it read its parts.
        const decodeFrom = async (start: number[]) => {
          const ref = oracleRun(small, start, steps);
          const force = [start, ...ref.next.slice(0, -1)];
          const got = await runSession(s, start, steps, force);
          const errs = got.hidden.map((h, i) => relL2(h, ref.hidden[i]!));
          for (const [i, e] of errs.entries())
            assert.ok(e <= 1e-1, `start ${start.join(',')}, step ${i}: relative L2 ${e.toExponential(2)} > 1e-1`);
          const median = [...errs].sort((x, y) => x - y)[errs.length >> 1]!;
          return { start, ref, force, got, errs, median };
        };
        const draw = () => Array.from({ length: t }, () => randomInt(0, small.vocab));
        const missed: string[] = [];
        let run = await decodeFrom(draw());
        while (t === 1 && run.median > 1e-4) {
          missed.push(`start ${run.start.join(',')}: ${run.median.toExponential(2)}`);
          assert.ok(missed.length < 3, `median relative L2 > 1e-4 for every start drawn (${missed.join('; ')})`);
          run = await decodeFrom(draw());
        }
        const { start, ref, force, got, errs, median } = run;
        const H = small.hidden;
        for (let r = 0; r < t && t > 1; r++) {
          const alone = await runSession(
            s,
            [start[r]!],
            steps,
            force.map((f) => [f[r]!]),
          );
          for (let i = 0; i < steps; i++) {
            assert.ok(
              sameBits(got.hidden[i]!.subarray(r * H, (r + 1) * H), alone.hidden[i]!),
              `row ${r} at step ${i} differs from the row decoded alone`,
            );
            assert.equal(got.next[i]![r], alone.next[i]![0], `row ${r} at step ${i}: another token alone`);
          }
        }
        const same = got.next.filter((n, i) => n.every((x, k) => x === ref.next[i]![k])).length;
        console.log(
          `      small t=${t} unsharded: worst relative L2 ${Math.max(...errs).toExponential(2)}, median ${median.toExponential(2)}; greedy tokens equal the oracle's at ${same} of ${steps} steps${t > 1 ? '; every row bit-identical alone' : ''}${missed.length > 0 ? `; drawn again after ${missed.join('; ')}` : ''}`,
        );
      } finally {
        await s.close();
      }
    });
  }

  it("memra decode (npm start) decodes small on the GPU, in the layout the machine allows, says why, and gives the unsharded walk's tokens", async () => {
    const { report, code, stderr } = await decodeCli(['--tokens', '12']);
    assert.equal(code, 0, stderr);
    const r = report!;
    assert.equal(r.backend, 'cuda');
    assert.equal(r.preset, 'small');
    if (GPUS === 1) {
      assert.equal(r.layout, 'unsharded');
      assert.deepEqual(r.devices, [0]);
      assert.match(r.why, /^1 CUDA device; unsharded \(sharding needs two devices, or loopback\), on device 0$/);
    } else {
      assert.equal(r.layout, 'sharded');
      assert.deepEqual(r.devices, [0, 1]);
      assert.match(r.why, new RegExp(`^${GPUS} CUDA devices; sharded, on devices 0 and 1$`));
    }
    assert.deepEqual(r.tokens[0], await unshardedTokens(12));
  });

  it('memra decode --devices 0 runs one worker unsharded; --loopback runs the sharded walk on one device with the same tokens', async () => {
    const want = await unshardedTokens(8);
    const one = await decodeCli(['--tokens', '8', '--devices', '0']);
    assert.equal(one.code, 0, one.stderr);
    assert.equal(one.report!.layout, 'unsharded');
    assert.deepEqual(one.report!.devices, [0]);
    assert.deepEqual(one.report!.tokens[0], want);
    const loop = await decodeCli(['--tokens', '8', '--loopback']);
    assert.equal(loop.code, 0, loop.stderr);
    assert.equal(loop.report!.layout, 'sharded');
    assert.equal(loop.report!.loopback, true);
    assert.deepEqual(loop.report!.devices, [0, 0]);
    assert.match(loop.report!.why, /sharded in loopback, as asked, on device 0, both ranks$/);
    assert.deepEqual(
      loop.report!.tokens[0],
      want,
      'the sharded walk in loopback is bit-identical to the unsharded one',
    );
  });

  it('memra decode refuses, by name, the sharded layout on one device and two ranks on one device without --loopback', async () => {
    const sharded = await decodeCli(['--tokens', '2', '--devices', '0', '--layout', 'sharded']);
    assert.equal(sharded.code, 1);
    assert.match(
      sharded.stderr,
      /layout 'sharded' needs two ranks, and devices \[0\] is one .*use layout 'unsharded', or devices \[0, 0\] with loopback: true \(CLI --loopback\)/,
    );
    const twice = await decodeCli(['--tokens', '2', '--devices', '0,0']);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /both ranks are on device 0\. Two ranks need two devices.*pass loopback: true/);
    const bad = await decodeCli(['--devices', '0,x']);
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /--devices must be one device ordinal or two separated by a comma \(0, or 0,1\), got '0,x'/,
    );
  });
});
