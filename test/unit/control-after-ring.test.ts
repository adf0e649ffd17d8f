/**
 * A control call that enqueues work on the stream itself (the weight generator) comes after every
 * ring record published before it: a poison memset of the same buffer, sent first, must never land
 * on the weights afterwards. The serve loop yields to the worker's event loop between batches of
 * records, so a call answered there could otherwise overtake records still in the ring.
 */
import { strict as assert } from 'node:assert';
import { Runtime } from '../../src/runtime/runtime.js';
import { presetByName } from '../../src/decode/model-config.js';
import { generateTensor, tensorSpecs } from '../../src/decode/weights.js';

describe('CPU reference: a control call follows the ring records sent before it', () => {
  it('generates weights after the poison memsets published before the call, not under them', async () => {
    const rt = await Runtime.open({ backend: 'cpu', devices: [0] });
    try {
      const r0 = rt.ranks[0]!;
      const cfg = presetByName('tiny');
      const spec = tensorSpecs(cfg).find((s) => s.name === 'W1')!;
      const bytes = spec.size * 2;
      const ptr = await r0.alloc(bytes);
      // Enough records to outlast the serve loop's batch (about 1 ms), so the call arrives while
      // some of them are still in the ring.
      for (let i = 0; i < 400; i++) r0.memset(ptr, 0xff, bytes);
      await r0.control.call(
        'genWeights',
        ptr,
        cfg.seed.toString(),
        spec.id,
        0,
        1,
        spec.size,
        0,
        spec.size,
        0,
        spec.scale,
      );
      await r0.drain();
      const got = new Uint16Array((await r0.download(ptr, bytes)).buffer.slice(0));
      const want = generateTensor(cfg.seed, spec, 0, spec.size);
      const wrong = got.findIndex((v, i) => v !== want[i]);
      assert.equal(wrong, -1, `element ${wrong}: ${got[wrong]?.toString(16)}, want ${want[wrong]?.toString(16)}`);
      await r0.free(ptr);
    } finally {
      await rt.close();
    }
  });
});
