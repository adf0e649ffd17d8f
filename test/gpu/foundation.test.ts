/**
 * The foundation on the GPU: two ranks (on two GPUs, or in loopback on one: gpu-machine.ts), and
 * one worker on one GPU. This suite FAILS (it does not skip) without a device: `npm run
 * test:gpu` is the proof that the GPU path works, and an empty pass proves nothing.
 */
import { strict as assert } from 'node:assert';
import { Worker } from 'node:worker_threads';
import { loadBinding } from '../../src/runtime/binding.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { randomF32Ints, randomBytes } from '../support/random.js';
import { GPUS, LOOPBACK, PAIR, PAIR_NAME, gpuSuite, itLoopback, itTwoDevices } from '../support/gpu-machine.js';
import { refusesToOpen } from '../support/refuses-to-open.js';
import { LOOPBACK_PEER } from '../support/pair-modes.js';
import { checkOneWorker } from '../support/one-worker-check.js';

const binding = loadBinding();
const addonPath = new URL('../../../build/Release/memra.node', import.meta.url).pathname;

gpuSuite();

/** What a fresh worker thread's `bindDevice(ordinal, loopback)` says: 'bound', or the error. */
function bindInWorker(ordinal: number, loopback: boolean): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const w = new Worker(
      `
      const { parentPort } = require('node:worker_threads');
      const b = require(${JSON.stringify(addonPath)});
      try { b.bindDevice(${ordinal}, ${loopback}); b.releaseDevice(); parentPort.postMessage('bound'); } catch (e) { parentPort.postMessage(e.message); }
    `,
      { eval: true },
    );
    w.once('message', (m: string) => {
      void w.terminate();
      resolve(m);
    });
    w.once('error', reject);
  });
}

/** Until `seq` is enqueued on `rank`, then until the device is idle: test-only convenience. */
async function settle(rt: Runtime): Promise<void> {
  await rt.drain();
  assert.equal(rt.failure, undefined, rt.failure?.message);
}

describe(`GPU foundation (${PAIR_NAME})`, function () {
  this.timeout(120_000);
  let rt: Runtime;
  before(async () => {
    rt = await Runtime.open({ backend: 'cuda', ...PAIR });
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

  itTwoDevices('proves peer access both ways with a write-and-read-back probe', async () => {
    assert.deepEqual(
      rt.peer,
      {
        enabled: [
          [true, true],
          [true, true],
        ],
        reason: [],
        loopback: false,
      },
      rt.peer?.reason.join('; '),
    );
  });

  itLoopback(
    "in loopback, enables no peer access and writes each rank's memory from the other rank and reads it back instead",
    async () => {
      assert.deepEqual(rt.peer, LOOPBACK_PEER);
      assert.deepEqual(
        rt.ranks.map((r) => r.ordinal),
        [0, 0],
      );
    },
  );

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
    const [a, b] = rt.pair('the test');
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
    const [a, b] = rt.pair('the test');
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
    const rt2 = await Runtime.open({ backend: 'cuda', ...PAIR, peerAccess: false });
    try {
      const fault = new Promise<Error>((r) => rt2.onFault(r));
      rt2.pair('the test')[1].ring.push(77);
      assert.match((await fault).message, /unknown op 77/);
    } finally {
      await rt2.close();
    }
  });

  it('names an out-of-range ordinal and the device count', async () => {
    const seen =
      GPUS === 1
        ? '1 CUDA device visible \\(ordinal 0\\)'
        : `${GPUS} CUDA devices visible \\(ordinals 0\\.\\.${GPUS - 1}\\)`;
    await refusesToOpen({ backend: 'cuda', devices: [0, 7] }, new RegExp(`device ordinal 7 is out of range: ${seen}`));
    await refusesToOpen(
      { backend: 'cuda', devices: [GPUS] },
      new RegExp(`device ordinal ${GPUS} is out of range: ${seen}`),
    );
  });

  it('refuses two ranks on one device without loopback, and loopback on two devices, before any worker starts', async () => {
    await refusesToOpen(
      { backend: 'cuda', devices: [0, 0] },
      /both ranks are on device 0\. Two ranks need two devices: a kernel's store into a peer pointer across two contexts on one card is undefined.* pass loopback: true/,
    );
    await refusesToOpen(
      { backend: 'cuda', devices: [0, 1], loopback: true },
      /RuntimeOptions\.loopback puts both ranks on one device, but devices \[0, 1\] are two devices/,
    );
  });

  it('the addon refuses a second thread on a bound device, unless both bound it in loopback', async () => {
    const rt = await Runtime.open({ backend: 'cuda', ...PAIR, peerAccess: false });
    try {
      const held = rt.pair('the test')[1].ordinal;
      assert.match(
        await bindInWorker(held, false),
        new RegExp(
          `device ${held} is already bound by another thread \\(worker \\d+${LOOPBACK ? ', in loopback' : ''}\\): two ranks on one device are refused`,
        ),
      );
      if (LOOPBACK) assert.equal(await bindInWorker(held, true), 'bound', 'a third loopback bind shares the device');
      else
        assert.match(
          await bindInWorker(held, true),
          new RegExp(
            `bindDevice\\(${held}, loopback\\): device ${held} is bound by another thread \\(worker \\d+\\) without loopback`,
          ),
        );
    } finally {
      await rt.close();
    }
    assert.equal(await bindInWorker(0, false), 'bound', 'closing the runtime released its claims');
  });

  it('a dead worker closes the runtime and releases its device for the next one', async () => {
    const rt = await Runtime.open({ backend: 'cuda', ...PAIR, peerAccess: false, faultHooks: true });
    const died = new Promise<Error>((r) => rt.onFault(r));
    await rt.ranks[0].alloc(1 << 20);
    await rt.ranks[0].control.call('crash', 'injected');
    assert.match((await died).message, /worker 0 \(device \d+\) died: injected/);
    await rt.close();
    const again = await Runtime.open({ backend: 'cuda', ...PAIR });
    await again.close();
  });
});

describe('one worker on one GPU', function () {
  this.timeout(60_000);

  it('devices [0] opens one pinned worker, rank 0, with its ring, completion counter and mailbox; what needs two ranks says so', async () => {
    const rt = await Runtime.open({ backend: 'cuda', devices: [0] });
    try {
      await checkOneWorker(rt, [1, 7, 4099, 100_003]);
      assert.throws(
        () => rt.pair('the tp link'),
        /the tp link needs two ranks, and this runtime has one \(devices \[0\]\)/,
      );
      assert.equal(rt.failure, undefined);
    } finally {
      await rt.close();
    }
  });

  it('the default runtime follows the machine: one rank on one GPU, two on two', async () => {
    const rt = await Runtime.open({ backend: 'cuda' });
    try {
      assert.deepEqual(rt.devices, GPUS === 1 ? [0] : [0, 1]);
    } finally {
      await rt.close();
    }
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
    assert.ok(count >= 1);
  });
});
