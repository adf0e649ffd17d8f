/**
 * The soak's loops on the CPU reference, at `npm test`'s counts (2,000 steps, 50 cycles, each
 * fault 3 times, 1,000 invalid inputs): every code path the GPU run takes, with every check that
 * means the same here. RSS and step-time drift are the GPU run's to judge: on a shared two-core
 * machine they measure the neighbours.
 */
import { strict as assert } from 'node:assert';
import { Deadline } from '../../bench/soak/budget.js';
import { longDecode } from '../../bench/soak/long-decode.js';
import { buildReference } from '../../bench/soak/reference.js';
import { CPU_PLAN, runSoak, type SoakRun } from '../../bench/soak/run-soak.js';
import { soakMain } from '../../bench/soak/main.js';
import { assertHeld, quietProgress as quiet } from '../support/soak-held.js';

const LOOPS: Array<[string, string]> = [
  ['oracle window', 'unsharded'],
  ...['unsharded', 'unsharded+graph', 'll', 'll+graph', 'push', 'push+graph'].map(
    (v) => ['long decode', v] as [string, string],
  ),
  ['cycles', 'unsharded'],
  ['cycles', 'll'],
  ['fault: worker death', 'unsharded'],
  ['fault: worker death', 'push'],
  ['fault: one-sided barrier', 'll'],
  ['fault: one-sided barrier', 'oneshot'],
  ['fault: close in flight', 'unsharded'],
  ['fault: close in flight', 'll'],
  ['invalid input', 'll'],
];

describe('soak on the CPU reference', function () {
  this.timeout(300_000);
  let run: SoakRun;
  before(async () => {
    run = await runSoak('cpu', CPU_PLAN, { oneGpu: 'cpu', loopback: 'cpu-loopback' }, quiet());
  });

  it('runs every loop, in order, at the counts asked', () => {
    assert.deepEqual(
      run.loops.map((l) => [l.loop, l.variant]),
      LOOPS,
    );
    const steps = run.loops.filter((l) => l.loop === 'long decode').reduce((a, l) => a + l.ran, 0);
    const cycles = run.loops.filter((l) => l.loop === 'cycles').reduce((a, l) => a + l.ran, 0);
    assert.deepEqual([steps, cycles], [2000, 50]);
    for (const l of run.loops.filter((x) => x.unit === 'faults')) assert.equal(l.ran, 3, `${l.loop}, ${l.variant}`);
    assert.equal(run.loops.find((l) => l.unit === 'inputs')?.ran, 1000);
    for (const l of run.loops) {
      assert.equal(l.machine, l.loopback ? 'cpu-loopback' : 'cpu', `${l.loop}, ${l.variant}: its machine label`);
      assert.equal(l.loopback, ['ll', 'll+graph', 'push', 'push+graph', 'oneshot'].includes(l.variant));
    }
    // The long decodes' first and last 10% of step times, each row labelled loopback where it was.
    assert.equal(run.rows.length, 12);
    assert.deepEqual(
      run.rows.filter((r) => r.op === 'step, first 10%').map((r) => [r.transport, r.n]),
      [
        ['unsharded', 60],
        ['unsharded+graph', 60],
        ['loopback ll', 20],
        ['loopback ll+graph', 20],
        ['loopback push', 20],
        ['loopback push+graph', 20],
      ],
    );
  });

  for (const [loop, variant] of LOOPS) {
    it(`${loop}, ${variant}: every check holds`, () => {
      assertHeld(run.loops.find((x) => x.loop === loop && x.variant === variant));
    });
  }

  it('a loop cut short by its time limit records the count it ran, not the count asked', async () => {
    const { ref } = await buildReference('cpu', 'tiny', 7);
    const { result } = await longDecode(
      {
        backend: 'cpu',
        preset: 'tiny',
        variant: { loopback: false },
        steps: 1_000_000,
        checkEvery: 50,
        machine: 'cpu',
      },
      ref,
      new Deadline(1),
      quiet(),
    );
    assert.ok(result.ran > 0 && result.ran < result.asked, `${result.ran} of ${result.asked}`);
    assert.match(result.cut!, /its share of the time limit \(1 s\) ran out/);
    assert.equal(result.checks.find((c) => c.name === 'tokens')?.value, `0 of ${result.ran} steps wrong`);
  });

  it('npm run soak refuses a bad flag by name, before it opens anything', async () => {
    const errors: string[] = [];
    const log = console.error;
    console.error = (m: string) => errors.push(m);
    try {
      assert.equal(await soakMain(['--backend', 'cpu', '--steps', '1.5']), 2);
      assert.equal(await soakMain(['--backend', 'cpu', '--only', 'decode,naps']), 2);
      assert.equal(await soakMain(['--backend', 'cpu', '--model', 'huge']), 2);
      assert.equal(await soakMain(['--backend', 'tpu']), 2);
    } finally {
      console.error = log;
    }
    assert.deepEqual(errors, [
      "soak: --steps must be an integer >= 0, got '1.5'",
      "soak: --only takes decode, cycles, faults, got 'naps'",
      "soak: unknown model preset 'huge': the presets are tiny, small, bench",
      "soak: --backend must be cuda or cpu, got 'tpu'",
    ]);
  });
});
