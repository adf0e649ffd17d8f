/**
 * Seed 003's parent graph on the CPU reference: a launch issues the parts with one event per edge
 * of the graph, so what the graph leaves unordered is unordered here too and the reference refuses
 * a part that needed an edge the graph lacks. On two emulated devices and in loopback (both ranks
 * on one, where the addon's graph takes its own device as the peer's).
 */
import { strict as assert } from 'node:assert';
import { Runtime } from '../../src/runtime/runtime.js';
import { ParentGraph } from '../../src/runtime/parent-graph.js';
import { checkReplays, parentGraphRig } from '../support/parent-graph-battery.js';
import { PAIR_MODES } from '../support/pair-modes.js';

const N = 257; // odd: no size here is a power of two

for (const mode of PAIR_MODES)
  describe(`EP parent graph (CPU reference, ${mode.name})`, function () {
    this.timeout(60_000);
    let rt: Runtime | undefined;
    afterEach(async () => {
      await rt?.close().catch(() => undefined);
      rt = undefined;
    });

    it('replays the seed shape: every launch computes owner + peer halves from fresh inputs', async () => {
      rt = await Runtime.open({ backend: 'cpu', ...mode.options });
      const rig = await parentGraphRig(rt, N);
      const g = await ParentGraph.build(rt, rig.parts());
      await checkReplays(rt, rig, g, N, 5);
      await g.destroy();
      assert.throws(() => g.launch(), /after destroy/);
      await rig.free();
    });

    it('refuses a peer half that writes what the owner half writes: the graph has no edge between them', async () => {
      rt = await Runtime.open({ backend: 'cpu', handshakeTimeoutMs: 1000, ...mode.options });
      const rig = await parentGraphRig(rt, N);
      const b = rt.pair('the test')[1];
      const fault = new Promise<Error & { code?: string }>((r) => rt!.onFault(r));
      const g = await ParentGraph.build(
        rt,
        rig.parts({
          peer: () => {
            b.copy(rig.a0[4]!, rig.a0[0]!, N * 4);
          },
        }),
      );
      g.launch();
      const f = await fault;
      assert.equal(f.code, 'ERR_ORDER_WAW', f.message);
    });

    it('refuses bad parts by name before anything is enqueued', async () => {
      rt = await Runtime.open({ backend: 'cpu', ...mode.options });
      const p = (await parentGraphRig(rt, N)).parts();
      await assert.rejects(
        ParentGraph.build(rt, { ...p, tx: p.tx.slice(0, 3) }),
        /4 tx copies \(xq, xs, ids, weights\), got 3/,
      );
      await assert.rejects(
        ParentGraph.build(rt, { ...p, rx: { ...p.rx, bytes: 0 } }),
        /copy 4 needs a positive byte count, got 0/,
      );
    });
  });
