/**
 * Seed 003's parent graph on the CPU reference: a launch issues the parts with one event per edge
 * of the graph, so what the graph leaves unordered is unordered here too and the reference refuses
 * a part that needed an edge the graph lacks.
 */
import { strict as assert } from 'node:assert';
import { Runtime } from '../../src/runtime/runtime.js';
import { ParentGraph, type ParentGraphParts } from '../../src/runtime/parent-graph.js';
import { randomF32Ints } from '../support/random.js';

const N = 257; // floats per buffer: odd, so no size is a power of two

describe('EP parent graph (CPU reference)', function () {
  this.timeout(60_000);
  let rt: Runtime | undefined;
  afterEach(async () => { await rt?.close().catch(() => undefined); rt = undefined; });

  async function setup(): Promise<{ rt: Runtime; a0: number[]; b1: number[]; parts: (over?: Partial<ParentGraphParts>) => ParentGraphParts }> {
    rt = await Runtime.open({ backend: 'cpu', handshakeTimeoutMs: 1000 });
    const [a, b] = rt.ranks;
    // Rank 0: four tx sources, its own result, the returned part, the post output.
    const a0 = await Promise.all(Array.from({ length: 7 }, () => a.alloc(N * 4)));
    // Rank 1: four tx destinations, its result.
    const b1 = await Promise.all(Array.from({ length: 5 }, () => b.alloc(N * 4)));
    const parts = (over: Partial<ParentGraphParts> = {}): ParentGraphParts => ({
      tx: [0, 1, 2, 3].map((i) => ({ src: a0[i]!, dst: b1[i]!, bytes: N * 4 })),
      // owner: a0[4] = a0[0] + a0[1]
      owner: () => { a.copy(a0[4]!, a0[0]!, N * 4); a.axpy(a0[4]!, a0[1]!, N, 1); },
      // peer: b1[4] = b1[0] + 2·b1[2] + b1[3] (it reads three of the four copies)
      peer: () => { b.copy(b1[4]!, b1[0]!, N * 4); b.axpy(b1[4]!, b1[2]!, N, 2); b.axpy(b1[4]!, b1[3]!, N, 1); },
      rx: { src: b1[4]!, dst: a0[5]!, bytes: N * 4 },
      // post: a0[6] = owner's + returned
      post: () => { a.copy(a0[6]!, a0[4]!, N * 4); a.axpy(a0[6]!, a0[5]!, N, 1); },
      ...over,
    });
    return { rt, a0, b1, parts };
  }

  it('replays the seed shape: every launch computes owner + peer halves from fresh inputs', async () => {
    const { rt, a0, parts } = await setup();
    const g = await ParentGraph.build(rt, parts());
    const [a] = rt.ranks;
    for (let round = 0; round < 5; round++) {
      const x = [0, 1, 2, 3].map(() => randomF32Ints(N, 1000));
      for (let i = 0; i < 4; i++) await a.upload(a0[i]!, x[i]!);
      await a.upload(a0[6]!, new Float32Array(N).fill(NaN)); // poisoned
      g.launch();
      await rt.drain();
      assert.equal(rt.failure, undefined, String(rt.failure));
      const got = await a.downloadF32(a0[6]!, N);
      for (let j = 0; j < N; j++) {
        const want = x[0]![j]! + x[1]![j]! + (x[0]![j]! + 2 * x[2]![j]! + x[3]![j]!);
        assert.equal(got[j], want, `round ${round} element ${j}`);
      }
    }
    await g.destroy();
    assert.throws(() => g.launch(), /after destroy/);
  });

  it('refuses a peer half that writes what the owner half writes: the graph has no edge between them', async () => {
    const { rt, a0, parts } = await setup();
    const [, b] = rt.ranks;
    const fault = new Promise<Error & { code?: string }>((r) => rt.onFault(r));
    await rt.ranks[0].control.call('enablePeer', 1);
    await b.control.call('enablePeer', 0);
    const g = await ParentGraph.build(rt, parts({ peer: () => { b.copy(a0[4]!, a0[0]!, N * 4); } }));
    g.launch();
    const f = await fault;
    assert.equal(f.code, 'ERR_ORDER_WAW', f.message);
  });

  it('refuses bad parts by name before anything is enqueued', async () => {
    const { rt, parts } = await setup();
    const p = parts();
    await assert.rejects(ParentGraph.build(rt, { ...p, tx: p.tx.slice(0, 3) }), /4 tx copies \(xq, xs, ids, weights\), got 3/);
    await assert.rejects(ParentGraph.build(rt, { ...p, rx: { ...p.rx, bytes: 0 } }), /copy 4 needs a positive byte count, got 0/);
  });
});
