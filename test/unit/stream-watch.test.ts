/**
 * The idle worker's watch over its stream: a device fault while the ring is idle is reported when
 * it happens, not when the main thread's wait runs out, and a wait that does run out says what
 * each rank's stream was doing.
 */
import { strict as assert } from 'node:assert';
import { Runtime } from '../../src/runtime/runtime.js';
import { IDLE_MS, StreamWatch } from '../../src/workers/stream-watch.js';
import type { WorkerContext } from '../../src/workers/worker-context.js';

/** A context with a stream whose queries are counted and answered by `answer`. */
function fakeContext(answer: () => boolean): { ctx: WorkerContext; queries: () => number } {
  let n = 0;
  const ctx = {
    stream: 7,
    capturing: false,
    dev: {
      streamQuery: () => {
        n++;
        return answer();
      },
    },
    ring: { view: { tail: () => 41 } },
  } as unknown as WorkerContext;
  return { ctx, queries: () => n };
}

describe('stream watch', () => {
  it('queries only once idle for IDLE_MS with work enqueued, then every IDLE_MS until it is done', () => {
    let done = false;
    const { ctx, queries } = fakeContext(() => done);
    const w = new StreamWatch();
    w.poll(ctx, 1000);
    assert.equal(queries(), 0, 'nothing enqueued: no query');
    w.enqueued(1000);
    w.poll(ctx, 1000 + IDLE_MS - 1);
    assert.equal(queries(), 0, 'not idle long enough');
    w.poll(ctx, 1000 + IDLE_MS);
    w.poll(ctx, 1000 + IDLE_MS + 1);
    assert.equal(queries(), 1, 'one query an IDLE_MS');
    done = true;
    w.poll(ctx, 1000 + 2 * IDLE_MS);
    w.poll(ctx, 1000 + 9 * IDLE_MS);
    assert.equal(queries(), 2, 'no query once the stream was seen finished');
  });

  it('never queries a capturing stream, and its state says busy then', () => {
    const { ctx, queries } = fakeContext(() => true);
    (ctx as { capturing: boolean }).capturing = true;
    const w = new StreamWatch();
    w.enqueued(0);
    w.poll(ctx, 10 * IDLE_MS);
    assert.deepEqual(w.state(ctx, 10 * IDLE_MS), { enqueued: 41, busy: true, busyForMs: 10 * IDLE_MS });
    assert.equal(queries(), 0);
    (ctx as { capturing: boolean }).capturing = false;
    assert.deepEqual(w.state(ctx, 11 * IDLE_MS), { enqueued: 41, busy: false, busyForMs: 0 });
    assert.equal(queries(), 1);
  });

  it("throws the device's error from the query", () => {
    const { ctx } = fakeContext(() => {
      throw new Error('cudaStreamQuery(stream=0x7) failed: unspecified launch failure');
    });
    const w = new StreamWatch();
    w.enqueued(0);
    assert.throws(() => w.poll(ctx, IDLE_MS), /unspecified launch failure/);
  });
});

describe('a device fault while the ring is idle', () => {
  let rt: Runtime | undefined;
  afterEach(async () => {
    await rt?.close().catch(() => undefined);
    rt = undefined;
  });

  it("fails the wait at once with ERR_DEVICE_FAULT and the device's words, not after its timeout", async () => {
    rt = await Runtime.open({ backend: 'cpu', devices: [0], callTimeoutMs: 5000, faultHooks: true });
    const r = rt.ranks[0];
    await r.control.call('failStream', 'unspecified launch failure (injected)');
    r.nop();
    const t = performance.now();
    await assert.rejects(rt.waitCompleted(0, 0, 1, 30_000), (e: Error & { code?: string; rank?: number }) => {
      assert.equal(e.code, 'ERR_DEVICE_FAULT');
      assert.equal(e.rank, 0);
      assert.match(
        e.message,
        /^worker 0 \(device 0\): the device failed running the records enqueued up to \d+: unspecified launch failure \(injected\)$/,
      );
      return true;
    });
    assert.ok(performance.now() - t < 2000, `reported within 2 s, not the wait's 30 s (${performance.now() - t} ms)`);
    assert.throws(() => r.nop(), /the worker has stopped|refused/);
  });

  it("a wait that runs out says each rank's stream had finished its records", async () => {
    rt = await Runtime.open({ backend: 'cpu', callTimeoutMs: 5000 });
    rt.ranks[0].nop();
    rt.pair('the test')[1].nop();
    await assert.rejects(
      rt.waitCompleted(0, 0, 5, 100),
      /^Error: completion counter 0 of rank 0 did not reach 5 in 100 ms \(it reads 0\); rank 0: its stream has finished every record enqueued \(up to \d+\); rank 1: its stream has finished every record enqueued \(up to \d+\)$/,
    );
  });

  it('refuses failStream by name where the runtime did not ask for the fault hooks', async () => {
    rt = await Runtime.open({ backend: 'cpu', devices: [0], callTimeoutMs: 5000 });
    await assert.rejects(
      rt.ranks[0].control.call('failStream', 'x'),
      /worker 0 \(device 0\): 'failStream' is a fault hook, .*faultHooks: true/,
    );
  });
});
