/**
 * `decode`: the `bench` model on the two-H200 machine: one GPU unsharded against its roofline
 * (bench/decode-roofline.ts), two GPUs with each transport, and the mixed config in bench/configs/.
 * On a machine of one GPU, the unsharded rows alone; with --loopback the sharded rows too, both
 * ranks on one device and the file labelled so (bench/run.ts). One sample = one step's main-thread
 * wall time (enqueue the whole walk, wait for the tokens in the mailbox), so it includes every
 * kernel and join on the device plus the host's enqueue.
 *
 * The joins' cost per token is measured by difference: the same sharded walk with a transport
 * that moves nothing (wrong numbers, same kernels) is timed step for step, and each variant's
 * samples are paired with it by step index (same positions, so the same attention lengths).
 *
 * On the CPU reference the suite runs `tiny` (a smoke run of this code, not a measurement).
 */
import type { Runtime } from '../src/runtime/runtime.js';
import { TRANSPORTS, type Transport } from '../src/runtime/transports/transport.js';
import { presetByName } from '../src/decode/model-config.js';
import { DEFAULT_CONFIG, loadDecodeConfig, type DecodeConfig } from '../src/decode/decode-config.js';
import type { Progress } from '../src/cli/progress.js';
import { row, type Row } from './results-file.js';
import { presetFor, stepRows, timeSteps, withWalk } from './walk-run.js';
import { benchProfileOverhead } from './profile-overhead.js';
import { benchRoofline } from './decode-roofline.js';
import type { DeviceWalk } from '../src/decode/device-walk.js';
import type { SuiteContext } from './suite-context.js';

/** Moves nothing: the walk's kernels without its joins. */
const NO_JOINS: Transport = {
  name: 'll',
  graphMode: 'per-rank',
  broadcast: () => undefined,
  allGather: () => undefined,
  gather: () => undefined,
  allReduce: () => undefined,
};

