/**
 * Seed 003's parent graph on two GPUs: children captured per device, explicit copy nodes, the
 * return added under the peer's device; the addon's refusals (copy ends on the wrong devices, a
 * peer child from the wrong device, destroying a child a parent still holds). Fails (does not
 * skip) without two GPUs. The decode-level checks (bit-identical tokens, the dispatch counter,
 * the latched refusal at t = 4) are in decode.test.ts.
 */
import { strict as assert } from 'node:assert';
import { loadBinding } from '../../src/runtime/binding.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { ParentGraph } from '../../src/runtime/parent-graph.js';
import { createFences, destroyFences, launchFenced, nextGraphSlot, untilCaptured } from '../../src/runtime/graph.js';
import { checkReplays, parentGraphRig } from '../support/parent-graph-battery.js';

before(() => {
  const n = loadBinding().deviceCount();
  if (n < 2) throw new Error(`the GPU suite needs two CUDA devices and this machine shows ${n}`);
});

describe('EP parent graph on two GPUs', function () {
  this.timeout(120_000);
  let rt: Runtime | undefined;
  afterEach(async () => {
    await rt?.close().catch(() => undefined);
    rt = undefined;
  });

  for (const n of [1, 257, 65_537]) {
    it(`replays the seed shape with ${n}-float copies: every launch computes owner + peer halves from fresh inputs`, async () => {
      rt = await Runtime.open({ backend: 'cuda' });
      const rig = await parentGraphRig(rt, n);
      const g = await ParentGraph.build(rt, rig.parts());
      await checkReplays(rt, rig, g, n, 5);
      await g.destroy();
      await rig.free();
    });
  }

  it('refuses copies whose ends are on the wrong devices, a peer child from the wrong device, and destroying a held child', async () => {
    rt = await Runtime.open({ backend: 'cuda' });
    const rig = await parentGraphRig(rt, 257);
    const p = rig.parts();
    const [a, b] = rt.ranks;
    const s = { owner: nextGraphSlot(), post: nextGraphSlot(), peer: nextGraphSlot(), exec: nextGraphSlot() };
    a.beginCapture();
    p.owner();
    a.endCaptureChild(s.owner);
    a.beginCapture();
    p.post();
    const endA = a.endCaptureChild(s.post);
    b.beginCapture();
    p.peer();
    const endB = b.endCaptureChild(s.peer);
    await untilCaptured(rt, [endA, endB]);
    const peerChild: number = await b.control.call('childGraphHandle', s.peer);
    const ownerChild: number = await a.control.call('childGraphHandle', s.owner);
    const copies = [...p.tx, p.rx];
    const spec = { slot: s.exec, owner: s.owner, post: s.post, peerChild, peerDevice: b.ordinal, copies };

    const reversed = copies.map((c, i) => (i === 0 ? { dst: c.src, src: c.dst, bytes: c.bytes } : c));
    await assert.rejects(
      a.control.call('buildParentGraph', { ...spec, copies: reversed }),
      new RegExp(
        `copies\\[0\\] must move device ${a.ordinal}'s memory to device ${b.ordinal}'s, but src 0x[0-9a-f]+ is on device ${b.ordinal}`,
      ),
    );
    const rxBackwards = copies.map((c, i) => (i === 4 ? { dst: c.src, src: c.dst, bytes: c.bytes } : c));
    await assert.rejects(
      a.control.call('buildParentGraph', { ...spec, copies: rxBackwards }),
      /copies\[4\] must move device 1's memory to device 0's/,
    );
    await assert.rejects(
      a.control.call('buildParentGraph', { ...spec, peerChild: ownerChild }),
      new RegExp(`was captured on device ${a.ordinal}, not the peer device ${b.ordinal}`),
    );
    await assert.rejects(
      a.control.call('buildParentGraph', { ...spec, peerDevice: a.ordinal }),
      /is this thread's own device/,
    );
    await assert.rejects(
      a.control.call('buildParentGraph', { ...spec, copies: copies.slice(0, 4) }),
      /argument 'copies' must be an array of 5/,
    );
    await assert.rejects(
      a.control.call('buildParentGraph', { ...spec, copies: copies.map((c, i) => (i === 2 ? { ...c, bytes: 0 } : c)) }),
      /argument 'copies\[2\]\.bytes' must be a positive safe integer, got 0/,
    );

    // Nothing was left half-built: the same children build a good parent now.
    await a.control.call('buildParentGraph', spec);
    await assert.rejects(
      b.control.call('destroyChildGraph', s.peer),
      /1 parent graph\(s\) still hold it: destroy the parent first/,
    );
    await assert.rejects(a.control.call('destroyChildGraph', s.owner), /still hold it/);
    const fences = await createFences(rt);
    launchFenced(rt, s.exec, fences);
    await rt.drain();
    assert.equal(rt.failure, undefined, String(rt.failure));
    await a.control.call('destroyGraph', s.exec);
    await destroyFences(rt, fences);
    for (const [r, slot] of [
      [a, s.owner],
      [a, s.post],
      [b, s.peer],
    ] as const)
      await r.control.call('destroyChildGraph', slot);
    await rig.free();
  });
});
