/** The README's session example and docs/architecture.md's runtime example, verbatim in substance, on the CPU reference. */
import { strict as assert } from 'node:assert';
import { DEFAULT_CONFIG, Runtime, Session } from '../../src/index.js';

describe('README example', () => {
  it('runs and prints 1.5', async () => {
    const rt = await Runtime.open({ backend: 'cpu' });
    try {
      const [r0, r1] = rt.pair('the example');
      const x = await r0.alloc(4096 * 4),
        y = await r1.alloc(4096 * 4);
      const ready = await r1.createEvent(),
        pushed = await r0.createEvent();
      r0.fill(x, 4096, 1.5);
      r1.record(ready);
      r0.wait(ready);
      r0.copy(y, x, 4096 * 4);
      r0.record(pushed);
      r1.wait(pushed);
      r1.signal(0, 1);
      await rt.waitCompleted(1, 0, 1);
      assert.equal((await r1.downloadF32(y, 4))[0], 1.5);
    } finally {
      await rt.close();
    }
  });
});

describe('README session example', () => {
  it('runs on the CPU reference (tiny in place of bench, so a two-layer config)', async function () {
    this.timeout(60_000);
    const config = {
      ...DEFAULT_CONFIG,
      transport: { default: 'll' as const, layers: [{ from: 1, to: 1, transport: 'oneshot' as const }] },
    };
    const session = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2, config });
    try {
      let tokens = [17, 42];
      for (let i = 0; i < 8; i++) {
        tokens = await session.step(tokens);
        assert.equal(tokens.length, 2);
        assert.ok(tokens.every((x) => Number.isInteger(x) && x >= 0 && x < session.model.vocab));
      }
      await session.setConfig({ wo: 'allreduce' });
      assert.equal(session.decodeConfig.wo, 'allreduce');
      assert.deepEqual(session.decodeConfig.transport, config.transport, 'the rest of the config in force is kept');
      session.reset();
      assert.equal(session.position(0), 0);
    } finally {
      await session.close();
    }
  });
});