export async function benchDecode(ctx: SuiteContext, progress: Progress): Promise<Row[]> {
  const { backend } = ctx;
  const preset = presetFor(backend);
  const rows: Row[] = [];
  const base = { suite: 'decode', op: 'step', bytes: 0, preset, unit: 'ms', metric: 'host' };
  const method = 'main-thread wall time of one t=1 step: enqueue the walk, wait for its tokens';
  const memory = async (rt: Runtime, label: string): Promise<void> => {
    for (const r of rt.ranks) {
      const m = await r.control.call('memInfo');
      rows.push(
        row(
          {
            ...base,
            op: 'memory',
            transport: label,
            bytes: r.ordinal,
            unit: 'GiB',
            metric: 'device',
            method: `cudaMemGetInfo total - free on device ${r.ordinal}, weights and caches loaded`,
          },
          [(m.total - m.free) / 2 ** 30],
        ),
      );
    }
  };
  // The one-GPU rows: the read floor, the unsharded walk against its floor, the kernel table.
  rows.push(...(await benchRoofline(backend, progress)));
  // One GPU without --loopback: the rows above are the machine's (bench/run.ts).
  if (!ctx.pair) return rows;
  await withWalk(
    ctx,
    'sharded',
    async (walk, rt) => {
      await memory(rt, 'sharded');
      // Every variant's joins are its step time minus this walk's. It runs on what real steps leave
      // in rank 1's buffers (no join fills them): run straight after the weights' load it took 6.02
      // ms a step, and 4.69 after the other transports had run (decode-2xH200-2026-11-30-run11);
      // before that was known, the eager joins could not be told from the walk.
      await walk.prepare(DEFAULT_CONFIG);
      await timeSteps(walk, DEFAULT_CONFIG, 'decode real steps first (not recorded)', progress);
      await walk.prepare(DEFAULT_CONFIG, NO_JOINS);
      const bareTimes = await timeSteps(walk, DEFAULT_CONFIG, 'decode no joins', progress);
      const bare = bareTimes.host;
      rows.push(...stepRows(base, 'no-joins', `${method}; the sharded walk with joins that move nothing`, bareTimes));
      const mixedPath = new URL('../../bench/configs/mixed.json', import.meta.url).pathname;
      const variants: Array<[string, DecodeConfig]> = TRANSPORTS.map((t): [string, DecodeConfig] => [
        t,
        { ...DEFAULT_CONFIG, transport: { default: t, layers: [] } },
      ]);
      // The mixed config is written for bench's 30 layers.
      if (preset === 'bench') variants.push(['mixed', loadDecodeConfig(mixedPath, presetByName(preset).layers)]);
      try {
        rows.push(...(await benchProfileOverhead(walk, base, method, progress)));
      } catch (e) {
        console.error(`decode: profile overhead: ${(e as Error).message}`);
      }
      for (const [name, dc] of variants) {
        try {
          await walk.prepare(dc);
          const times = await timeSteps(walk, dc, `decode ${name}`, progress);
          const s = times.host;
          rows.push(...stepRows(base, name, method, times));
          rows.push(
            row(
              {
                ...base,
                op: 'joins',
                transport: name,
                method: 'step time minus the no-joins step at the same position (paired by step index)',
              },
              s.map((v, i) => v - bare[i]!),
            ),
          );
        } catch (e) {
          console.error(`decode: ${name}: ${(e as Error).message}`);
        }
      }
      // The eager walk without joins once more, after every transport's: the baseline should not
      // depend on when it ran.
      await walk.prepare(DEFAULT_CONFIG, NO_JOINS);
      const again = await timeSteps(walk, DEFAULT_CONFIG, 'decode no joins, after the others', progress);
      rows.push(
        ...stepRows(
          base,
          'no-joins (after the others)',
          `${method}; the sharded walk with joins that move nothing, run after every transport's`,
          again,
        ),
      );
      // The same walk with each step replayed from its graph (config stepGraph): the host's enqueue
      // leaves the step, so what is left is the device's time; joins again by difference, against
      // the no-joins walk replayed the same way.
      const bareDc = { ...DEFAULT_CONFIG, stepGraph: true };
      await walk.prepare(bareDc, NO_JOINS);
      const bareGraph = await graphedSteps(walk, bareDc, 'decode no joins, step graph', progress);
      if (bareGraph)
        rows.push(
          row(
            {
              ...base,
              transport: 'no-joins+graph',
              method: `${method}; joins that move nothing, the step replayed from its graph`,
            },
            bareGraph,
          ),
        );
      for (const [name, dc] of variants) {
        try {
          const graphed = { ...dc, stepGraph: true };
          await walk.prepare(graphed);
          const s = await graphedSteps(walk, graphed, `decode ${name}, step graph`, progress);
          if (!s) continue;
          rows.push(
            row({ ...base, transport: `${name}+graph`, method: `${method}; the step replayed from its graph` }, s),
          );
          if (bareGraph)
            rows.push(
              row(
                {
                  ...base,
                  op: 'joins',
                  transport: `${name}+graph`,
                  method: 'step-graph step time minus the no-joins step-graph step at the same position',
                },
                s.map((v, i) => v - bareGraph[i]!),
              ),
            );
        } catch (e) {
          console.error(`decode: ${name}, step graph: ${(e as Error).message}`);
        }
      }
    },
    progress,
  );
  return rows;
}

/** Timed steps through the step graph; undefined (and why, on stderr) when it was refused. */
async function graphedSteps(
  walk: DeviceWalk,
  dc: DecodeConfig,
  label: string,
  progress: Progress,
): Promise<number[] | undefined> {
  const host = (await timeSteps(walk, dc, label, progress)).host;
  const refused = walk.stepGraphStats().refused;
  if (refused.length > 0) {
    console.error(`decode: ${label}: refused: ${refused[0]!.reason}`);
    return undefined;
  }
  return host;
}
