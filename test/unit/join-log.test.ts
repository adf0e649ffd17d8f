/**
 * The join log (workers/join-log.ts): each worker's times of its joins that wait on the device,
 * paired across the ranks by order, and what a refusal or a timed-out wait says from them; on the
 * CPU reference, a join whose second half is issued late is named with how late, and the
 * barrier's reset pairs the ranks afresh. The soak's one-sided fault (soak-one-sided.test.ts)
 * checks a refused step's counts are the step's own.
 */
import { strict as assert } from 'node:assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { NO_PTR } from '../../src/runtime/binding.js';
import { ArLink } from '../../src/runtime/link.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { openTransport } from '../../src/runtime/transports/open.js';
import { JOIN_LOG_BYTES, JOIN_LOG_CAPACITY, JoinLog, describeJoinHalves } from '../../src/workers/join-log.js';

/** Two logs with these times (ms), as two workers would have written them. */
function logs(a: number[], b: number[]): [JoinLog, JoinLog] {
  const out = [JoinLog.create(), JoinLog.create()] as [JoinLog, JoinLog];
  for (const t of a) out[0].note(t);
  for (const t of b) out[1].note(t);
  return out;
}

describe('the join log', () => {
  it('counts, reads back each join, keeps the newest CAPACITY - 1, and realigns', () => {
    const log = JoinLog.create();
    assert.equal(log.count(), 0);
    assert.equal(log.timeOf(0), undefined);
    const n = JOIN_LOG_CAPACITY + 37;
    for (let i = 0; i < n; i++) log.note(1000 + i);
    assert.equal(log.count(), n);
    assert.equal(log.timeOf(n - 1), 1000 + n - 1);
    assert.equal(log.timeOf(n - JOIN_LOG_CAPACITY + 1), 1000 + n - JOIN_LOG_CAPACITY + 1);
    assert.equal(log.timeOf(n - JOIN_LOG_CAPACITY), undefined, 'the slot written next is never read');
    assert.equal(log.timeOf(n), undefined);
    assert.equal(log.timeOf(-1), undefined);
    log.realign();
    assert.equal(log.count(), 0);
    assert.equal(log.realigns, 1);
    log.note(5);
    assert.equal(log.timeOf(0), 5);
    assert.throws(() => new JoinLog(new SharedArrayBuffer(JOIN_LOG_BYTES - 8)), /under the \d+ it needs/);
  });

  it('counts on across the Int32 wrap', () => {
    const log = JoinLog.create();
    new Int32Array(log.sab, 0, 1)[0] = 0x7ffffffb;
    log.realign();
    for (let i = 0; i < 10; i++) log.note(i);
    assert.ok(new Int32Array(log.sab, 0, 1)[0]! < 0, 'the raw count wrapped');
    assert.equal(log.count(), 10);
    assert.deepEqual(
      Array.from({ length: 10 }, (_, i) => log.timeOf(i)),
      Array.from({ length: 10 }, (_, i) => i),
    );
  });

  it('names the join whose halves were issued furthest apart, which rank was late, and each newest', () => {
    const [a, b] = logs([10, 20, 30, 40], [10.01, 20.02, 330, 40.03]);
    assert.equal(
      describeJoinHalves([a, b], 0, 'these joins', 1040),
      "these joins: each rank issued 4; the halves furthest apart were join 2's (of 0 to 3): rank 1 issued its " +
        'half 300 ms after rank 0 (the median gap 0.03 ms); the newest issued rank 0 1000 ms ago, rank 1 1000 ms ago',
    );
    assert.match(
      describeJoinHalves([b, a], 0, 'x'),
      /join 2's \(of 0 to 3\): rank 0 issued its half 300 ms after rank 1/,
    );
    // From join 3 on: one join, numbered from there.
    assert.match(describeJoinHalves([a, b], 3, 'x'), /^x: each rank issued 1; the halves furthest apart were join 0's/);
  });

  it('says only the counts where a rank issued fewer, and nothing where neither issued one', () => {
    const [a, b] = logs([10, 20, 30], [10, 20]);
    assert.equal(
      describeJoinHalves([a, b], 0, 'these joins', 1030),
      'these joins: rank 1 issued 2 and rank 0 3: rank 1 has not issued a half, or left one out, so the halves are ' +
        'not paired; the newest issued rank 0 1000 ms ago, rank 1 1010 ms ago',
    );
    assert.equal(describeJoinHalves([a, b], 3, 'x'), '', 'none from join 3 on');
    assert.equal(describeJoinHalves(logs([], []), 0, 'x'), '');
    assert.equal(describeJoinHalves([a], 0, 'x'), '', 'one rank pairs nothing');
  });
});

describe('a late half on the CPU reference', function () {
  this.timeout(60_000);
  let rt: Runtime | undefined;
  let link: ArLink | undefined;
  afterEach(async () => {
    await link?.close().catch(() => undefined);
    await rt?.close().catch(() => undefined);
    link = rt = undefined;
  });

  it('is named with its delay; a timed-out wait says which rank issued fewer', async () => {
    rt = await Runtime.open({ backend: 'cpu', callTimeoutMs: 10_000 });
    link = await ArLink.open(rt);
    const n = 256;
    await link.reserve(n);
    const ll = await openTransport('ll', link);
    const [a, b] = rt.pair('the join log test');
    const x = [await a.alloc(n * 4), await b.alloc(n * 4)] as const;
    a.fill(x[0], n, 1);
    b.fill(x[1], n, 2);
    ll.allReduce(x, n);
    await rt.drain();
    assert.deepEqual(await link.barrierErrors(), [0, 0]);
    const since = 'joins that wait on the device since the last barrier reset';

    // Rank 0's half now, rank 1's 300 ms later, past a bound of about 50 ms.
    await link.setSpinLimit(1e8);
    a.ll(0, 1, n, NO_PTR, NO_PTR, NO_PTR, x[0], n);
    await assert.rejects(
      rt.waitCompleted(1, 0, 1 << 30, 100),
      new RegExp(`; ${since}: rank 1 issued 1 and rank 0 2: rank 1 has not issued a half`),
    );
    await sleep(300);
    b.ll(0, 1, n, NO_PTR, NO_PTR, NO_PTR, x[1], n);
    await rt.drain();
    const words = await link.barrierErrors();
    assert.equal(words[0], 40043, "rank 0 waited out its bound for rank 1's half");
    const said = describeJoinHalves(rt.joinLogs, 0, since);
    const late = /join 1's \(of 0 to 1\): rank 1 issued its half (\d+(?:\.\d+)?) ms after rank 0/.exec(said);
    assert.ok(late, said);
    assert.ok(Number(late[1]) >= 300, `the half was at least 300 ms late: ${said}`);

    // After the reset the ranks pair afresh, and a join of both halves at once is close.
    await link.resetBarrier();
    await link.setSpinLimit(2e9);
    assert.equal(describeJoinHalves(rt.joinLogs, 0, since), '');
    ll.allReduce(x, n);
    await rt.drain();
    assert.deepEqual(await link.barrierErrors(), [0, 0]);
    const after = describeJoinHalves(rt.joinLogs, 0, since);
    const gap = /each rank issued 1; .* join 0's \(of 0 to 0\): rank \d issued its half (\d+(?:\.\d+)?) ms after/.exec(
      after,
    );
    assert.ok(gap && Number(gap[1]) < 100, after);
    await a.free(x[0]);
    await b.free(x[1]);
  });
});
