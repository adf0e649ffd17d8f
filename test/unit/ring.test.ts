import { strict as assert } from 'node:assert';
import { Worker } from 'node:worker_threads';
import { RingConsumer, type RingError, RingProducer, RingView } from '../../src/workers/ring.js';
import {
  FAULT_TEXT_MAX,
  FAULT_TEXT_OFFSET,
  HEADER_BYTES,
  RECORD_BYTES,
  W_HEAD,
  W_TAIL,
  seqDiff,
} from '../../src/workers/ring-layout.js';

const wait = { spinMicros: 50, timeoutMs: 200 };

describe('command ring', () => {
  it('has the documented layout: header, power-of-two capacity, counters on their own lines', () => {
    const v = RingView.create(16);
    assert.equal(v.sab.byteLength, HEADER_BYTES + 16 * RECORD_BYTES);
    assert.equal(v.capacity, 16);
    // head and tail 128 bytes apart: never on one cache line (or one adjacent-line pair).
    assert.equal((W_TAIL - W_HEAD) * 4, 128);
    for (const bad of [0, 3, 12, 1 << 21, 1.5]) assert.throws(() => RingView.create(bad), /power of two/);
    assert.throws(() => new RingView(new SharedArrayBuffer(4096)), /not a memra command ring/);
  });

  it('wraps around its slots and its 32-bit counters without losing or reordering a record', () => {
    // Counters start 5 below 2^32, so they wrap after a few records.
    const v = RingView.create(8, 'wrap', -5);
    const p = new RingProducer(v, wait),
      c = new RingConsumer(v);
    let got = 0;
    for (let i = 0; i < 1000; i++) {
      p.push(7, [i, i * 2]);
      if (i % 3 === 2) {
        while (c.available() > 0) {
          const r = c.peek();
          assert.equal(c.args[r.arg], got);
          assert.equal(c.args[r.arg + 1], got * 2);
          c.advance();
          got++;
        }
      }
    }
    while (c.available() > 0) {
      c.peek();
      c.advance();
      got++;
    }
    assert.equal(got, 1000);
    assert.equal(seqDiff(v.tail(), -5), 1000);
    assert.ok(v.reached(-5 + 1000));
    assert.ok(!v.reached(-5 + 1001));
  });

  it('a full ring is backpressure, never loss: the producer waits, then refuses with a named error', () => {
    const v = RingView.create(4, 'full');
    const p = new RingProducer(v, wait),
      c = new RingConsumer(v);
    for (let i = 0; i < 4; i++) p.push(1, [i]);
    assert.equal(p.hasSpace(), false);
    const t = performance.now();
    assert.throws(
      () => p.push(1, [99]),
      (e: RingError) => e.code === 'ERR_RING_STALLED' && /full for 200 ms/.test(e.message),
    );
    assert.ok(performance.now() - t >= 190, 'waited for the bound before refusing');
    // Nothing was overwritten: all four records are intact, in order.
    for (let i = 0; i < 4; i++) {
      assert.equal(c.available(), 4 - i);
      assert.equal(c.args[c.peek().arg], i);
      c.advance();
    }
    assert.equal(p.hasSpace(), true);
    p.push(1, [4]);
    assert.equal(c.args[c.peek().arg], 4);
  });

  it('a refusal carries its reason in the header, cut at a character boundary, never past its field', () => {
    const v = RingView.create(4, 'refused');
    const p = new RingProducer(v, wait),
      c = new RingConsumer(v);
    const seq = p.push(3, [1]);
    // 'é' is two bytes in UTF-8: 300 of them cross the 256-byte field mid-character.
    c.fault(seq, 3, 'é'.repeat(300));
    const f = v.fault();
    assert.equal(f.seq, seq >>> 0);
    assert.equal(f.reason, 'é'.repeat(128));
    assert.ok(FAULT_TEXT_OFFSET + FAULT_TEXT_MAX <= HEADER_BYTES, 'the field ends inside the header');
    assert.equal(c.peek().op, 3, 'the refused record is intact');
    assert.throws(
      () => p.push(1, [2]),
      (e: RingError) => e.code === 'ERR_RING_FAULTED' && e.message.includes(`refused record ${seq >>> 0} (op 3): é`),
    );
  });

  it("writes an attached annex's entry once the next record's slot is free, and sets its flag bits", () => {
    // Four slots, so the fifth record reuses the first one's: the entry is written only once
    // begin() has its slot, never over an entry the consumer may still read.
    const v = RingView.create(4, 'annex', -1);
    const p = new RingProducer(v, { spinMicros: 0, timeoutMs: 20 }),
      c = new RingConsumer(v);
    const board = new Float64Array(4);
    const annex = {
      pending: false,
      value: 0,
      take(slot: number): number {
        board[slot] = this.value;
        this.pending = false;
        return 4;
      },
    };
    p.attach(annex);
    for (let i = 0; i < 4; i++) {
      annex.pending = i % 2 === 0;
      annex.value = 10 + i;
      p.push(7, [i], i === 3 ? 0 : undefined);
    }
    annex.pending = true;
    annex.value = 99;
    assert.throws(() => p.push(7, [4]), /full for 20 ms/);
    assert.equal(board[0], 10, 'a full ring leaves the slot in use untouched');
    assert.equal(annex.pending, true);
    const flags: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = c.peek();
      flags.push(r.flags);
      c.advance();
    }
    assert.deepEqual(flags, [4, 0, 4, 1], "the annex's bits, beside the ring's own afterPeer bit");
    assert.deepEqual([...board], [10, 0, 12, 0]);
    p.push(7, [4]);
    assert.equal(board[0], 99);
    assert.equal(c.peek().flags, 4);
    c.advance();
    // Detached: nothing is asked of it, whatever it says is pending.
    p.attach(undefined);
    annex.value = 5;
    p.push(7, [5]);
    assert.equal(c.peek().flags, 0);
    assert.equal(board[1], 0);
  });

  it('refuses begin() twice and publish() without begin()', () => {
    const p = new RingProducer(RingView.create(4), wait);
    assert.throws(() => p.publish(), /publish\(\) without begin\(\)/);
    p.begin(1);
    assert.throws(() => p.begin(1), /begin\(\) twice/);
  });

  it('the doorbell: a consumer about to sleep turns its loop instead, once per ring', () => {
    const v = RingView.create(8, 'bell');
    const c = new RingConsumer(v);
    const sleep = (ms: number): number => {
      const t = performance.now();
      assert.equal(c.sleepForWork(ms), false, 'no record: nothing to run');
      return performance.now() - t;
    };
    assert.ok(sleep(30) >= 25, 'no bell: it waits out its slice');
    v.ringDoorbell();
    assert.ok(sleep(5000) < 1000, 'rung before it slept: it does not sleep');
    assert.ok(sleep(30) >= 25, 'that ring was answered: the next sleep is whole again');
  });

  it('the doorbell wakes a consumer asleep on another thread at once', async function () {
    this.timeout(20_000);
    const v = RingView.create(8, 'sleeper');
    const sleeper = new Worker(new URL('./fixtures/ring-sleeper.js', import.meta.url), {
      workerData: { sab: v.sab, ms: 10_000 },
    });
    const said = (): Promise<unknown> =>
      new Promise((resolve, reject) => {
        sleeper.once('message', resolve);
        sleeper.once('error', reject);
      });
    await said();
    const report = said() as Promise<{ sleptMs: number; work: boolean }>;
    // Long enough for it to be in its wait: a bell before that is the other test's case.
    await new Promise((r) => setTimeout(r, 100));
    v.ringDoorbell();
    const r = await report;
    await sleeper.terminate();
    assert.equal(r.work, false);
    assert.ok(r.sleptMs < 5000, `woke after ${r.sleptMs.toFixed(0)} ms of a 10 s sleep`);
  });

  it('delivers 10^6 records across threads in order, through a 1024-slot ring', async function () {
    this.timeout(120_000);
    const total = 1_000_000;
    const v = RingView.create(1024, 'stress');
    const consumer = new Worker(new URL('./fixtures/ring-consumer.js', import.meta.url), {
      workerData: { sab: v.sab, total, slowEvery: 100_000 },
    });
    const done = new Promise<{ seen: number; bad: string }>((resolve, reject) => {
      consumer.once('message', resolve);
      consumer.once('error', reject);
    });
    const p = new RingProducer(v, { spinMicros: 100, timeoutMs: 10_000 });
    let fullWaits = 0;
    for (let i = 0; i < total; i++) {
      if (!p.hasSpace()) fullWaits++;
      const a = p.begin(p.nextSeq() & 0xff);
      p.args[a] = i;
      p.args[a + 13] = -i;
      p.publish();
    }
    const r = await done;
    await consumer.terminate();
    assert.equal(r.bad, '');
    assert.equal(r.seen, total);
    assert.ok(fullWaits > 0, 'the producer met a full ring at least once');
  });
});
