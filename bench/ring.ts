/**
 * `ring`: what one join costs the main thread. A join is one record to each worker; each worker
 * enqueues one kernel for it; the join is done when both have published "enqueued up to" its
 * record. Host time per join, measured by the main thread's clock (performance.now), one sample
 * per join.
 *
 * Rows:
 * - `join-kernel`: each worker launches one fill kernel (the figure the target is about);
 * - `join-kernel-one`: only worker 0 launches, worker 1 takes a no-op: against `join-kernel`, what
 *   two workers launching at the same moment cost each other (a lock in the driver, if any);
 * - `join-nop`: the same handshake with no launch (the ring's own cost);
 * - `direct-kernel`: the main thread launching both kernels itself through the addon, for
 *   comparison (on two streams of device 0: a thread binds one device in this addon);
 * - `direct-kernel-one`: one launch a sample from the main thread: the launch alone.
 */
import { loadBinding } from '../src/runtime/binding.js';
import { Runtime } from '../src/runtime/runtime.js';
import { placementNote, row, type Row } from './results-file.js';
import type { Progress } from '../src/cli/progress.js';
import { pairOf, type SuiteContext } from './suite-context.js';

const N_FLOATS = 1024;

export async function benchRing(ctx: SuiteContext): Promise<Row[]> {
  const { backend, joins, progress } = ctx;
  const rows: Row[] = [];
  const rt = await Runtime.open({
    backend,
    ...pairOf(ctx, 'ring'),
    peerAccess: false,
    spinMicros: Number(process.env.MEMRA_BENCH_SPIN_US ?? 2000),
  });
  try {
    const [a, b] = rt.pair('the ring suite');
    const pa = await a.alloc(N_FLOATS * 4),
      pb = await b.alloc(N_FLOATS * 4);
    const measure = (label: string, launch: boolean, peerLaunches = launch): number[] => {
      const samples = new Array<number>(joins);
      for (let i = -joins / 4; i < joins; i++) {
        // the first quarter warms up
        const t0 = performance.now();
        const s0 = launch ? a.fill(pa, N_FLOATS, i) : a.nop();
        const s1 = peerLaunches ? b.fill(pb, N_FLOATS, i) : b.nop();
        while (!(a.enqueued(s0) && b.enqueued(s1))) {
          /* spin: a sleeping wait costs more than the join */
        }
        if (i >= 0) samples[i] = (performance.now() - t0) * 1000;
        if ((i & 4095) === 0) progress.tick(label, Math.max(0, i), joins);
      }
      progress.tick(label, joins, joins);
      return samples;
    };
    const fields = { suite: 'ring', transport: 'ring', bytes: N_FLOATS * 4, unit: 'us', preset: null };
    rows.push(
      row(
        {
          ...fields,
          op: 'join-kernel',
          method: `host clock per join: a record to each worker, each launches one kernel, until both published enqueued; ${placementNote(rt.placement)}`,
        },
        measure('join-kernel', true),
      ),
    );
    rows.push(
      row(
        {
          ...fields,
          op: 'join-kernel-one',
          method: `host clock per join: a record to each worker, worker 0 launches one kernel and worker 1 none, until both published enqueued; ${placementNote(rt.placement)}`,
        },
        measure('join-kernel-one', true, false),
      ),
    );
    rows.push(
      row(
        {
          ...fields,
          op: 'join-nop',
          method: `host clock per join: a record to each worker, no launch, until both published enqueued; ${placementNote(rt.placement)}`,
        },
        measure('join-nop', false),
      ),
    );
    await rt.drain();
  } finally {
    await rt.close();
  }
  if (backend === 'cuda') rows.push(direct(joins, progress, 2), direct(joins, progress, 1));
  return rows;
}

function direct(joins: number, progress: Progress, launches: 1 | 2): Row {
  const op = launches === 2 ? 'direct-kernel' : 'direct-kernel-one';
  const b = loadBinding();
  b.bindDevice(0);
  try {
    const s0 = b.streamCreate(),
      s1 = b.streamCreate();
    const p0 = b.malloc(N_FLOATS * 4),
      p1 = b.malloc(N_FLOATS * 4);
    const samples = new Array<number>(joins);
    for (let i = -joins / 4; i < joins; i++) {
      const t0 = performance.now();
      b.launchFillF32(p0, N_FLOATS, i, s0);
      if (launches === 2) b.launchFillF32(p1, N_FLOATS, i, s1);
      if (i >= 0) samples[i] = (performance.now() - t0) * 1000;
      if ((i & 4095) === 0) progress.tick(op, Math.max(0, i), joins);
    }
    progress.tick(op, joins, joins);
    b.streamSynchronize(s0);
    b.streamSynchronize(s1);
    return row(
      {
        suite: 'ring',
        op,
        transport: 'none',
        bytes: N_FLOATS * 4,
        unit: 'us',
        preset: null,
        method:
          launches === 2
            ? 'host clock per join: the main thread launches both kernels itself (two streams of device 0)'
            : 'host clock per launch: the main thread launches one kernel (device 0)',
      },
      samples,
    );
  } finally {
    b.releaseDevice();
  }
}
