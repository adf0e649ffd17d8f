/**
 * Seed 003's parent graph on two ranks (two GPUs, or in loopback on one, where the owner -> peer
 * copies are copies within one device: gpu-machine.ts): children captured per rank, explicit copy
 * nodes, the return added under the peer's device; the addon's refusals (copy ends on the wrong
 * devices, a peer child from the wrong device, destroying a child a parent still holds, and a
 * peer device that is the thread's own outside loopback). Fails (does not skip) without a GPU.
 * The decode-level checks (bit-identical tokens, the dispatch counter, the latched refusal at
 * t = 4) are in decode.test.ts.
 */
import { strict as assert } from 'node:assert';
import { Runtime } from '../../src/runtime/runtime.js';
import { ParentGraph } from '../../src/runtime/parent-graph.js';
import { createFences, destroyFences, launchFenced, nextGraphSlot, untilCaptured } from '../../src/runtime/graph.js';
import { checkReplays, parentGraphRig } from '../support/parent-graph-battery.js';
import { LOOPBACK, PAIR, PAIR_NAME, gpuSuite } from '../support/gpu-machine.js';

gpuSuite();

describe(`EP parent graph on ${PAIR_NAME}`, function () {
  this.timeout(120_000);
  let rt: Runtime | undefined;
  afterEach(async () => {
    await rt?.close().catch(() => undefined);
    rt = undefined;
  });

  for (const n of [1, 257, 65_537]) {
    it(`replays the seed shape with ${n}-float copies: every launch computes owner + peer halves from fresh inputs`, async () => {
      rt = await Runtime.open({ backend: 'cuda', ...PAIR });
      const rig = await parentGraphRig(rt, n);
      const g = await ParentGraph.build(rt, rig.parts());
      await checkReplays(rt, rig, g, n, 5);
      await g.destroy();
      await rig.free();
    });
  }

  it('refuses copies whose ends are on the wrong devices, a peer child from the wrong device, and destroying a held child', async () => {
    rt = await Runtime.open({ backend: 'cuda', ...PAIR });
    const rig = await parentGraphRig(rt, 257);
    const p = rig.parts();
    const [a, b] = rt.pair('the test');
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
    const peerChild = await b.control.call('childGraphHandle', s.peer);
    const ownerChild = await a.control.call('childGraphHandle', s.owner);
    const copies = [...p.tx, p.rx];
    const spec = { slot: s.exec, owner: s.owner, post: s.post, peerChild, peerDevice: b.ordinal, copies };

    // On one device (loopback) the ends of a copy, and the device a child was captured on, are the
    // same for both ranks: those refusals are two devices' alone.
    if (!LOOPBACK) {
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
    }
    const foreign = copies.map((c, i) => (i === 1 ? { ...c, src: 4096 } : c));
    await assert.rejects(
      a.control.call('buildParentGraph', { ...spec, copies: foreign }),
      /copies\[1\] must move device \d+'s memory to device \d+'s, but src 0x1000 is not device memory/,
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

  it("takes a peer child of the thread's own device only from threads bound in loopback", async () => {
    // One worker, bound without loopback: its own child as the "peer" child is refused by name.
    rt = await Runtime.open({ backend: 'cuda', devices: [0] });
    const a = rt.ranks[0];
    const n = 257;
    const bufs = await Promise.all(Array.from({ length: 6 }, () => a.alloc(n * 4)));
    const s = { owner: nextGraphSlot(), post: nextGraphSlot(), peer: nextGraphSlot(), exec: nextGraphSlot() };
    for (const slot of [s.owner, s.post, s.peer]) {
      a.beginCapture();
      a.fill(bufs[0]!, n, slot);
      a.endCaptureChild(slot);
    }
    await untilCaptured(rt, [a.nop()]);
    const peerChild = await a.control.call('childGraphHandle', s.peer);
    const copies = [0, 1, 2, 3, 4].map((i) => ({ src: bufs[i]!, dst: bufs[i + 1]!, bytes: n * 4 }));
    await assert.rejects(
      a.control.call('buildParentGraph', {
        slot: s.exec,
        owner: s.owner,
        post: s.post,
        peerChild,
        peerDevice: 0,
        copies,
      }),
      /parentGraphBuild: peerDevice 0 is this thread's own device \(two ranks share a device only when both bound it in loopback\)/,
    );
    for (const slot of [s.owner, s.post, s.peer]) await a.control.call('destroyChildGraph', slot);
    for (const p of bufs) await a.free(p);
  });
});
