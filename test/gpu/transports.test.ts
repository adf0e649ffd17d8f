/**
 * Every transport on two ranks (two GPUs, or in loopback on one: gpu-machine.ts), proven the way
 * nccl-tests proves NCCL, and compared byte for byte with the CPU reference. In loopback `nccl`
 * is refused by name, and its cases say so. Fails (does not skip) without a GPU.
 */
import { strict as assert } from 'node:assert';
import { NO_PTR } from '../../src/runtime/binding.js';
import { Runtime } from '../../src/runtime/runtime.js';
import { ArLink, LL_SERVE_IDLE_MICROS } from '../../src/runtime/link.js';
import { refusalThenRecovery } from '../support/refusal.js';
import { CapturedGraph } from '../../src/runtime/graph.js';
import { openTransport } from '../../src/runtime/transports/open.js';
import { TRANSPORTS, type Transport } from '../../src/runtime/transports/transport.js';
import { COLLECTIVE_OPS, backToBack, runCase, sweep } from '../support/transport-battery.js';
import { randomBf16, randomF32Ints } from '../support/random.js';
import { ModelOps } from '../../src/decode/model-ops.js';
import { LOOPBACK, PAIR, PAIR_NAME, gpuSuite, itLoopback } from '../support/gpu-machine.js';

gpuSuite();

