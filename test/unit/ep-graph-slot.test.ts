/**
 * The EP graph slot (seed 003): its guards, its latching, the gate and the dispatch counter, on
 * the CPU reference (where a "graph" replays the eager body, so the results must not change).
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { epCaptureGuard, EpGraphSlots, type EpCaptureContext } from '../../src/decode/ep-graph-slot.js';
import { Session } from '../../src/decode/session.js';
import { CpuModel } from '../../src/decode/cpu-model.js';
import { presetByName } from '../../src/decode/model-config.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../../src/decode/decode-config.js';
import { runSession, sameBits } from '../support/decode-run.js';

const split = [
  { e0: 0, nE: 2 },
  { e0: 2, nE: 2 },
];
const ctx = (over: Partial<EpCaptureContext> = {}): EpCaptureContext => ({
  t: 1,
  ownership: split,
  builtFor: split,
  validation: false,
  missing: [],
  ...over,
});
const withGraph = (on: boolean, transport: DecodeConfig['transport']['default'] = 'll'): DecodeConfig => ({
  ...DEFAULT_CONFIG,
  transport: { default: transport, layers: [] },
  epGraph: on,
});

describe('EP graph slot', function () {
  this.timeout(120_000);

  it('each guard refuses with its reason; a clean context passes', () => {
    assert.equal(epCaptureGuard(ctx()), undefined);
    assert.match(epCaptureGuard(ctx({ t: 4 }))!, /supports only t = 1 decode; this step has t = 4/);
    assert.match(
      epCaptureGuard(
        ctx({
          builtFor: [
            { e0: 0, nE: 3 },
            { e0: 3, nE: 1 },
          ],
        }),
      )!,
      /EP ownership mismatch: experts are split rank 0: \[0, 2\), rank 1: \[2, 4\) but the workspaces were built for rank 0: \[0, 3\), rank 1: \[3, 4\)/,
    );
    assert.match(epCaptureGuard(ctx({ validation: true }))!, /requires validation off/);
    assert.match(epCaptureGuard(ctx({ missing: ['the peer workspace'] }))!, /capture is missing the peer workspace/);
  });

  it('a refusal latches: no capture is attempted again, the eager twin runs', async () => {
    const slots = new EpGraphSlots(2);
    let captures = 0,
      eager = 0;
    const capture = async (): Promise<{ launch(): void; destroy(): Promise<void> }> => {
      captures++;
      return { launch: () => undefined, destroy: async () => undefined };
    };
    for (let i = 0; i < 5; i++)
      assert.equal(
        await slots.run(
          0,
          () => ctx({ t: i === 0 ? 2 : 1 }),
          capture,
          () => {
            eager++;
          },
        ),
        'eager',
      );
    assert.equal(captures, 0);
    assert.equal(eager, 5);
    assert.deepEqual(slots.slot(0), {
      state: 'refused',
      reason: 'the EP graph supports only t = 1 decode; this step has t = 2',
    });
    // A failed capture latches the same way.
    const failing = async (): Promise<never> => {
      captures++;
      throw new Error('out of graph memory');
    };
    for (let i = 0; i < 3; i++)
      await slots.run(
        1,
        () => ctx(),
        failing,
        () => {
          eager++;
        },
      );
    assert.equal(captures, 1);
    assert.deepEqual(slots.slot(1), { state: 'refused', reason: 'capture failed: out of graph memory' });
    await slots.reset();
    assert.deepEqual(slots.slot(0), { state: 'empty' });
  });

  it('gate on, t = 1: every layer runs its graph, the counter is layers x tokens, and the tokens equal the model', async () => {
    const steps = 10;
    const start = [randomInt(0, 256)];
    const ref = new CpuModel(presetByName('tiny'), { maxBatch: 1 });
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 1, config: withGraph(true) });
    try {
      const got = await runSession(s, start, steps);
      let cur = start;
      for (let i = 0; i < steps; i++) {
        const r = ref.step(cur, [i]);
        assert.deepEqual(got.next[i], r.next, `step ${i}`);
        assert.ok(sameBits(got.hidden[i]!, r.hidden), `step ${i}: hidden state`);
        cur = r.next;
      }
      assert.deepEqual(s.epGraph(), { dispatches: 2 * steps, captures: 2, refused: [] });
      // A new transport empties the slots: one more capture a layer, then graphs again.
      await s.setConfig(withGraph(true, 'push'));
      await runSession(s, start, 3);
      assert.deepEqual(s.epGraph(), { dispatches: 2 * steps + 2 * 3, captures: 4, refused: [] });
    } finally {
      await s.close();
    }
  });

  it('a batched step latches every layer on the eager twin; later t = 1 steps stay eager and correct', async () => {
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 4, config: withGraph(true) });
    try {
      const start = [randomInt(0, 256), randomInt(0, 256), randomInt(0, 256), randomInt(0, 256)];
      await s.step(start);
      const after = s.epGraph();
      assert.equal(after.captures, 0);
      assert.deepEqual(
        after.refused.map((r) => r.layer),
        [0, 1],
      );
      assert.match(after.refused[0]!.reason, /this step has t = 4/);
      s.reset();
      const ref = new CpuModel(presetByName('tiny'), { maxBatch: 1 });
      let cur = [start[0]!];
      for (let i = 0; i < 4; i++) {
        const want = ref.step(cur, [i]).next;
        assert.deepEqual(await s.step(cur), want, `step ${i}`);
        cur = want;
      }
      assert.deepEqual(s.epGraph().dispatches, 0);
      assert.equal(s.epGraph().captures, 0, 'no capture attempted after the refusal');
    } finally {
      await s.close();
    }
  });

  it("route validation on: every step's routes are checked, and the graph refuses (it hides what validation reads)", async () => {
    const s = await Session.open({
      backend: 'cpu',
      model: 'tiny',
      maxBatch: 1,
      config: { ...withGraph(true), validate: true },
    });
    try {
      const start = [randomInt(0, 256)];
      const ref = new CpuModel(presetByName('tiny'), { maxBatch: 1 });
      let cur = start;
      for (let i = 0; i < 3; i++) {
        const want = ref.step(cur, [i]).next;
        assert.deepEqual(await s.step(cur), want, `step ${i}`);
        cur = want;
      }
      const st = s.epGraph();
      assert.equal(st.captures, 0);
      assert.equal(st.dispatches, 0);
      assert.deepEqual(
        st.refused.map((r) => r.layer),
        [0, 1],
      );
      assert.match(st.refused[0]!.reason, /requires validation off/);
    } finally {
      await s.close();
    }
  });

  it('gate off: no slot is touched', async () => {
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 1, config: withGraph(false) });
    try {
      await runSession(s, [randomInt(0, 256)], 3);
      assert.deepEqual(s.epGraph(), { dispatches: 0, captures: 0, refused: [] });
    } finally {
      await s.close();
    }
  });
});
