/**
 * The benchmark runner behind `memra bench` and `npm run bench`:
 *
 *   [suite...] [--backend cuda|cpu] [--joins N] [--transports a,b] [--out DIR]
 *
 * Runs the named suites (default: ring, joins, decode, ep; `roofline` is decode's one-GPU part) and writes
 * `<suite>-<machine>-<date>.json`: on the GPUs into bench/results/ (where the README's tables come
 * from) and DIR; on the CPU reference only into DIR, since its numbers describe this code on a CPU,
 * not the hardware the tables are about.
 */
import { parseArgs } from 'node:util';
import { detectBackend } from '../src/runtime/runtime.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import { benchRing } from './ring.js';
import { benchJoins } from './joins.js';
import { benchDecode } from './decode.js';
import { benchRoofline } from './decode-roofline.js';
import { benchEp } from './ep.js';
import { describeMachine, writeResults, type Row } from './results-file.js';
import { Progress } from '../src/cli/progress.js';

type Suite = (
  backend: BackendKind,
  joins: number,
  p: Progress,
  transports?: string[],
  flush?: (rows: Row[]) => void,
) => Promise<Row[]>;

export const SUITES: Record<string, Suite> = {
  ring: benchRing,
  joins: benchJoins,
  decode: benchDecode,
  ep: benchEp,
  // The decode suite's one-GPU part alone: the read floor, the unsharded cases and the kernel table.
  roofline: (backend, _joins, p) => benchRoofline(backend, p),
};

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
      },
    });
  } catch (e) {
    return bad((e as Error).message);
  }
  const { values, positionals } = parsed;
  // roofline runs inside decode too: the default set leaves it out.
  const suites = positionals.length > 0 ? positionals : Object.keys(SUITES).filter((s) => s !== 'roofline');
  const unknown = suites.find((s) => !SUITES[s]);
  if (unknown) return bad(`unknown suite '${unknown}'; suites: ${Object.keys(SUITES).join(', ')}`);
  const backend = (values.backend ?? detectBackend().backend) as BackendKind;
  if (backend !== 'cuda' && backend !== 'cpu') return bad(`--backend must be cuda or cpu, got '${backend}'`);
  const joins = Number(values.joins);
  if (!Number.isInteger(joins) || joins < 100) return bad(`--joins must be an integer >= 100, got '${values.joins}'`);

  const machine = describeMachine(backend);
  const progress = new Progress();
  const dirs = [
    ...(backend === 'cuda' ? [new URL('../../bench/results/', import.meta.url).pathname] : []),
    ...(values.out ? [values.out] : []),
  ];
  if (dirs.length === 0)
    console.error("bench: the CPU reference's figures are not kept in bench/results/; pass --out DIR to keep them");
  for (const s of suites) {
    const rows = await SUITES[s]!(backend, joins, progress, values.transports?.split(','), (partial) =>
      writeResults(s, machine, partial, dirs),
    );
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
