/**
 * What a decode run gets where it does not say (src/decode/run-plan.ts), at the device counts a
 * machine may have, and the refusals of what cannot run, each naming what was asked and what is
 * there. Nothing here opens a device.
 */
import { strict as assert } from 'node:assert';
import { planRun } from '../../src/decode/run-plan.js';
import { Session } from '../../src/decode/session.js';
import { liveWorkers } from '../../src/workers/worker-handle.js';

describe('run plan: backend, layout and devices', () => {
  it('one GPU: unsharded on device 0, one worker, and it says why', () => {
    assert.deepEqual(planRun({ backend: 'cuda' }, 1), {
      backend: 'cuda',
      layout: 'unsharded',
      devices: [0],
      loopback: false,
      why: 'backend cuda as asked; unsharded (sharding needs two devices, or loopback), on device 0',
    });
  });

  it('two or more GPUs: sharded over devices 0 and 1; the unsharded layout asked for takes one worker', () => {
    for (const n of [2, 8])
      assert.deepEqual(planRun({ backend: 'cuda' }, n), {
        backend: 'cuda',
        layout: 'sharded',
        devices: [0, 1],
        loopback: false,
        why: 'backend cuda as asked; sharded, on devices 0 and 1',
      });
    assert.deepEqual(planRun({ backend: 'cuda', layout: 'unsharded' }, 2).devices, [0]);
  });

  it('loopback: sharded, both ranks on device 0, on one GPU or more', () => {
    for (const n of [1, 2]) {
      const p = planRun({ backend: 'cuda', loopback: true }, n);
      assert.deepEqual([p.layout, p.devices, p.loopback], ['sharded', [0, 0], true]);
      assert.match(p.why, /sharded in loopback, as asked, on device 0, both ranks$/);
    }
  });

  it('devices given decide the layout: one ordinal unsharded, two sharded', () => {
    assert.deepEqual(planRun({ backend: 'cuda', devices: [1] }, 2).layout, 'unsharded');
    assert.deepEqual(planRun({ backend: 'cuda', devices: [1, 0] }, 2), {
      backend: 'cuda',
      layout: 'sharded',
      devices: [1, 0],
      loopback: false,
      why: 'backend cuda as asked; sharded (two ranks asked for), on devices 1 and 0',
    });
  });

  it('the CPU reference: sharded over its two emulated devices', () => {
    const p = planRun({ backend: 'cpu' });
    assert.deepEqual([p.layout, p.devices], ['sharded', [0, 1]]);
  });

  it('refuses the sharded layout on one device without loopback, naming the count and the ways out', () => {
    assert.throws(
      () => planRun({ backend: 'cuda', layout: 'sharded' }, 1),
      /^RangeError: layout 'sharded' needs two ranks, and devices \[0\] is one \(1 CUDA device visible\): use layout 'unsharded', or devices \[0, 0\] with loopback: true \(CLI --loopback\) to put both ranks on one device$/,
    );
    assert.throws(
      () => planRun({ backend: 'cuda', layout: 'sharded', devices: [1] }, 2),
      /devices \[1\] is one \(2 CUDA devices visible\)/,
    );
    assert.throws(
      () => planRun({ backend: 'cuda', layout: 'sharded' }, 0),
      /devices \[0\] is one \(0 CUDA devices visible\)/,
    );
  });

  it('refuses bad asks by name: backend, layout, devices, loopback', () => {
    assert.throws(() => planRun({ backend: 'tpu' as never }), /backend must be 'auto', 'cuda' or 'cpu', got 'tpu'/);
    assert.throws(
      () => planRun({ backend: 'cpu', layout: 'diagonal' as never }),
      /layout must be 'sharded' or 'unsharded', got 'diagonal'/,
    );
    assert.throws(
      () => planRun({ backend: 'cpu', devices: [0, 0] }),
      /both ranks are on device 0.*pass loopback: true/,
    );
    assert.throws(
      () => planRun({ backend: 'cpu', devices: [0, 1], loopback: true }),
      /loopback puts both ranks on one device, but devices \[0, 1\] are two devices/,
    );
  });

  it('a session refuses the sharded layout on one device before any worker starts', async () => {
    const before = liveWorkers();
    await assert.rejects(
      Session.open({ backend: 'cpu', model: 'tiny', layout: 'sharded', runtime: { devices: [0] } }),
      /layout 'sharded' needs two ranks, and devices \[0\] is one \(the CPU reference's 2 emulated devices\)/,
    );
    assert.equal(liveWorkers(), before);
  });
});
