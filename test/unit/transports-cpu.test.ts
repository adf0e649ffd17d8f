/**
 * Every transport the CPU reference can run, proven the way nccl-tests proves NCCL: a size sweep
 * from 4 B to 4 MB with odd sizes, in place and out of place, strided gathers, 10,000
 * back-to-back ops per transport with every result checked, and the one-shot's refusal. On two
 * emulated devices, and again in loopback (both ranks on one; the sweep to 256 KB).
 */
import { strict as assert } from 'node:assert';
import { asDevicePtr, type DevicePtr, NO_PTR } from '../../src/runtime/binding.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { ArLink } from '../../src/runtime/link.js';
import { CapturedGraph } from '../../src/runtime/graph.js';
import { openTransport } from '../../src/runtime/transports/open.js';
import type { Transport, TransportName } from '../../src/runtime/transports/transport.js';
import { SWEEP_FLOATS, backToBack, runCase, sweep } from '../support/transport-battery.js';
import { refusalThenRecovery } from '../support/refusal.js';
import { PAIR_MODES } from '../support/pair-modes.js';

const CPU_TRANSPORTS: TransportName[] = ['host', 'peer', 'push', 'oneshot', 'll'];

for (const mode of PAIR_MODES)
  describe(`transports on the CPU reference (${mode.name})`, function () {
    this.timeout(300_000);
    let rt: Runtime;
    let link: ArLink;
    before(async () => {
      rt = await Runtime.open({ backend: 'cpu', cpuArenaBytes: 384 * 2 ** 20, ...mode.options });
      link = await ArLink.open(rt);
      await link.reserve(2 * 1_048_576 * 3);
    });
    after(async () => {
      await link?.close();
      await rt?.close();
    });

    for (const name of CPU_TRANSPORTS) {
      describe(name, () => {
        let t: Transport;
        before(async () => {
          t = await openTransport(name, link);
        });

        it(`sweeps every op from 4 B to ${mode.loopback ? '256 KB' : '4 MB'}, odd sizes, in place and out of place, strided gathers`, async () => {
          // Loopback's sweep stops at 256 KB (the GPU suite sweeps it to 4 MB): it tests the ranks
          // sharing one device, which the large sizes add nothing to here but time.
          if (mode.loopback)
            assert.ok(
              (await sweep(
                rt,
                t,
                2 ** 17,
                6,
                SWEEP_FLOATS.filter((n) => n <= 65_537),
              )) > 500,
            );
          else assert.ok((await sweep(rt, t, 2 ** 19, 6)) > 500);
          assert.equal(rt.failure, undefined);
        });

        it('10,000 back-to-back ops, then 2,000 of mixed ops and roots, every result checked', async () => {
          assert.equal(await backToBack(rt, t), 12_000);
          assert.equal(rt.failure, undefined);
        });

        it('replays a captured sequence with an odd number of joins', async () => {
          const n = 1001;
          const [a, b] = rt.pair('the test');
          const x = [await a.alloc(n * 4), await b.alloc(n * 4)] as const;
          const y = [await a.alloc(n * 4), await b.alloc(n * 4)] as const;
          a.fill(x[0], n, 1);
          b.fill(x[1], n, 2);
          const g = await CapturedGraph.capture(rt, () => {
            t.allReduce(x, n, y); // y = 3
            t.broadcast(0, y[0], y, n);
            t.allReduce(y, n); // y = 6
          });
          for (let i = 0; i < 5; i++) g.launch();
          await rt.drain();
          for (const r of [0, 1])
            assert.ok((await rt.pair('the test')[r]!.downloadF32(y[r]!, n)).every((v) => v === 6));
          await g.destroy();
        });
      });
    }

    it('refuses sizes that are not whole f32 elements, and ops larger than the reservation', async () => {
      const t = await openTransport('oneshot', link);
      assert.throws(() => t.allReduce([NO_PTR, NO_PTR], 2.5), /whole number of f32 elements/);
      assert.throws(
        () => t.allReduce([asDevicePtr(1 << 20), asDevicePtr(1 << 20)], 1e8),
        /staging holds \d+ floats and this op needs 100000000; call `await link.reserve\(100000000\)` first/,
      );
      await assert.rejects(
        openTransport('nccl', link),
        mode.loopback
          ? /the nccl transport cannot run in loopback \(both ranks on device 0\): NCCL refuses one device twice in a communicator/
          : /the nccl transport needs the CUDA backend and libnccl\.so\.2/,
      );
      await assert.rejects(
        openTransport('smoke' as TransportName, link),
        /unknown transport 'smoke': choose one of host, peer, push, oneshot, ll, nccl/,
      );
      const ll = await openTransport('ll', link);
      const over = link.llMaxValues + 2;
      assert.throws(
        () => ll.allReduce([NO_PTR, NO_PTR], over),
        new RegExp(
          `one low-latency join moves at most ${link.llMaxValues} values and this op needs ${over}; split it or use another transport`,
        ),
      );
      assert.throws(
        () => ll.allGather([NO_PTR, NO_PTR], [NO_PTR, NO_PTR], link.llMaxValues / 2, 3),
        /one low-latency join moves at most/,
      );
    });

    it('refuses a bad LL server idle bound, and the reference reports no server jobs whatever the setting', async () => {
      await assert.rejects(link.setLlServe(-1), /link\.setLlServe: idleMicros must be a non-negative integer, got -1/);
      await assert.rejects(link.setLlServe(0.5), /idleMicros must be a non-negative integer, got 0\.5/);
      const before = link.llServeIdleMicros;
      await link.setLlServe(250);
      assert.equal(link.llServeIdleMicros, 250);
      const ll = await openTransport('ll', link);
      const [a, b] = rt.pair('the test');
      const x = [await a.alloc(64), await b.alloc(64)] as const;
      a.fill(x[0], 16, 1);
      b.fill(x[1], 16, 2);
      ll.allReduce(x, 16);
      await rt.drain();
      assert.deepEqual([...(await a.downloadF32(x[0], 16))], new Array(16).fill(3));
      assert.deepEqual(await link.llServeStats(), [
        { jobs: 0, launches: 0 },
        { jobs: 0, launches: 0 },
      ]);
      await link.setLlServe(before);
      await a.free(x[0]);
      await b.free(x[1]);
    });

    it('an LL join times itself on the rank asked, for that one op: start, then end, on the device clock', async () => {
      const ll = await openTransport('ll', link);
      const [a, b] = rt.pair('the test');
      const n = 777;
      const src = await a.alloc(n * 4),
        dst = [await a.alloc(n * 4), await b.alloc(n * 4)] as const;
      const stamps = [await a.alloc(16), await b.alloc(16)] as const;
      for (const [r, p] of stamps.entries()) rt.pair('the test')[r]!.memset(p, 0, 16);
      a.fill(src, n, 3);
      const clock = async (r: number): Promise<[bigint, bigint]> => {
        const v = new BigUint64Array((await rt.pair('the test')[r]!.download(stamps[r]!, 16)).buffer.slice(0));
        return [v[0]!, v[1]!];
      };
      ll.timeNext!(1, stamps[1]);
      ll.broadcast(0, src, dst, n);
      await rt.drain();
      const [start, end] = await clock(1);
      assert.ok(start > 0n && end >= start, `rank 1 timed its join: ${start} .. ${end}`);
      assert.deepEqual(await clock(0), [0n, 0n], 'rank 0 was not asked');
      assert.ok(
        (await b.downloadF32(dst[1], n)).every((v) => v === 3),
        'the join still moved its values',
      );
      // The request is spent: the next op times nothing.
      ll.allReduce(dst, n);
      await rt.drain();
      assert.deepEqual(await clock(1), [start, end]);
      assert.throws(() => ll.timeNext!(2, stamps[1]), /timeNext: rank must be 0 or 1, got 2/);
    });

    it('an LL join launched on one rank only writes 40043 within its bound; after a reset it works again', async () => {
      await refusalThenRecovery(rt, link, 'll', 1000, (x) =>
        rt.ranks[0].ll(0, 1, 1000, NO_PTR, NO_PTR, NO_PTR, x[0], 1000),
      );
    });

    it("a completion wait that times out says the tp link's refusal words", async () => {
      const [a] = rt.pair('the stall report');
      const x = await a.alloc(4000);
      // A value the counter never reaches: the wait times out at once, as a stalled step's would.
      const stall = (): Promise<void> => rt.waitCompleted(1, 0, rt.counter(1, 0) + 7, 10);
      await assert.rejects(stall(), /the tp link's refusal words read 0 on both ranks: no join has refused/);
      await link.setSpinLimit(2e6);
      a.ll(0, 1, 1000, NO_PTR, NO_PTR, NO_PTR, x, 1000);
      await rt.drain();
      await assert.rejects(
        stall(),
        /the tp link's refusal words read 40043 on rank 0 and 0 on rank 1: a join refused, and until the barrier's reset/,
      );
      await link.resetBarrier();
      await link.setSpinLimit(2e9);
      await assert.rejects(stall(), /read 0 on both ranks/);
      await a.free(x);
    });

    it('a one-shot launched on one rank only writes 40043 within its bound; after a reset it works again', async () => {
      const stage = link.stageFor(64);
      await refusalThenRecovery(rt, link, 'oneshot', 64, (x) =>
        rt.ranks[0].oneShot(
          NO_PTR,
          stage[0]!,
          stage[1]!,
          x[0],
          link.signal[0],
          link.signal[1],
          64,
          link.err[0],
          link.spinLimit,
          1,
        ),
      );
    });
  });

describe('the battery and the reference catch broken transports', function () {
  this.timeout(60_000);
  let rt: Runtime;
  let link: ArLink;
  before(async () => {
    rt = await Runtime.open({ backend: 'cpu' });
    link = await ArLink.open(rt);
  });
  after(async () => {
    await link?.close();
    await rt?.close();
  });

  it('a transport that drops the peer push fails the battery', async () => {
    const lazy: Transport = {
      name: 'push',
      graphMode: 'multi-device',
      broadcast: (from, src, dst, n) => {
        if (dst[from] !== src) rt.pair('the test')[from]!.push(src, dst[from]!, n);
      },
      allGather: () => undefined,
      gather: () => undefined,
      allReduce: () => undefined,
    };
    await assert.rejects(
      runCase(rt, lazy, { op: 'broadcast', n: 9, rows: 1, inPlace: false, ops: 2 }),
      /broadcast n=9 .* rank 1 element 0: got NaN/,
    );
  });

  it('a push without the write-after-write edge is refused by the CPU reference', async () => {
    const { MovementTransport, kernelMover } = await import('../../src/runtime/transports/movement.js');
    class NoEdge extends MovementTransport {
      override broadcast(from: number, src: DevicePtr, dst: readonly [DevicePtr, DevicePtr], n: number): void {
        this.link.ranks[from]!.push(src, dst[1 - from]!, n); // no waitForConsumer
        this.link.publish(from, 1 - from);
      }
    }
    const t = new NoEdge('push', link, kernelMover);
    const [a, b] = rt.pair('the test');
    const src = await a.alloc(256),
      dst = await b.alloc(256);
    await a.control.call('enablePeer', 1);
    b.fill(dst, 64, 0); // the consumer's own pending write
    // Make sure rank 0's push is enqueued after it, so only the missing edge is at fault.
    a.ring.push(0, [], b.ring.view.head());
    try {
      t.broadcast(0, src, [src, dst], 64);
    } catch (e) {
      // The push refused before the broadcast's next record was published: the producer refuses that one.
      assert.equal((e as { code?: string }).code, 'ERR_RING_FAULTED');
    }
    const deadline = Date.now() + 5000;
    const waw = (): boolean => rt.faults.some((f) => (f as Error & { code?: string }).code === 'ERR_ORDER_WAW');
    while (!waw()) {
      assert.ok(
        Date.now() < deadline,
        `no write-after-write refusal; faults: ${rt.faults.map((f) => f.message).join(' | ')}`,
      );
      await new Promise((r) => setTimeout(r, 5));
    }
  });
});
