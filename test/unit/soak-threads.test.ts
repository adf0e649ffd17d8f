/**
 * A soak loop's closing snapshot (bench/soak/resources.ts closingSnapshot) against real threads:
 * a thread still ending when the loop closes is waited for, one that stays is counted, so the
 * threads check (loop-result.ts noMoreThreads) still fails a leak.
 */
import { strict as assert } from 'node:assert';
import { Worker } from 'node:worker_threads';
import { closingSnapshot, hostResources } from '../../bench/soak/resources.js';
import { noMoreThreads } from '../../bench/soak/loop-result.js';

// A worker that lives `ms` and then returns from its script (its thread ends on its own).
const worker = (ms: number): Worker => new Worker(`setTimeout(() => {}, ${ms})`, { eval: true });

const online = (w: Worker): Promise<void> => new Promise((res) => w.once('online', () => res()));

describe('soak: the closing snapshot', function () {
  this.timeout(30_000);

  it('waits for a thread that is ending, and the threads check holds', async () => {
    const start = hostResources().threads;
    const w = worker(300);
    await online(w);
    assert.ok(hostResources().threads > start, 'the worker is a thread of its own');
    const t = performance.now();
    const end = await closingSnapshot(0, start);
    assert.ok(end.threads <= start, `${end.threads} threads against ${start} at the start`);
    assert.ok(performance.now() - t < 2000, 'it returned once the thread had gone, not at the bound');
    assert.ok(noMoreThreads(start, end.threads).pass);
  });

  it('counts a thread that stays past the wait, and the threads check fails', async () => {
    const start = hostResources().threads;
    const w = worker(60_000);
    try {
      await online(w);
      const t = performance.now();
      const end = await closingSnapshot(0, start, 300);
      assert.ok(performance.now() - t >= 300, 'it waited out its bound');
      assert.ok(end.threads > start);
      const check = noMoreThreads(start, end.threads);
      assert.equal(check.pass, false);
      assert.equal(check.value, `${start} → ${end.threads}`);
    } finally {
      await w.terminate();
    }
  });
});
