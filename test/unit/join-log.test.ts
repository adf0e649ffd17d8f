/**
 * The join log (workers/join-log.ts): each worker's times of its joins that wait on the device,
 * paired across the ranks by order, and what a refusal or a timed-out wait says from them; on the
 * CPU reference, a join whose second half is enqueued late is named with how late, and the
 * barrier's reset pairs the ranks afresh.
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
  it('counts, reads back each join, loses only the oldest past its capacity, and realigns', () => {
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

  it('names the join whose halves were enqueued furthest apart, and which rank was late', () => {
    const [a, b] = logs([10, 20, 30, 40], [10.01, 20.02, 330, 40.03]);
    assert.equal(
      describeJoinHalves([a, b]),
      "of joins 0 to 3, the halves furthest apart were join 2's: rank 1 enqueued its half 300 ms after rank 0 " +
        '(the median gap 0.03 ms)',
    );
    assert.match(describeJoinHalves([b, a]), /join 2's: rank 0 enqueued its half 300 ms after rank 1/);
    assert.match(describeJoinHalves([a, b], 3), /^of joins 3 to 3, the halves furthest apart were join 3's/);
  });

  it('names the rank whose half is not enqueued yet, and for how long', () => {
    const [a, b] = logs([10, 20, 30], [10, 20]);
    assert.equal(
      describeJoinHalves([a, b], 0, 1030),
      "rank 1 has enqueued 2 joins that wait on the device and rank 0 3: 1 of rank 1's halves not enqueued " +
        "(the newest, unless one was left out), rank 0's join 2 enqueued 1000 ms ago; of joins 0 to 1, the " +
        "halves furthest apart were join 0's: rank 0 enqueued its half 0.00 ms after rank 1 (the median gap 0.00 ms)",
    );
    assert.equal(describeJoinHalves(logs([], []), 0), '', 'nothing to say where no join was enqueued');
    assert.equal(describeJoinHalves([a]), '', 'one rank pairs nothing');
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

  it("is named in the logs with its delay; a timed-out wait says which rank's half is missing", async () => {
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

    // Rank 0's half now, rank 1's 300 ms later, past a bound of about 50 ms.
    await link.setSpinLimit(1e8);
    a.ll(0, 1, n, NO_PTR, NO_PTR, NO_PTR, x[0], n);
    await assert.rejects(
      rt.waitCompleted(1, 0, 1 << 30, 100),
      /rank 1 has enqueued 1 joins that wait on the device and rank 0 2: 1 of rank 1's halves not enqueued \(the newest, unless one was left out\), rank 0's join 1 enqueued \d+(\.\d+)? ms ago/,
    );
    await sleep(300);
    b.ll(0, 1, n, NO_PTR, NO_PTR, NO_PTR, x[1], n);
    await rt.drain();
    const words = await link.barrierErrors();
    assert.equal(words[0], 40043, "rank 0 waited out its bound for rank 1's half");
    const said = describeJoinHalves(rt.joinLogs);
    const late = /join 1's: rank 1 enqueued its half (\d+(?:\.\d+)?) ms after rank 0/.exec(said);
    assert.ok(late, said);
    assert.ok(Number(late[1]) >= 300, `the half was at least 300 ms late: ${said}`);

    // After the reset the ranks pair afresh, and a join of both halves at once is close.
    await link.resetBarrier();
    await link.setSpinLimit(2e9);
    assert.equal(describeJoinHalves(rt.joinLogs), '');
    ll.allReduce(x, n);
    await rt.drain();
    assert.deepEqual(await link.barrierErrors(), [0, 0]);
    const gap = /join 0's: rank \d enqueued its half (\d+(?:\.\d+)?) ms after/.exec(describeJoinHalves(rt.joinLogs));
    assert.ok(gap && Number(gap[1]) < 100, describeJoinHalves(rt.joinLogs));
    await a.free(x[0]);
    await b.free(x[1]);
  });
});
