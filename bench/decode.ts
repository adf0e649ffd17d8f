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
import type { Transport } from '../src/runtime/transports/transport.js';
import { presetByName } from '../src/decode/model-config.js';
import { DEFAULT_CONFIG, loadDecodeConfig, type DecodeConfig } from '../src/decode/decode-config.js';
import { row, type Row } from './results-file.js';
import { presetFor, stepRows, timeSteps, withWalk, type StepCounts } from './walk-run.js';
import { benchProfileOverhead } from './profile-overhead.js';
import { MIN_SAMPLES, differenceRow } from './paired-difference.js';
import { count, type SuiteContext } from './suite-context.js';
import { benchRoofline } from './decode-roofline.js';
import type { DeviceWalk } from '../src/decode/device-walk.js';

/** Moves nothing: the walk's kernels without its joins. */
const NO_JOINS: Transport = {
  name: 'll',
  graphMode: 'per-rank',
  broadcast: () => undefined,
  allGather: () => undefined,
  gather: () => undefined,
  allReduce: () => undefined,
};

export async function benchDecode(ctx: SuiteContext): Promise<Row[]> {
  const { backend } = ctx;
  const n: StepCounts = { progress: ctx.progress, steps: count(ctx, 48, MIN_SAMPLES), warm: count(ctx, 4, 1) };
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
  rows.push(...(await benchRoofline(backend, ctx.progress)));
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
      await timeSteps(walk, DEFAULT_CONFIG, 'decode real steps first (not recorded)', n);
      await walk.prepare(DEFAULT_CONFIG, NO_JOINS);
      const bareTimes = await timeSteps(walk, DEFAULT_CONFIG, 'decode no joins', n);
      const bare = bareTimes.host;
      rows.push(...stepRows(base, 'no-joins', `${method}; the sharded walk with joins that move nothing`, bareTimes));
      const mixedPath = new URL('../../bench/configs/mixed.json', import.meta.url).pathname;
      const variants: Array<[string, DecodeConfig]> = ctx.transports.map((t): [string, DecodeConfig] => [
        t,
        { ...DEFAULT_CONFIG, transport: { default: t, layers: [] } },
      ]);
      // The mixed config is written for bench's 30 layers.
      if (preset === 'bench')
        variants.push([
          'mixed',
          loadDecodeConfig(mixedPath, { model: { name: preset, layers: presetByName(preset).layers } }),
        ]);
      try {
        rows.push(...(await benchProfileOverhead(walk, base, method, ctx)));
      } catch (e) {
        ctx.fail('profile overhead', e as Error);
      }
      for (const [name, dc] of variants) {
        try {
          await walk.prepare(dc);
          const times = await timeSteps(walk, dc, `decode ${name}`, n);
          const s = times.host;
          rows.push(...stepRows(base, name, method, times));
          rows.push(
            differenceRow(
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
          ctx.fail(name, e as Error);
        }
      }
      // The eager walk without joins once more, after every transport's: the baseline should not
      // depend on when it ran.
      await walk.prepare(DEFAULT_CONFIG, NO_JOINS);
      const again = await timeSteps(walk, DEFAULT_CONFIG, 'decode no joins, after the others', n);
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
      const bareGraph = await graphedSteps(walk, bareDc, 'decode no joins, step graph', n);
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
          const s = await graphedSteps(walk, graphed, `decode ${name}, step graph`, n);
          if (!s) continue;
          rows.push(
            row({ ...base, transport: `${name}+graph`, method: `${method}; the step replayed from its graph` }, s),
          );
          if (bareGraph)
            rows.push(
              differenceRow(
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
          ctx.fail(`${name}, step graph`, e as Error);
        }
      }
    },
    ctx.progress,
  );
  return rows;
}

/**
 * Timed steps through the step graph; undefined when its guard refused it (a transport the graph
 * cannot hold: a limit of that variant, said on stderr, not a failure of the run).
 */
async function graphedSteps(
  walk: DeviceWalk,
  dc: DecodeConfig,
  label: string,
  n: StepCounts,
): Promise<number[] | undefined> {
  const host = (await timeSteps(walk, dc, label, n)).host;
  const refused = walk.stepGraphStats().refused;
  if (refused.length > 0) {
    console.error(`decode: ${label}: refused: ${refused[0]!.reason}`);
    return undefined;
  }
  return host;
}
