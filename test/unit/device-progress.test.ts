/**
 * The diagnosis mode's events (workers/device-progress.ts): after a device that stopped partway, the
 * newest record it finished and the one after it are named, through the window's wrap, and a stop
 * older than the window says so; every event made is destroyed; a timed-out wait's report
 * carries the words; and a session decoding with the mode on, eagerly and from the step graph it
 * captures, gives the model's tokens and closes.
 */
import { strict as assert } from 'node:assert';
import type { DeviceApi } from '../../src/runtime/device-api.js';
import type { StreamHandle } from '../../src/runtime/binding.js';
import { reportStreams } from '../../src/runtime/stream-report.js';
import { CpuModel } from '../../src/decode/cpu-model.js';
import { DEFAULT_CONFIG } from '../../src/decode/decode-config.js';
import { presetByName } from '../../src/decode/model-config.js';
import { Session } from '../../src/decode/session.js';
import { DeviceProgress, PROGRESS_WINDOW } from '../../src/workers/device-progress.js';
import { Op } from '../../src/workers/ops.js';
import type { StreamState } from '../../src/workers/stream-watch.js';
import type { WorkerHandle } from '../../src/workers/worker-handle.js';

/** A device whose stream has finished every record up to `doneUpTo`: an event is done once its latest record is. */
function fakeDevice() {
  let next = 1;
  const recordedAt = new Map<number, number>();
  const destroyed = new Set<number>();
  const state = { doneUpTo: 0, current: 0, created: 0 };
  const dev = {
    eventCreate: () => {
      state.created++;
      return next++;
    },
    eventRecord: (e: number) => {
      recordedAt.set(e, state.current);
    },
    eventQuery: (e: number) => (recordedAt.get(e) ?? 0) <= state.doneUpTo,
    eventDestroy: (e: number) => {
      destroyed.add(e);
    },
  } as unknown as DeviceApi;
  return { dev, state, destroyed };
}

const stream = 7 as StreamHandle;

/** Marks records 1..n, each with the op its seq picks (Gemv on even, Ll on odd). */
function mark(p: DeviceProgress, d: ReturnType<typeof fakeDevice>, n: number): void {
  for (let seq = 1; seq <= n; seq++) {
    d.state.current = seq;
    p.after(d.dev, stream, seq, seq % 2 === 0 ? Op.Gemv : Op.Ll);
  }
}

describe('device progress (MEMRA_DEVICE_PROGRESS=1)', function () {
  this.timeout(120_000);

  it('names nothing before any record, nor once the device has finished every one', () => {
    const d = fakeDevice();
    const p = new DeviceProgress();
    assert.equal(p.where(d.dev), undefined);
    mark(p, d, 20);
    d.state.doneUpTo = 20;
    assert.equal(p.where(d.dev), undefined);
  });

  it('names the newest record finished and the one after it, through the window wrapping', () => {
    for (const [n, stop] of [
      [20, 11],
      [20, 0],
      [PROGRESS_WINDOW * 2 + 37, PROGRESS_WINDOW * 2 + 5],
    ] as const) {
      const d = fakeDevice();
      const p = new DeviceProgress();
      mark(p, d, n);
      d.state.doneUpTo = stop;
      const where = p.where(d.dev);
      if (stop === 0) {
        assert.deepEqual(where, { pending: { seq: 1, op: 'Ll' }, window: 20 }, 'none finished yet');
        continue;
      }
      assert.deepEqual(where, {
        finished: { seq: stop, op: 'Ll' },
        pending: { seq: stop + 1, op: 'Gemv' },
        window: Math.min(PROGRESS_WINDOW, n),
      });
      assert.equal(d.state.created, Math.min(n, PROGRESS_WINDOW), 'an event a slot of the window, reused');
    }
  });

  it('says so where the device stopped before the window, and destroys every event it made', () => {
    const d = fakeDevice();
    const p = new DeviceProgress();
    mark(p, d, PROGRESS_WINDOW + 500);
    d.state.doneUpTo = 100;
    assert.deepEqual(p.where(d.dev), { pending: { seq: 501, op: 'Ll' }, window: PROGRESS_WINDOW });
    p.destroy(d.dev);
    assert.equal(d.destroyed.size, PROGRESS_WINDOW);
    assert.equal(p.where(d.dev), undefined, 'nothing marked after destroy');
  });

  it('goes without its words, rather than throw, where an event cannot be asked', () => {
    const d = fakeDevice();
    const p = new DeviceProgress();
    mark(p, d, 10);
    d.state.doneUpTo = 4;
    d.dev.eventQuery = () => {
      throw new Error('cudaEventQuery: operation not permitted when stream is capturing');
    };
    assert.equal(p.where(d.dev), undefined);
  });

  it("puts the device's place into a timed-out wait's report, rank by rank", async () => {
    const busy = (stop?: StreamState['stop']): StreamState => ({ enqueued: 900, busy: true, busyForMs: 60000, stop });
    const handle = (s: StreamState) => ({ call: async () => s }) as unknown as WorkerHandle;
    const words = await reportStreams([
      handle(busy({ finished: { seq: 611, op: 'Gemv' }, pending: { seq: 612, op: 'Ll' }, window: 2048 })),
      handle(busy({ pending: { seq: 3, op: 'Ll' }, window: 2048 })),
    ]);
    assert.match(
      words,
      /rank 0: .* after the last, and its device has finished record 611 \(Gemv\) but not 612 \(Ll\)/,
    );
    assert.match(words, /rank 1: .* and its device has finished none of its last 2048 records \(the oldest 3, Ll\)/);
    const plain = await reportStreams([handle(busy()), handle(busy())]);
    assert.doesNotMatch(plain, /its device has/, 'without the mode, no words of it');
  });

  it("a session with the mode on decodes the model's tokens, eagerly and from its step graph, past the window", async () => {
    const before = process.env.MEMRA_DEVICE_PROGRESS;
    process.env.MEMRA_DEVICE_PROGRESS = '1'; // read by each worker as it starts
    try {
      for (const stepGraph of [false, true]) {
        const s = await Session.open({ backend: 'cpu', model: 'tiny', config: { ...DEFAULT_CONFIG, stepGraph } });
        try {
          const ref = new CpuModel(presetByName('tiny'), { maxBatch: 1 });
          let cur = [17];
          // tiny's step is about 40 records a rank: 12 steps pass the CPU window of 128 more than once.
          for (let i = 0; i < 12; i++) {
            const want = ref.step(cur, [i]).next;
            assert.deepEqual(await s.step(cur), want, `stepGraph ${stepGraph}, step ${i}`);
            cur = want;
          }
        } finally {
          await s.close();
        }
      }
    } finally {
      if (before === undefined) delete process.env.MEMRA_DEVICE_PROGRESS;
      else process.env.MEMRA_DEVICE_PROGRESS = before;
    }
  });
});
