/**
 * The runtime's devices on the CPU reference: one worker (one ordinal), two ranks on two devices,
 * two ranks on one device in loopback, and every refusal of a bad choice, each naming what was
 * asked and what is there, and each before a worker exists.
 */
import { strict as assert } from 'node:assert';
import { asDevicePtr } from '../../src/runtime/binding.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { ArLink } from '../../src/runtime/link.js';
import { CapturedGraph } from '../../src/runtime/graph.js';
import { ParentGraph } from '../../src/runtime/parent-graph.js';
import { JoinProfiler } from '../../src/decode/join-profile.js';
import { checkInRange } from '../../src/runtime/device-choice.js';
import { liveWorkers } from '../../src/workers/worker-handle.js';
import { Op } from '../../src/workers/ops.js';
import { refusesToOpen } from '../support/refuses-to-open.js';
import { checkOneWorker } from '../support/one-worker-check.js';
import { LOOPBACK_PEER } from '../support/pair-modes.js';

const openCpu = (extra = {}): Promise<Runtime> => Runtime.open({ backend: 'cpu', callTimeoutMs: 5000, ...extra });

describe('runtime devices: one worker, two, and loopback (CPU reference)', () => {
  let rt: Runtime | undefined;
  afterEach(async () => {
    await rt?.close().catch(() => undefined);
    rt = undefined;
  });

  for (const ordinal of [0, 1]) {
    it(`devices [${ordinal}] opens one pinned-worker rank, with its ring, completion counter and mailbox`, async () => {
      const before = liveWorkers();
      rt = await openCpu({ devices: [ordinal] });
      assert.equal(liveWorkers(), before + 1);
      assert.deepEqual(rt.devices, [ordinal]);
      assert.equal(rt.loopback, false);
      assert.equal(rt.ranks[0].ordinal, ordinal);
      await checkOneWorker(rt, [1, 7, 4099]);
      await rt.close();
      assert.equal(liveWorkers(), before, 'close ends the worker');
    });
  }

  it('defaults to two ranks on the CPU reference (it emulates two devices)', async () => {
    rt = await openCpu();
    assert.deepEqual(rt.devices, [0, 1]);
    assert.equal(rt.ranks.length, 2);
  });

  it('code that needs two ranks refuses a one-rank runtime by name, and a record that waits on a peer is refused', async () => {
    rt = await openCpu({ devices: [0] });
    const one =
      /needs two ranks, and this runtime has one \(devices \[0\]\): open it with two devices, or with devices \[d, d\] and loopback: true/;
    assert.throws(() => rt!.pair('the widget'), new RegExp(`the widget ${one.source}`));
    await assert.rejects(ArLink.open(rt), new RegExp(`the tp link ${one.source}`));
    await assert.rejects(
      CapturedGraph.capture(rt, () => undefined, 'multi-device'),
      /a multi-device graph needs two ranks/,
    );
    await assert.rejects(
      CapturedGraph.capture(rt, () => undefined, 'per-rank'),
      /a per-rank graph needs two ranks/,
    );
    await assert.rejects(
      ParentGraph.build(rt, {
        owner: () => undefined,
        peer: () => undefined,
        post: () => undefined,
        tx: [],
        rx: { dst: asDevicePtr(1), src: asDevicePtr(1), bytes: 4 },
      }),
      /the EP parent graph needs two ranks/,
    );
    await assert.rejects(JoinProfiler.create(rt, 2), /the join profile needs two ranks/);
    // Rank 0's own graph (the unsharded step graph's mode) is fine on one rank.
    const g = await CapturedGraph.capture(
      rt,
      () => {
        rt!.ranks[0].nop();
      },
      'rank0',
    );
    g.launch();
    await g.destroy();
    const fault = new Promise<Error & { code?: string }>((r) => rt!.onFault(r));
    rt.ranks[0].ring.push(Op.Nop, [], 1);
    const f = await fault;
    assert.equal(f.code, 'ERR_NO_PEER');
    assert.match(f.message, /waits for a peer's record 1, but this runtime has one rank/);
  });

  it("loopback puts both ranks on one device; the peer probe becomes a write-and-read-back of each rank's memory by the other", async () => {
    rt = await openCpu({ devices: [1, 1], loopback: true });
    assert.equal(rt.loopback, true);
    assert.deepEqual(
      rt.ranks.map((r) => r.ordinal),
      [1, 1],
    );
    assert.deepEqual(rt.peer, LOOPBACK_PEER);
    // Each rank has its own stream and its own memory; the two reach each other's.
    const [a, b] = rt.pair('the test');
    const n = 1000;
    const pa = await a.alloc(n * 4),
      pb = await b.alloc(n * 4);
    assert.notEqual(pa, pb);
    const ready = await b.createEvent(),
      pushed = await a.createEvent();
    const v = 1 + Math.floor(Math.random() * 1e6);
    a.fill(pa, n, v);
    b.fill(pb, n, -1);
    b.record(ready);
    a.wait(ready);
    a.copy(pb, pa, n * 4);
    a.record(pushed);
    b.wait(pushed);
    b.signal(0, 1);
    await rt.waitCompleted(1, 0, 1);
    assert.ok((await b.downloadF32(pb, n)).every((x) => x === v));
    assert.equal(rt.failure, undefined);
  });

  describe('bad device choices, refused before any worker starts', () => {
    it('two ranks on one device without loopback', async () => {
      await refusesToOpen(
        { backend: 'cpu', devices: [0, 0] },
        /RuntimeOptions\.devices: both ranks are on device 0\. Two ranks need two devices.*To run both ranks on device 0 in this process anyway .* pass loopback: true/,
      );
    });

    it('loopback with two different devices, or with one', async () => {
      await refusesToOpen(
        { backend: 'cpu', devices: [0, 1], loopback: true },
        /RuntimeOptions\.loopback puts both ranks on one device, but devices \[0, 1\] are two devices: pass \[0, 0\], or drop loopback to run on both/,
      );
      await refusesToOpen(
        { backend: 'cpu', devices: [1], loopback: true },
        /RuntimeOptions\.loopback puts two ranks on one device and needs devices \[d, d\]; got devices \[1\], one rank/,
      );
    });

    it('a device ordinal out of range, naming the count the backend sees', async () => {
      await refusesToOpen(
        { backend: 'cpu', devices: [2] },
        /device ordinal 2 is out of range: 2 CPU reference devices visible \(ordinals 0\.\.1\)/,
      );
      await refusesToOpen(
        { backend: 'cpu', devices: [3, 3], loopback: true },
        /device ordinal 3 is out of range: 2 CPU reference devices visible/,
      );
      // The CUDA wording, at the counts a machine may have.
      assert.throws(
        () => checkInRange([1], 1, 'cuda'),
        /^RangeError: device ordinal 1 is out of range: 1 CUDA device visible \(ordinal 0\)$/,
      );
      assert.throws(
        () => checkInRange([0, 2], 2, 'cuda'),
        /device ordinal 2 is out of range: 2 CUDA devices visible \(ordinals 0\.\.1\)/,
      );
      assert.throws(
        () => checkInRange([0], 0, 'cuda'),
        /device ordinal 0 is out of range: 0 CUDA devices visible \(no CUDA device or driver\); use backend: 'cpu'/,
      );
      assert.doesNotThrow(() => checkInRange([0, 0], 1, 'cuda'));
    });

    it('a devices list that is not one or two ordinals, and a loopback that is not a boolean', async () => {
      await refusesToOpen(
        { backend: 'cpu', devices: [] },
        /RuntimeOptions\.devices must be one device ordinal \(one worker\) or two \(one per rank\), got \[\]/,
      );
      await refusesToOpen(
        { backend: 'cpu', devices: [0, 1, 0] },
        /must be one device ordinal \(one worker\) or two \(one per rank\), got \[0,1,0\]/,
      );
      await refusesToOpen(
        { backend: 'cpu', devices: [0, 0.5] },
        /RuntimeOptions\.devices\[1\] must be a device ordinal \(an integer\), got 0\.5/,
      );
      await refusesToOpen(
        { backend: 'cpu', devices: [0, 0], loopback: 'yes' as unknown as boolean },
        /RuntimeOptions\.loopback must be true or false, got "yes"/,
      );
    });
  });
});
