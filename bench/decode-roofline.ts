/**
 * The decode step against its floor, on one GPU (the unsharded walk): the card's read floor
 * measured first in the same run (a read-only kernel over 16 GiB, bench/../cu/read_floor.cu),
 * then each case's steps timed on the device (an event pair around each step on the stream) and
 * on the host, and each step's floor: its fewest bytes (bench/step-bytes.ts, the experts from
 * the step's own routing) over that read rate. `rooflinePct` is the floor over the step's time.
 *
 * Cases: t = 1 at positions 0-63, eagerly and from the step graph; t = 1 at two long positions
 * over a cache filled there (1024 and 4000 for `bench`); t = 2, 4 and 8 from the step graph
 * (each row its own sequence); and the kernel table: an eager t = 1 step with every kernel timed
 * alone. The routing of a timed step comes from the same step run again with route validation
 * (same tokens and positions, so the same routes), never from the timed run itself.
 *
 * On the CPU reference the suite runs `tiny` with few steps: a smoke run of this code.
 */
import { Runtime } from '../src/runtime/runtime.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import { DeviceWalk, mailboxBytesFor } from '../src/decode/device-walk.js';
import { presetByName, type ModelConfig } from '../src/decode/model-config.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../src/decode/decode-config.js';
import type { Progress } from '../src/cli/progress.js';
import { summarize } from '../src/cli/stats.js';
import { row, type Row } from './results-file.js';
import { presetFor } from './walk-run.js';
import { stepBytes } from './step-bytes.js';
import { kernelLines, type KernelStep } from './kernel-table.js';

const MAX_BATCH = 8;
const GiB = 2 ** 30;

interface Counts {
  steps: number;
  short: number;
  warm: number;
  floorBytes: number;
  floorReps: number;
}
const GPU: Counts = { steps: 64, short: 16, warm: 4, floorBytes: 16 * GiB, floorReps: 10 };
const CPU: Counts = { steps: 4, short: 2, warm: 1, floorBytes: 2 ** 24, floorReps: 2 };

interface CaseResult {
  device: number[];
  host: number[];
  floorMs: number[];
}

/** The steps of one case: row s starts from its own token, so a batch's rows route apart. */
async function runCase(
  walk: DeviceWalk,
  dc: DecodeConfig,
  t: number,
  positionsOf: (i: number) => number[],
  steps: number,
  warm: number,
  readGBs: number,
  label: string,
  progress: Progress,
): Promise<CaseResult> {
  await walk.prepare(dc);
  let tok = Array.from({ length: t }, (_, s) => (1 + 7 * s) % walk.cfg.vocab);
  const fed: Array<{ tokens: number[]; positions: number[] }> = [];
  const out: CaseResult = { device: [], host: [], floorMs: [] };
  for (let i = 0; i < warm + steps; i++) {
    const positions = positionsOf(i);
    const t0 = performance.now();
    const { next } = await walk.step(tok, positions, dc, false);
    const host = performance.now() - t0;
    const us = await walk.stepDeviceUs();
    if (us === undefined) throw new Error(`${label}: the step was not timed on the device`);
    if (i >= warm) {
      out.host.push(host);
      out.device.push(us / 1000);
      fed.push({ tokens: tok, positions });
    }
    tok = next;
    progress.tick(label, i + 1, warm + steps);
  }
  // The same steps again, validated: their routes (the walk is deterministic).
  const validated: DecodeConfig = { ...dc, validate: true, stepGraph: false };
  await walk.prepare(validated);
  for (const f of fed) {
    const { routes } = await walk.step(f.tokens, f.positions, validated, false);
    await walk.stepDeviceUs();
    out.floorMs.push((stepBytes(walk.cfg, f.positions, routes!).total / (readGBs * 1e9)) * 1e3);
  }
  return out;
}

/** The kernel table's steps of t rows: eager, validated (for the routes), every kernel timed alone. */
async function kernelSteps(
  walk: DeviceWalk,
  t: number,
  steps: number,
  warm: number,
  progress: Progress,
): Promise<KernelStep[]> {
  const dc: DecodeConfig = { ...DEFAULT_CONFIG, validate: true };
  await walk.prepare(dc);
  await walk.timeKernels(true);
  const out: KernelStep[] = [];
  try {
    let tok = Array.from({ length: t }, (_, s) => 1 + s);
    for (let i = 0; i < warm + steps; i++) {
      const positions = tok.map(() => i);
      const { next, routes } = await walk.step(tok, positions, dc, false);
      await walk.stepDeviceUs();
      const spans = await walk.kernelTimes();
      if (i >= warm) out.push({ spans, positions, routes: routes! });
      tok = next;
      progress.tick(`decode kernel table t=${t}`, i + 1, warm + steps);
    }
  } finally {
    await walk.timeKernels(false);
  }
  return out;
}

