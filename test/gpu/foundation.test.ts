/**
 * The foundation on two real GPUs. This suite FAILS (it does not skip) with fewer than two
 * devices: `npm run test:gpu` is the proof that the GPU path works, and an empty pass proves
 * nothing.
 */
import { strict as assert } from 'node:assert';
import { Worker } from 'node:worker_threads';
import { loadBinding } from '../../src/runtime/binding.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { randomF32Ints, randomBytes } from '../support/random.js';

const binding = loadBinding();

before(() => {
  const n = binding.deviceCount();
  if (n < 2) {
    throw new Error(
      `the GPU suite needs two CUDA devices and this machine shows ${n} (driver version ${binding.driverVersion()}); run it on the two-GPU machine`,
    );
  }
});

/** Until `seq` is enqueued on `rank`, then until the device is idle: test-only convenience. */
async function settle(rt: Runtime): Promise<void> {
  await rt.drain();
  assert.equal(rt.failure, undefined, rt.failure?.message);
}

describe('GPU foundation (two devices)', function () {
  this.timeout(120_000);
  let rt: Runtime;
  before(async () => {
    rt = await Runtime.open({ backend: 'cuda' });
  });
  after(async () => {
    await rt?.close();
  });

  it('pins each worker to a core of its own, and the thread really runs there (or says why not)', async () => {
    assert.equal(rt.placement.length, 2);
    const [p0, p1] = rt.placement;
    console.log(
      `      placement: ${rt.placement.map((p) => `rank ${p.rank} ${p.cpu === null ? `unpinned (${p.why})` : `on CPU ${p.cpu}`}`).join(', ')}`,
    );
    if (p0!.cpu === null || p1!.cpu === null) {
      assert.ok((p0!.why ?? p1!.why ?? '').length > 0, 'an unpinned worker says why');
      return;
    }
    assert.notEqual(p0!.cpu, p1!.cpu);
    for (const p of rt.placement) assert.deepEqual(await rt.ranks[p.rank]!.control.call('threadAffinity'), [p.cpu]);
  });

  it('proves peer access both ways with a write-and-read-back probe', () => {
    assert.deepEqual(
      rt.peer?.enabled,
      [
        [true, true],
        [true, true],
      ],
      rt.peer?.reason.join('; '),
    );
  });

  it('round-trips allocations and copies from each worker, odd sizes included', async () => {
    for (const rank of rt.ranks) {
      for (const bytes of [4, 12, 1000, 4096 + 4, 65_536 + 12, (1 << 20) + 4, 3 * (1 << 20) + 8]) {
        const src = await rank.alloc(bytes),
          dst = await rank.alloc(bytes);
        const data = randomBytes(bytes);
        await rank.upload(src, data);
        await rank.upload(dst, new Uint8Array(bytes).fill(0xa5)); // poison
        rank.copy(dst, src, bytes);
        const back = await rank.download(dst, bytes);
        assert.ok(Buffer.from(back).equals(Buffer.from(data)), `rank ${rank.rank}, ${bytes} bytes`);
        await rank.free(src);
        await rank.free(dst);
      }
    }
  });

  it('launches kernels from each worker through its ring, checked against the host', async () => {
    for (const rank of rt.ranks) {
      for (const n of [1, 7, 1023, 4096, 100_003]) {
        const x = await rank.alloc(n * 4),
          y = await rank.alloc(n * 4);
        const hx = randomF32Ints(n, 1000),
          hy = randomF32Ints(n, 1000);
        const a = 1 + Math.floor(Math.random() * 7);
        await rank.upload(x, hx);
        await rank.upload(y, hy);
        rank.axpy(y, x, n, a);
        const got = await rank.downloadF32(y, n);
        for (let i = 0; i < n; i++) assert.equal(got[i], hy[i]! + a * hx[i]!, `rank ${rank.rank} n ${n} i ${i}`);
        const v = Math.floor(Math.random() * 1e6) + 0.5;
        rank.fill(y, n, v);
        assert.ok((await rank.downloadF32(y, n)).every((e) => e === v));
        await rank.free(x);
        await rank.free(y);
      }
    }
    await settle(rt);
  });

  it('orders a cross-device event wait by the handshake (and the race is real without it)', async () => {
    const [a, b] = rt.ranks;
    const n = 1 << 16;
    const pa = await a.alloc(n * 4),
      pb = await b.alloc(n * 4);
    const ev = await a.createEvent();
    for (const ordered of [true, false]) {
      await a.upload(pa, new Float32Array(n).fill(-1));
      await b.upload(pb, new Float32Array(n).fill(-2));
      const v = 1 + Math.floor(Math.random() * 1000);
      a.spin(20_000); // 20 ms of work ahead of the producer's write
      a.fill(pa, n, v);
      a.record(ev);
      if (ordered) b.wait(ev); // carries afterPeer = the record's seq
      b.copy(pb, pa, n * 4); // pulls rank 0's buffer over NVLink
      const got = await b.downloadF32(pb, n);
      await a.drain();
      if (ordered)
        assert.ok(
          got.every((e) => e === v),
          `ordered pull saw ${got[0]}, wanted ${v}`,
        );
      else
        assert.equal(
          got[0],
          -1,
          'without the wait the pull ran before the producer wrote: the ordering is what the test checks',
        );
    }
    await a.free(pa);
    await b.free(pb);
  });

  it('pushes through a peer pointer in a kernel, ordered both ways by events', async () => {
    const [a, b] = rt.ranks;
    const n = 4099;
    const pa = await a.alloc(n * 4),
      pb = await b.alloc(n * 4);
    const ready = await b.createEvent(),
      pushed = await a.createEvent();
    const v = 3 + Math.floor(Math.random() * 100);
    b.fill(pb, n, -7);
    b.record(ready);
    a.wait(ready); // write-after-write: the consumer's fill first
    a.fill(pb, n, v); // a kernel on device 0 stores into device 1
    a.record(pushed);
    b.wait(pushed); // read-after-write
    a.fill(pa, n, 1);
    b.signal(0, 1);
    await rt.waitCompleted(1, 0, 1);
    assert.ok((await b.downloadF32(pb, n)).every((e) => e === v));
    await settle(rt);
  });

  it('the GPU writes the completion counter the main thread sees, with no stream synchronized', async () => {
    const a = rt.ranks[0];
    const before = rt.counter(0, 5);
    const target = (before + 1) >>> 0;
    const t0 = performance.now();
    a.spin(30_000);
    a.signal(5, target);
    assert.equal(rt.counter(0, 5), before, 'not before the work ahead of it is done');
    rt.spinUntilCompleted(0, 5, target, 5000);
    const waited = performance.now() - t0;
    assert.equal(rt.counter(0, 5), target);
    assert.ok(waited >= 25, `the counter appeared after the 30 ms kernel (${waited.toFixed(1)} ms)`);
  });
});

