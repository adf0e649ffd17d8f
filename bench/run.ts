/**
 * The benchmark runner behind `memra bench` and `npm run bench`:
 *
 *   [suite...] [--backend cuda|cpu] [--joins N] [--transports a,b] [--loopback] [--out DIR]
 *
 * Runs the named suites (default: ring, joins, decode, ep; `roofline` is decode's one-GPU part) and writes
 * `<suite>-<machine>-<date>.json`: on the GPUs into bench/results/ (where the README's tables come
 * from) and DIR; on the CPU reference only into DIR, since its numbers describe this code on a CPU,
 * not the hardware the tables are about.
 *
 * The suites follow the machine. With two GPUs every suite runs on devices 0 and 1. With one,
 * `decode` runs its one-GPU rows (the unsharded walk, eager and from its step graph) and the
 * suites that need two ranks (ring, joins, ep) run in loopback, both ranks on device 0.
 * `--loopback` runs every two-rank part in loopback, decode's sharded rows included. A suite run
 * in loopback writes `loopback: true` and a machine label ending `-loopback` (`1xH200-loopback`),
 * so its figures are never read as two-GPU ones (bench/report.ts keeps them apart).
 */
import { parseArgs } from 'node:util';
import { detectBackend } from '../src/runtime/runtime.js';
import { visibleDevices } from '../src/runtime/device-choice.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import { benchRing } from './ring.js';
import { benchJoins } from './joins.js';
import { benchDecode } from './decode.js';
import { benchRoofline } from './decode-roofline.js';
import { benchEp } from './ep.js';
import { describeMachine, writeResults } from './results-file.js';
import { Progress } from '../src/cli/progress.js';
import { LOOPBACK_PAIR, type Suite, type SuiteContext } from './suite-context.js';

export const SUITES: Record<string, Suite> = {
  ring: benchRing,
  joins: benchJoins,
  decode: benchDecode,
  ep: benchEp,
  // The decode suite's one-GPU part alone: the read floor, the unsharded cases and the kernel table.
  roofline: (ctx, p) => benchRoofline(ctx.backend, p),
};
/** Suites with rows of one rank too: on one GPU without --loopback they run those alone. */
const ONE_GPU_ROWS = new Set(['decode', 'roofline']);

/** The two-rank options suite `s` runs with on a machine of `visible` devices (see the header). */
export function pairFor(s: string, visible: number, loopback: boolean): SuiteContext['pair'] {
  if (loopback) return LOOPBACK_PAIR;
  if (visible >= 2) return {};
  return ONE_GPU_ROWS.has(s) ? undefined : LOOPBACK_PAIR;
}

/** Returns the process exit code: 0, or 2 for bad arguments (named on stderr). */
export async function runBench(argv: string[]): Promise<number> {
  const bad = (msg: string): number => {
    console.error(`bench: ${msg}`);
    return 2;
  };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        backend: { type: 'string' },
        joins: { type: 'string', default: '20000' },
        out: { type: 'string' },
        transports: { type: 'string' },
        loopback: { type: 'boolean', default: false },
      },
    });
  } catch (e) {
    return bad((e as Error).message);
  }
  const { values, positionals } = parsed;
  // roofline runs inside decode too: the default set leaves it out.
  const suites = positionals.length > 0 ? positionals : Object.keys(SUITES).filter((x) => x !== 'roofline');
  const unknown = suites.find((s) => !SUITES[s]);
  if (unknown) return bad(`unknown suite '${unknown}'; suites: ${Object.keys(SUITES).join(', ')}`);
  const backend = (values.backend ?? detectBackend().backend) as BackendKind;
  if (backend !== 'cuda' && backend !== 'cpu') return bad(`--backend must be cuda or cpu, got '${backend}'`);
  const joins = Number(values.joins);
  if (!Number.isInteger(joins) || joins < 100) return bad(`--joins must be an integer >= 100, got '${values.joins}'`);

  const visible = visibleDevices(backend);
  if (backend === 'cuda' && visible === 0) return bad('--backend cuda: no CUDA device is visible');
  const progress = new Progress();
  const dirs = [
    ...(backend === 'cuda' ? [new URL('../../bench/results/', import.meta.url).pathname] : []),
    ...(values.out ? [values.out] : []),
  ];
  if (dirs.length === 0)
    console.error("bench: the CPU reference's figures are not kept in bench/results/; pass --out DIR to keep them");
  for (const s of suites) {
    const ctx: SuiteContext = {
      backend,
      joins,
      pair: pairFor(s, visible, values.loopback!),
      ...(values.transports ? { transports: values.transports.split(',') } : {}),
    };
    const machine = describeMachine(backend, ctx.pair?.loopback === true);
    if (!ctx.pair)
      console.error(
        `bench: ${s}: one GPU visible: its one-GPU rows only (--loopback runs its two-rank rows too, both ranks on device 0)`,
      );
    else if (ctx.pair.loopback)
      console.error(
        `bench: ${s}: in loopback, both ranks on device 0: written as ${machine.label}, never two-GPU figures`,
      );
    const rows = await SUITES[s]!(ctx, progress, (partial) => writeResults(s, machine, partial, dirs));
    progress.done();
    const paths = writeResults(s, machine, rows, dirs);
    console.log(`\n${s} on ${machine.label} (${backend}):`);
    console.table(
      rows.map((r) => ({
        op: r.op,
        transport: r.transport,
        metric: r.metric ?? '',
        bytes: r.bytes,
        unit: r.unit,
        median: +r.median.toFixed(3),
        p99: +r.p99.toFixed(3),
        n: r.n,
      })),
    );
    for (const p of paths) console.log(`wrote ${p}`);
  }
  return 0;
}
