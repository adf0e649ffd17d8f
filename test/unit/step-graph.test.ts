/**
 * The step graph (config `stepGraph`) on the CPU reference, where a "graph" replays the captured
 * body: one capture per batch size, a launch per step after it, the tokens and hidden states of
 * the in-process model bit for bit; profiled steps replay graphs of their own; a new config recaptures.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { Session } from '../../src/decode/session.js';
import { CpuModel } from '../../src/decode/cpu-model.js';
import { presetByName } from '../../src/decode/model-config.js';
import { DEFAULT_CONFIG, parseDecodeConfig, type DecodeConfig } from '../../src/decode/decode-config.js';
import { sameBits } from '../support/decode-run.js';

const graphed = (transport: DecodeConfig['transport']['default'], extra: Partial<DecodeConfig> = {}): DecodeConfig => ({
  ...DEFAULT_CONFIG,
  transport: { default: transport, layers: [] },
  stepGraph: true,
  ...extra,
});

describe('step graph', function () {
  this.timeout(120_000);

  for (const [layout, transport] of [
    ['sharded', 'll'],
    ['sharded', 'push'],
    ['unsharded', 'll'],
  ] as const) {
    it(`${layout}${layout === 'sharded' ? ` (${transport})` : ''}: one capture per batch size, a launch per step, equal to the model bit for bit`, async () => {
      const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 3, layout, config: graphed(transport) });
      try {
        const ref = new CpuModel(presetByName('tiny'), { maxBatch: 3 });
        let cur = [randomInt(0, 256), randomInt(0, 256), randomInt(0, 256)];
        for (let i = 0; i < 4; i++) {
          const r = await s.stepDetailed(cur, { hidden: true });
          const want = ref.step(cur, [i, i, i]);
          assert.deepEqual(r.next, want.next, `t=3 step ${i}`);
          assert.ok(sameBits(r.hidden!, want.hidden), `t=3 step ${i}: hidden state`);
          cur = r.next;
        }
        // A second batch size gets its own graph; t = 3 keeps its own.
        s.reset();
        const ref1 = new CpuModel(presetByName('tiny'), { maxBatch: 1 });
        let one = [cur[0]!];
        for (let i = 0; i < 3; i++) {
          const want = ref1.step(one, [i]).next;
          assert.deepEqual(await s.step(one), want, `t=1 step ${i}`);
          one = want;
        }
        assert.deepEqual(s.stepGraph(), { launches: 7, captures: 2, refused: [] });
      } finally {
        await s.close();
      }
    });
  }

  it('profiled steps replay a graph of their own: one for self-timed joins, one per event set for event-timed ones; a new config recaptures', async () => {
    const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 1, config: graphed('ll') });
    try {
      await s.step([5]);
      await s.step([6]);
      assert.deepEqual(s.stepGraph(), { launches: 2, captures: 1, refused: [] });
      const profiledSteps = async (from: number): Promise<void> => {
        for (const [i, tok] of [from, from + 1, from + 2].entries()) {
          const r = await s.stepDetailed([tok]);
          assert.equal((await r.joins!).length, s.model.layers * 5, `profiled step ${i} timed its joins`);
        }
      };
      // ll joins time themselves: nothing in the graph changes with the event set.
      await s.setConfig(graphed('ll', { profile: true }));
      await profiledSteps(7);
      assert.deepEqual(s.stepGraph(), { launches: 5, captures: 2, refused: [] });
      // push joins are bracketed by events, graph nodes of one set: a graph per set.
      await s.setConfig(graphed('push', { profile: true }));
      await profiledSteps(10);
      assert.deepEqual(s.stepGraph(), { launches: 8, captures: 4, refused: [] });
      await s.setConfig(graphed('oneshot'));
      await s.step([13]);
      assert.deepEqual(s.stepGraph(), { launches: 9, captures: 5, refused: [] });
    } finally {
      await s.close();
    }
  });

  it('is refused alongside the EP graph gate, by name', () => {
    assert.throws(
      () => parseDecodeConfig({ stepGraph: true, epGraph: true }, { source: 'cfg.json' }),
      /cfg\.json: \$\.stepGraph: cannot be on with \$\.epGraph/,
    );
  });
});