describe(`transports on ${PAIR_NAME}`, function () {
  this.timeout(600_000);
  // Each transport gets its own runtime, so one transport's refusal cannot fail the others.
  let rt: Runtime, cpu: Runtime;
  let link: ArLink, cpuLink: ArLink;
  const openGpu = async (): Promise<void> => {
    rt = await Runtime.open({ backend: 'cuda', ...PAIR });
    link = await ArLink.open(rt);
    await link.reserve(3 * 1_048_576);
  };
  const closeGpu = async (): Promise<void> => {
    if (rt?.faults.length) console.log(`      faults: ${rt.faults.map((f) => f.message).join(' | ')}`);
    await link?.close().catch((e: Error) => console.log(`      link close: ${e.message}`));
    await rt?.close().catch((e: Error) => console.log(`      runtime close: ${e.message}`));
  };
  /** `body` on a fresh runtime whose link launches every `ll` join (the LL server off). */
  const withLaunchedLl = async (body: () => Promise<void>): Promise<void> => {
    await openGpu();
    try {
      await openTransport('ll', link);
      await link.setLlServe(0);
      await body();
    } finally {
      await closeGpu();
    }
  };
  before(async () => {
    cpu = await Runtime.open({ backend: 'cpu', cpuArenaBytes: 256 * 2 ** 20 });
    cpuLink = await ArLink.open(cpu);
    await cpuLink.reserve(1_048_576);
  });
  after(async () => {
    await cpuLink?.close();
    await cpu?.close();
  });

  it('loads NCCL from the system library', async () => {
    await openGpu();
    try {
      const v = await rt.ranks[0].control.call('ncclLoad');
      assert.ok(v >= 20000, `NCCL version ${v}`);
      console.log(`      NCCL ${v}`);
    } finally {
      await closeGpu();
    }
  });

  itLoopback(
    'refuses nccl in loopback by name (NCCL rejects one device twice in a communicator), before any NCCL call',
    async () => {
      await openGpu();
      try {
        await assert.rejects(
          openTransport('nccl', link),
          /the nccl transport cannot run in loopback \(both ranks on device 0\): NCCL refuses one device twice in a communicator \(ncclCommInitRank: ncclInvalidUsage\)/,
        );
        assert.equal(rt.failure, undefined, 'the refusal leaves the runtime usable');
        const t = await openTransport('push', link);
        await runCase(rt, t, { op: 'allReduce', n: 4099, rows: 1, inPlace: false, ops: 3 });
      } finally {
        await closeGpu();
      }
    },
  );

  for (const name of TRANSPORTS) {
    if (LOOPBACK && name === 'nccl') {
      describe(name, () =>
        it.skip('every nccl case [needs two devices: in loopback nccl is refused, tested above]', () => undefined),
      );
      continue;
    }
    describe(name, () => {
      let t: Transport;
      before(async () => {
        await openGpu();
        t = await openTransport(name, link);
        // The server is off by default (link.ts says why); these sweeps take its path.
        if (name === 'll') await link.setLlServe(LL_SERVE_IDLE_MICROS);
      });
      after(closeGpu);

      it('sweeps every op from 4 B to 4 MB, odd sizes, in place and out of place, strided gathers', async () => {
        assert.ok((await sweep(rt, t, 2 ** 21, 8)) > 500);
        assert.equal(rt.failure, undefined);
        // Eager LL joins up to 32 KB went through each rank's LL server, the larger ones by launch.
        if (name === 'll')
          for (const s of await link.llServeStats())
            assert.ok(s.jobs > 0 && s.launches > 0, `LL server ${JSON.stringify(s)}`);
      });

      it('10,000 back-to-back ops, then 2,000 of mixed ops and roots, every result checked', async () => {
        assert.equal(await backToBack(rt, t), 12_000);
        assert.equal(rt.failure, undefined);
      });

      it('moves the same bytes as the CPU reference', async () => {
        const ref = await openTransport(name === 'nccl' ? 'push' : name, cpuLink);
        for (const op of COLLECTIVE_OPS) {
          for (const n of [1, 4099, 65_537]) {
            const rows = op === 'allGather' || op === 'gather' ? 2 : 1;
            const part = op === 'allGather' || op === 'gather' ? n * rows : n;
            const inputs = Array.from({ length: 3 }, () => [
              randomF32Ints(part, 1 << 20),
              randomF32Ints(part, 1 << 20),
            ]);
            const c = { op, n, rows, inPlace: false, ops: 3 };
            const gpu = await runCase(rt, t, c, inputs);
            const host = await runCase(cpu, ref, c, inputs);
            for (const r of [0, 1]) {
              assert.ok(
                Buffer.from(gpu.outputs[r]!).equals(Buffer.from(host.outputs[r]!)),
                `${op} n=${n} rank ${r}: GPU and CPU reference bytes differ`,
              );
            }
          }
        }
      });

      it('replays a captured graph with an odd number of joins, back to back', async () => {
        const n = 4099;
        const [a, b] = rt.pair('the test');
        const x = [await a.alloc(n * 4), await b.alloc(n * 4)] as const;
        const src = await a.alloc(n * 4);
        const y = [await a.alloc(n * 4), await b.alloc(n * 4)] as const;
        const h0 = randomF32Ints(n, 8),
          h1 = randomF32Ints(n, 8),
          hs = randomF32Ints(n, 1000);
        await a.upload(x[0], h0);
        await b.upload(x[1], h1);
        await a.upload(src, hs);
        // Three all-reduces (an odd number of barrier rounds) and a broadcast per replay.
        const g = await CapturedGraph.capture(
          rt,
          () => {
            t.allReduce(x, n);
            t.allReduce(x, n);
            t.allReduce(x, n);
            t.broadcast(0, src, y, n);
          },
          t.graphMode,
        );
        const replays = 3;
        for (let i = 0; i < replays; i++) g.launch();
        a.fill(src, n, -1); // the input overwritten right after the joins are enqueued
        // And a second capture of the same joins, which must work as well as the first.
        const g2 = await CapturedGraph.capture(rt, () => t.allReduce(x, n), t.graphMode);
        g2.launch();
        await rt.drain();
        assert.equal(rt.failure, undefined, rt.failure?.message);
        const scale = 2 ** (3 * replays);
        for (const r of [0, 1]) {
          const got = await rt.pair('the test')[r]!.downloadF32(x[r]!, n);
          for (let i = 0; i < n; i++)
            assert.equal(got[i], (h0[i]! + h1[i]!) * scale, `${name} replayed all-reduce rank ${r} element ${i}`);
          const moved = await rt.pair('the test')[r]!.downloadF32(y[r]!, n);
          for (let i = 0; i < n; i++)
            assert.equal(moved[i], hs[i], `${name} replayed broadcast rank ${r} element ${i}`);
        }
        if (name === 'oneshot') assert.deepEqual(await link.barrierErrors(), [0, 0]);
        await g.destroy();
        await g2.destroy();
        for (const p of [x[0], src, y[0]]) await a.free(p);
        for (const p of [x[1], y[1]]) await b.free(p);
      });
    });
  }

  it('LL joins through the LL server give the bytes launched joins give, at and around its 32 KB limit; an idle server stops and comes back', async () => {
    await openGpu();
    try {
      const t = await openTransport('ll', link);
      const served = LL_SERVE_IDLE_MICROS;
      for (const op of COLLECTIVE_OPS) {
        for (const n of [1, 1000, 4096, 4097, 8192, 8193]) {
          const rows = op === 'allGather' || op === 'gather' ? 2 : 1;
          if (rows * n > 8194) continue;
          const inputs = Array.from({ length: 6 }, () => [
            randomF32Ints(n * rows, 1 << 20),
            randomF32Ints(n * rows, 1 << 20),
          ]);
          const c = { op, n, rows, inPlace: false, ops: 6 };
          await link.setLlServe(served);
          const jobs = (await link.llServeStats()).map((s) => s.jobs);
          const viaServer = await runCase(rt, t, c, inputs);
          const fits = rows * n <= 8192;
          for (const [r, s] of (await link.llServeStats()).entries())
            assert.equal(s.jobs - jobs[r]!, fits ? 6 : 0, `${op} n=${n}: rank ${r}'s server jobs`);
          await link.setLlServe(0);
          const launched = await runCase(rt, t, c, inputs);
          for (const r of [0, 1])
            assert.ok(
              Buffer.from(viaServer.outputs[r]!).equals(Buffer.from(launched.outputs[r]!)),
              `${op} n=${n} rank ${r}: served and launched bytes differ`,
            );
        }
      }
      // Idle for far longer than the server's bound: both grids stop, and the next joins start them again.
      await link.setLlServe(200);
      await runCase(rt, t, { op: 'allReduce', n: 999, rows: 1, inPlace: false, ops: 4 });
      const before = await link.llServeStats();
      await new Promise((r) => setTimeout(r, 50));
      await runCase(rt, t, { op: 'allReduce', n: 999, rows: 1, inPlace: false, ops: 4 });
      for (const [r, s] of (await link.llServeStats()).entries())
        assert.ok(
          s.launches > before[r]!.launches,
          `rank ${r}: the idle server was launched again (${before[r]!.launches} -> ${s.launches})`,
        );
      assert.equal(rt.failure, undefined);
      assert.deepEqual(await link.barrierErrors(), [0, 0]);
    } finally {
      await closeGpu();
    }
  });

  for (const serve of [true, false]) {
    it(`an LL join on one rank only (${serve ? 'LL server' : 'launched'}) writes 40043 within its bound; after a reset it works again`, async () => {
      await openGpu();
      try {
        await link.setLlServe(serve ? LL_SERVE_IDLE_MICROS : 0);
        await refusalThenRecovery(rt, link, 'll', 1000, (x) =>
          rt.ranks[0].ll(0, 1, 1000, NO_PTR, NO_PTR, NO_PTR, x[0], 1000),
        );
        for (const s of await link.llServeStats()) assert.equal(s.jobs > 0, serve, `LL server ${JSON.stringify(s)}`);
      } finally {
        await closeGpu();
      }
    });
  }

  itLoopback(
    'a launched LL join of 256 chunks leaves the other rank SMs for the products ahead of its half: no refusal, every byte arrives',
    () =>
      withLaunchedLl(async () => {
        const [a, b] = rt.pair('the loopback LL join');
        // The EP return at t = 4 on `bench`: 4 x 8 slots of 4096 values, 256 chunks. Rank 1's
        // products are `bench`'s Wq shape at t = 4, whose blocks each need an SM's registers.
        const n = 4 * 8 * 4096,
          K = 4096,
          cols = 4096,
          t = 4;
        const w = await b.alloc(K * cols * 2),
          x = await b.alloc(t * K * 4),
          y = await b.alloc(t * cols * 4),
          src = await b.alloc(n * 4),
          dst = await a.alloc(n * 4);
        await b.upload(w, randomBf16(K * cols));
        await b.upload(x, randomF32Ints(t * K, 1 << 10));
        const sent = randomF32Ints(n, 1 << 20);
        await b.upload(src, sent);
        a.fill(dst, n, -0.5);
        await rt.drain();
        // Rank 0's half first, so its grid is resident and polling before rank 1's stream reaches
        // the products (the spin holds it back); rank 1's half comes after them.
        a.ll(0, 1, n, NO_PTR, NO_PTR, NO_PTR, dst, n);
        b.spin(20_000);
        const ops = new ModelOps(b);
        for (let i = 0; i < 8; i++) ops.gemv(y, cols, x, K, w, cols, K, cols, t);
        b.ll(0, 1, n, src, NO_PTR, NO_PTR, NO_PTR, n);
        const t0 = performance.now();
        await rt.drain();
        const ms = performance.now() - t0;
        assert.deepEqual(await link.barrierErrors(), [0, 0], `the join was refused (${ms.toFixed(0)} ms)`);
        const got = await a.downloadF32(dst, n);
        assert.ok(
          got.every((v, i) => v === sent[i]),
          'rank 0 received every value rank 1 sent',
        );
        console.log(`      the join and rank 1's products done in ${ms.toFixed(1)} ms`);
        for (const p of [w, x, y, src]) await b.free(p);
        await a.free(dst);
      }),
  );

  it("a completion wait that times out reads the link's refusal words while a join still waits on the device", () =>
    withLaunchedLl(async () => {
      const [a] = rt.pair('the stall report');
      const x = await a.alloc(4000);
      await rt.drain();
      // Rank 1 never sends its half: rank 0's join polls for its whole bound, about a second.
      a.ll(0, 1, 1000, NO_PTR, NO_PTR, NO_PTR, x, 1000);
      // Read after the join's bound, the word would be 40043: 0 means the report did not wait.
      await assert.rejects(
        rt.waitCompleted(1, 0, rt.counter(1, 0) + 7, 10),
        /the tp link's refusal words read 0 on both ranks/,
        'the words as they were while the join waited, not after it',
      );
      assert.deepEqual(await link.barrierErrors(), [40043, 0]);
      await link.resetBarrier();
      await a.free(x);
    }));

  it('a one-shot launched on one rank only writes 40043 within its spin bound; after a reset it works again', async () => {
    await openGpu();
    try {
      const n = 1024;
      const stage = link.stageFor(n);
      await refusalThenRecovery(rt, link, 'oneshot', n, (x) =>
        rt.ranks[0].oneShot(
          NO_PTR,
          stage[0]!,
          stage[1]!,
          x[0],
          link.signal[0],
          link.signal[1],
          n,
          link.err[0],
          link.spinLimit,
          link.blocksFor(n),
        ),
      );
    } finally {
      await closeGpu();
    }
  });
});