export async function benchRoofline(backend: BackendKind, progress: Progress): Promise<Row[]> {
  const preset = presetFor(backend);
  const cfg: ModelConfig = presetByName(preset);
  const n = backend === 'cuda' ? GPU : CPU;
  const rows: Row[] = [];
  const rt = await Runtime.open({
    backend,
    devices: [0],
    mailboxBytes: mailboxBytesFor(cfg, MAX_BATCH),
    ...(backend === 'cpu' ? { cpuArenaBytes: 256 * 2 ** 20 } : {}),
  });
  try {
    // Before the weights take the card's memory.
    const gbps: number[] = await rt.ranks[0].control.call('readFloor', n.floorBytes, n.floorReps);
    const readGBs = summarize(gbps).median;
    rows.push(
      row(
        {
          suite: 'decode',
          op: 'read floor',
          transport: 'read kernel',
          bytes: n.floorBytes,
          preset: null,
          unit: 'GB/s',
          metric: 'device',
          method: `a read-only kernel over ${n.floorBytes / GiB} GiB filled with 0x3c bytes, replayed from a graph; one sample = one read, timed by an event pair`,
        },
        gbps,
      ),
    );
    const walk = await DeviceWalk.load(rt, undefined, cfg, 'unsharded', MAX_BATCH, (d, t) =>
      progress.tick('weights unsharded', d, t),
    );
    try {
      const m = await rt.ranks[0]!.control.call('memInfo');
      rows.push(
        row(
          {
            suite: 'decode',
            op: 'memory',
            transport: 'unsharded',
            bytes: rt.ranks[0]!.ordinal,
            preset,
            unit: 'GiB',
            metric: 'device',
            method: `cudaMemGetInfo total - free on device ${rt.ranks[0]!.ordinal}, weights and caches of ${MAX_BATCH} rows loaded`,
          },
          [(m.total - m.free) / 2 ** 30],
        ),
      );
      await walk.timeSteps(true);
      const P = cfg.maxPos;
      const long = P >= 4096 ? [1024, 4000] : [Math.floor(P / 2), P - 1];
      const graphed: DecodeConfig = { ...DEFAULT_CONFIG, stepGraph: true };
      const first = (i: number): number => Math.max(0, i - n.warm);
      const cases: Array<{
        name: string;
        dc: DecodeConfig;
        t: number;
        positions: string;
        at: (i: number) => number[];
        steps: number;
        fill?: boolean;
      }> = [
        {
          name: 'unsharded',
          dc: DEFAULT_CONFIG,
          t: 1,
          positions: `0-${n.steps - 1}`,
          at: (i) => [first(i)],
          steps: n.steps,
        },
        {
          name: 'unsharded+graph',
          dc: graphed,
          t: 1,
          positions: `0-${n.steps - 1}`,
          at: (i) => [first(i)],
          steps: n.steps,
        },
        // A long position reads cache rows no step of the run wrote: they are filled first (the
        // attention's bytes and arithmetic do not depend on what the rows hold).
        ...long.map((p) => ({
          name: 'unsharded+graph',
          dc: graphed,
          t: 1,
          positions: `${p}`,
          at: () => [p],
          steps: n.short,
          fill: true,
        })),
        ...[2, 4, 8].map((t) => ({
          name: 'unsharded+graph',
          dc: graphed,
          t,
          positions: `0-${n.short - 1}`,
          at: (i: number) => Array<number>(t).fill(first(i)),
          steps: n.short,
        })),
      ];
      for (const c of cases) {
        if (c.fill) walk.fillCache(0.01, P);
        const label = `decode ${c.name} t=${c.t} at ${c.positions}`;
        let r: CaseResult;
        try {
          r = await runCase(walk, c.dc, c.t, c.at, c.steps, n.warm, readGBs, label, progress);
        } catch (e) {
          // One case that cannot run (a refused step graph, say) leaves the others' rows.
          console.error(`decode: ${label}: ${(e as Error).message}`);
          // A step that failed after its span closed leaves the span unread: drop it.
          await walk.stepDeviceUs().catch(() => undefined);
          continue;
        }
        const refused = c.dc.stepGraph ? walk.stepGraphStats().refused.filter((x) => x.t === c.t) : [];
        if (refused.length > 0) {
          console.error(`decode: ${label}: the step graph was refused (${refused[0]!.reason}); no row`);
          continue;
        }
        const floorMs = summarize(r.floorMs).median;
        const common = {
          suite: 'decode',
          op: 'step',
          transport: c.name,
          bytes: 0,
          preset,
          unit: 'ms',
          t: c.t,
          positions: c.positions,
          floorMs,
        };
        const dev = summarize(r.device).median;
        rows.push(
          row(
            {
              ...common,
              metric: 'device',
              rooflinePct: (100 * floorMs) / dev,
              tokensPerS: (1000 * c.t) / dev,
              method: `device time of one step on its stream (an event pair from its first record to its last); floor: the step's bytes (its own routing) at the read floor's median, ${readGBs.toFixed(0)} GB/s`,
            },
            r.device,
          ),
          row(
            {
              ...common,
              metric: 'host',
              rooflinePct: (100 * floorMs) / summarize(r.host).median,
              tokensPerS: (1000 * c.t) / summarize(r.host).median,
              method: 'main-thread wall time of one step: enqueue it, wait for its tokens',
            },
            r.host,
          ),
        );
      }
      await walk.timeSteps(false);
      // t = 1 for the step's shape, t = 8 for where a batch's time goes.
      for (const t of [1, MAX_BATCH])
        for (const line of kernelLines(cfg, await kernelSteps(walk, t, n.short, n.warm, progress))) {
          const us = summarize(line.us).median;
          rows.push(
            row(
              {
                suite: 'decode',
                op: 'kernel',
                transport: line.kernel,
                bytes: summarize(line.bytes).median,
                preset,
                unit: 'us',
                metric: 'device',
                t,
                positions: `0-${n.short - 1}`,
                launches: line.launches,
                gbps: summarize(line.bytes).median / (us * 1000),
                method:
                  'device µs a step of every launch of this kernel, each alone between an event pair (eager, no overlap between kernels); bytes: its weights once (experts: the distinct ones routed) and its activations',
              },
              line.us,
            ),
          );
        }
    } finally {
      await walk.close();
    }
  } finally {
    await rt.close();
  }
  return rows;
}