describe('GPU bad input', function () {
  this.timeout(60_000);

  it('refuses an unknown op on the GPU path too, without touching the device', async () => {
    const rt2 = await Runtime.open({ backend: 'cuda', peerAccess: false });
    try {
      const fault = new Promise<Error>((r) => rt2.onFault(r));
      rt2.ranks[1].ring.push(77);
      assert.match((await fault).message, /unknown op 77/);
    } finally {
      await rt2.close();
    }
  });

  it('names an out-of-range ordinal and the device count', async () => {
    await assert.rejects(
      Runtime.open({ backend: 'cuda', devices: [0, 7] }),
      new RegExp(`device ordinal 7 is out of range: ${binding.deviceCount()} CUDA devices visible`),
    );
  });

  it('refuses two ranks on one device, at the runtime and in the addon', async () => {
    await assert.rejects(Runtime.open({ backend: 'cuda', devices: [0, 0] }), /both ranks are on device 0/);
    const rt = await Runtime.open({ backend: 'cuda', peerAccess: false });
    try {
      const msg = await new Promise<string>((resolve, reject) => {
        const w = new Worker(
          `
          const { parentPort } = require('node:worker_threads');
          const b = require(${JSON.stringify(new URL('../../../build/Release/memra.node', import.meta.url).pathname)});
          try { b.bindDevice(1); parentPort.postMessage('bound'); } catch (e) { parentPort.postMessage(e.message); }
        `,
          { eval: true },
        );
        w.once('message', (m: string) => {
          void w.terminate();
          resolve(m);
        });
        w.once('error', reject);
      });
      assert.match(msg, /device 1 is already bound by another thread/);
    } finally {
      await rt.close();
    }
  });

  it('a dead worker closes the runtime and releases its device for the next one', async () => {
    const rt = await Runtime.open({ backend: 'cuda', peerAccess: false });
    const died = new Promise<Error>((r) => rt.onFault(r));
    await rt.ranks[0].alloc(1 << 20);
    await rt.ranks[0].control.call('crash', 'injected');
    assert.match((await died).message, /exited .*injected/);
    await rt.close();
    const again = await Runtime.open({ backend: 'cuda' });
    await again.close();
  });
});

describe('addon in a worker on the GPU machine', () => {
  it('sees the same devices from a worker thread as from the main thread', async () => {
    const count = await new Promise<number>((resolve, reject) => {
      const w = new Worker(
        `
        const { parentPort } = require('node:worker_threads');
        const b = require(${JSON.stringify(new URL('../../../build/Release/memra.node', import.meta.url).pathname)});
        parentPort.postMessage(b.deviceCount());
      `,
        { eval: true },
      );
      w.once('message', (m: number) => {
        void w.terminate();
        resolve(m);
      });
      w.once('error', reject);
    });
    assert.equal(count, binding.deviceCount());
    assert.ok(count >= 2);
  });
});
