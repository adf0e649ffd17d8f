/**
 * Bad input and failure: each gets a clear error and leaves nothing behind.
 */
import { strict as assert } from 'node:assert';
import { Runtime, detectBackend } from '../../src/runtime/runtime.js';
import { Op } from '../../src/workers/ops.js';
import { RingState } from '../../src/workers/ring-layout.js';

const openCpu = (extra = {}): Promise<Runtime> => Runtime.open({ backend: 'cpu', callTimeoutMs: 5000, ...extra });

describe('runtime lifecycle and bad input', () => {
  let rt: Runtime | undefined;
  afterEach(async () => {
    await rt?.close().catch(() => undefined);
    rt = undefined;
  });

  it('auto picks CUDA wherever a GPU is visible, else the CPU reference', () => {
    const d = detectBackend();
    assert.equal(d.backend, d.devices >= 1 ? 'cuda' : 'cpu', d.why);
  });

  it('refuses a device ordinal out of range, naming it and the count', async () => {
    await assert.rejects(
      openCpu({ devices: [0, 5] }),
      /device ordinal 5 is out of range: 2 CPU reference devices visible \(ordinals 0\.\.1\)/,
    );
    await assert.rejects(openCpu({ devices: [-1, 1] }), /device ordinal -1 is out of range/);
  });

  it('refuses two ranks on one ordinal, and says why and what would allow it', async () => {
    await assert.rejects(
      openCpu({ devices: [1, 1] }),
      /both ranks are on device 1\. Two ranks need two devices: a kernel's store into a peer pointer across two contexts on one card is undefined.* pass loopback: true/,
    );
  });

  it('refuses bad options by name', async () => {
    await assert.rejects(
      openCpu({ ringCapacity: 1000 }),
      /RuntimeOptions\.ringCapacity must be a power of two in \[2, 2\^20\], got 1000/,
    );
    await assert.rejects(
      Runtime.open({ backend: 'tpu' as never }),
      /RuntimeOptions\.backend must be one of 'auto', 'cuda', 'cpu', got 'tpu'/,
    );
    await assert.rejects(openCpu({ spinMicros: -1 }), /RuntimeOptions\.spinMicros must be an integer/);
  });

  it('reports a record with an unknown op: the worker refuses it and nothing after it runs', async () => {
    rt = await openCpu();
    const a = rt.ranks[0];
    const fault = new Promise<Error & { code?: string }>((r) => rt!.onFault(r));
    const p = await a.alloc(64);
    const bad = a.ring.push(99, [1, 2, 3]);
    // Published after the refusal, it must not run. A worker that refused before it was published
    // (it answers at once when it is awake) has the producer refuse to publish it at all.
    try {
      a.fill(p, 16, 1);
    } catch (e) {
      assert.equal((e as { code?: string }).code, 'ERR_RING_FAULTED');
    }
    const f = await fault;
    assert.equal(f.code, 'ERR_UNKNOWN_OP');
    assert.match(
      f.message,
      new RegExp(`worker 0 \\(device 0\\) refused record ${bad} \\(unknown\\(99\\)\\): unknown op 99`),
    );
    assert.equal(a.enqueued(bad), false);
    // The producer's own error names the reason too, read from the ring header without a turn of
    // the event loop (a synchronous emitter never sees the fault message).
    assert.throws(
      () => a.nop(),
      (e: Error & { code: string }) =>
        e.code === 'ERR_RING_FAULTED' && /refused record \d+ \(op 99\): unknown\(99\): unknown op 99: /.test(e.message),
    );
    assert.equal(rt.failure, f);
  });

  it('times out a control call that does not answer, naming the call', async function () {
    this.timeout(30_000);
    // The bound applies to every call, `open` too, so it must leave room for a worker's start on
    // a loaded two-core machine (CI measured 'open' past 150 ms).
    rt = await openCpu({ callTimeoutMs: 2000, faultHooks: true });
    const t = performance.now();
    await assert.rejects(
      rt.pair('the test')[1].control.call('hang', 6000),
      (e: Error & { code: string }) =>
        e.code === 'ERR_CONTROL_TIMEOUT' &&
        /worker 1 \(device 1\): control call 'hang' timed out after 2000 ms/.test(e.message),
    );
    assert.ok(performance.now() - t < 5000);
  });

  it('refuses the fault hooks by name unless the runtime was opened with faultHooks', async () => {
    rt = await openCpu();
    for (const call of [rt.ranks[0].control.call('hang', 1), rt.ranks[0].control.call('crash', 'not injected')])
      await assert.rejects(call, /worker 0 \(device 0\): '(hang|crash)' is a fault hook, .*faultHooks: true/);
    assert.equal(rt.failure, undefined, 'the worker lives on');
    await rt.ranks[0].drain();
  });

  it('a worker that dies rejects its pending calls, closes the runtime and hangs nothing', async () => {
    rt = await openCpu({ faultHooks: true });
    const r = rt;
    const died = new Promise<Error>((res) => r.onFault(res));
    const pending = r.ranks[0].control.call('hang', 30_000);
    await r.ranks[0].control.call('crash', 'injected failure');
    await assert.rejects(pending, (e: Error & { code: string; rank: number }) => {
      assert.match(e.message, /^worker 0 \(device 0\) died: injected failure$/);
      assert.deepEqual([e.code, e.rank], ['ERR_WORKER_EXITED', 0]);
      return true;
    });
    assert.match((await died).message, /died/);
    assert.throws(() => r.ranks[0].nop(), /the worker has stopped/);
    await r.close(); // the survivor is closed too; closing again is harmless
    assert.throws(() => r.pair('the test')[1].nop(), /the worker has stopped/);
    await assert.rejects(r.pair('the test')[1].alloc(64), /worker 1 \(device 1\) was closed with its runtime/);
  });

  it('a handshake on a dead peer refuses at once instead of waiting out its bound', async () => {
    rt = await openCpu({ handshakeTimeoutMs: 60_000, faultHooks: true });
    const r = rt;
    const waiting = r.pair('the test')[1].ring.push(Op.Nop, [], r.ranks[0].ring.nextSeq() + 5);
    await new Promise((res) => setTimeout(res, 30)); // rank 1 is now spinning in the handshake
    const t = performance.now();
    await r.ranks[0].control.call('crash', 'peer gone');
    const ring1 = r.pair('the test')[1].ring.view;
    while (ring1.state() === RingState.Running) {
      assert.ok(performance.now() - t < 5000, 'rank 1 gave up on its dead peer');
      await new Promise((res) => setTimeout(res, 5));
    }
    assert.equal(ring1.fault().seq, waiting);
    assert.match(r.failure!.message, /peer gone/);
  });

  it('close drains work in flight before releasing anything', async () => {
    rt = await openCpu();
    const a = rt.ranks[0];
    const p = await a.alloc(4096);
    for (let i = 0; i < 20; i++) a.spin(2000); // ~40 ms of queued device work
    a.fill(p, 1024, 7);
    a.signal(3, 42);
    assert.equal(rt.counter(0, 3), 0);
    await rt.close();
    assert.equal(rt.counter(0, 3), 42, 'every record ran before the device was released');
  });

  it('reports completion through the counter the device writes, without draining', async () => {
    rt = await openCpu();
    const [a, b] = rt.pair('the test');
    const pa = await a.alloc(4096);
    for (let v = 1; v <= 100; v++) {
      a.fill(pa, 1024, v);
      a.signal(0, v);
      b.signal(1, v);
    }
    await rt.waitCompleted(0, 0, 100);
    rt.spinUntilCompleted(1, 1, 100);
    assert.equal(rt.counter(0, 0), 100);
    assert.equal((await a.downloadF32(pa, 1024))[1023], 100);
    const fault = new Promise<Error>((res) => rt!.onFault(res));
    a.ring.push(Op.Signal, [1 << 20, 1]);
    assert.match((await fault).message, /completion slot 1048576 is out of range/);
  });
});
