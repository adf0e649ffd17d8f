/**
 * `ep`: the MoE step of `bench` at t = 1, through seed 003's parent graph against its
 * eager twin. Device time of the EP step (fan-out to merge) from a timing-event pair per layer on
 * rank 0's stream (ep-step-timer.ts), one sample per layer and step; the step's main-thread wall
 * time alongside, for the effect on tokens/s. The rest of the walk uses `ll` in every variant,
 * so the graph and the eager `ll` twin differ only in the EP step.
 */
import { DEFAULT_CONFIG, type DecodeConfig } from '../src/decode/decode-config.js';
import type { TransportName } from '../src/runtime/transports/transport.js';
import { row, type Row } from './results-file.js';
import { presetFor, timeSteps, withWalk } from './walk-run.js';
import { count, type SuiteContext } from './suite-context.js';

export async function benchEp(ctx: SuiteContext): Promise<Row[]> {
  const { backend, progress } = ctx;
  const n = { progress, steps: count(ctx, 200, 4), warm: count(ctx, 8, 1) };
  const preset = presetFor(backend);
  const rows: Row[] = [];
  const cfg = (transport: TransportName, epGraph: boolean): DecodeConfig => ({
    ...DEFAULT_CONFIG,
    transport: { default: transport, layers: [] },
    epGraph,
  });
  // `eager peer` crosses on the copy engine, ordered by events, as the graph's copy nodes do: what
  // those crossings cost without the graph.
  const variants: Array<[string, DecodeConfig]> = [
    ['graph', cfg('ll', true)],
    ['eager ll', cfg('ll', false)],
    ['eager push', cfg('push', false)],
    ['eager peer', cfg('peer', false)],
  ];
  await withWalk(
    ctx,
    'sharded',
    async (walk) => {
      await walk.timeEpSteps(true);
      for (const [name, dc] of variants) {
        await walk.prepare(dc);
        const r = await timeSteps(walk, dc, `ep ${name}`, n, () => walk.epStepTimes());
        const stats = walk.epGraphStats();
        if (name === 'graph' && stats.refused.length > 0)
          throw new Error(`ep: the graph was refused on layer ${stats.refused[0]!.layer}: ${stats.refused[0]!.reason}`);
        rows.push(
          row(
            {
              suite: 'ep',
              op: 'moe step',
              transport: name,
              bytes: 0,
              preset,
              unit: 'us',
              metric: 'device',
              method:
                "CUDA events on rank 0 around one layer's EP step (fan-out to merge), t=1; one sample per layer and step",
            },
            r.extra.flat(),
          ),
        );
        rows.push(
          row(
            {
              suite: 'ep',
              op: 'step',
              transport: name,
              bytes: 0,
              preset,
              unit: 'ms',
              metric: 'host',
              method: 'main-thread wall time of one t=1 step (every layer), EP steps timed',
            },
            r.host,
          ),
        );
      }
    },
    progress,
  );
  return rows;
}
