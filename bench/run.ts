/**
 * The benchmark runner behind `memra bench` and `npm run bench --` (see `memra bench --help`).
 *
 * Runs the named suites (default: ring, joins, decode, ep; `roofline` is decode's one-GPU part) and writes
 * `<suite>-<machine>-<date>.json`: on the GPUs into bench/results/ (where the README's tables come
 * from) and DIR; on the CPU reference only into DIR, since its numbers describe this code on a CPU,
 * not the hardware the tables are about. On the CPU reference every suite runs small counts, in
 * seconds: a smoke run of its code, not a measurement.
 *
 * The suites follow the machine. With two GPUs every suite runs on devices 0 and 1. With one,
 * `decode` runs its one-GPU rows (the unsharded walk, eager and from its step graph) and the
 * suites that need two ranks (ring, joins, ep) run in loopback, both ranks on device 0.
 * `--loopback` runs every two-rank part in loopback, decode's sharded rows included. A suite run
 * in loopback writes `loopback: true` and a machine label ending `-loopback` (`1xH200-loopback`),
 * so its figures are never read as two-GPU ones (bench/report.ts keeps them apart).
 *
 * What cannot run is refused before anything does (an unknown suite, transport or op, a
 * transport the backend lacks); a suite that produces no row is an error, never an empty file,
 * and a variant that failed makes the exit status 1 after the rest are written.
 */
import { detectBackend } from '../src/runtime/runtime.js';
import { visibleDevices } from '../src/runtime/device-choice.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import { TRANSPORTS, type TransportName } from '../src/runtime/transports/transport.js';
import { UsageError, defineCommand } from '../src/cli/options.js';
import { benchRing } from './ring.js';
import { benchJoins } from './joins.js';
import { benchDecode } from './decode.js';
import { benchRoofline } from './decode-roofline.js';
import { benchEp } from './ep.js';
import { describeMachine, writeResults, type Row } from './results-file.js';
import { costCell } from './paired-difference.js';
import { JOIN_OPS, LOOPBACK_PAIR, type JoinOp, type SuiteContext } from './suite-context.js';
import { Progress } from '../src/cli/progress.js';

export const SUITES: Readonly<Record<string, (ctx: SuiteContext) => Promise<Row[]>>> = {
  ring: benchRing,
  joins: benchJoins,
  decode: benchDecode,
  ep: benchEp,
  // The decode suite's one-GPU part alone: the read floor, the unsharded cases and the kernel table.
  roofline: (ctx) => benchRoofline(ctx.backend, ctx.progress),
};
/** Suites with rows of one rank too: on one GPU without --loopback they run those alone. */
const ONE_GPU_ROWS = new Set(['decode', 'roofline']);

/** The two-rank options suite `s` runs with on a machine of `visible` devices (see the header). */
export function pairFor(s: string, visible: number, loopback: boolean): SuiteContext['pair'] {
  if (loopback) return LOOPBACK_PAIR;
  if (visible >= 2) return {};
  return ONE_GPU_ROWS.has(s) ? undefined : LOOPBACK_PAIR;
}

/** The transports a run has: NCCL needs CUDA, and two devices (it refuses loopback). */
function transportsFor(backend: BackendKind, loopback: boolean): readonly TransportName[] {
  return backend === 'cpu' || loopback ? TRANSPORTS.filter((t) => t !== 'nccl') : TRANSPORTS;
}

export const benchCommand = defineCommand(
  {
    name: 'bench',
    summary: 'the benchmark suites (ring, joins, decode, ep); results as JSON',
    description:
      'The benchmark suites, each written as <suite>-<machine>-<date>.json: on the GPUs into bench/results/ and --out DIR, on the CPU reference only into --out DIR. ' +
      'On the CPU reference the suites run small counts in seconds: a smoke run of their code, not a measurement. ' +
      'On one GPU, decode runs its unsharded rows and the two-rank suites run in loopback (both ranks on device 0), labelled so.',
    positionals: {
      name: 'suite',
      choices: Object.keys(SUITES),
      help: "the suites to run (default: ring, joins, decode, ep; roofline is decode's one-GPU part alone)",
    },
    options: {
      backend: { type: 'choice', choices: ['cuda', 'cpu'], help: 'default: cuda where a GPU is visible, else cpu' },
      joins: {
        type: 'int',
        min: 100,
        value: 'N',
        help: 'samples a row of the ring suite (the joins suite: N/20, at least 1000, a host row); default 20000 on CUDA, 100 on the CPU reference',
      },
      transports: {
        type: 'list',
        choices: TRANSPORTS,
        value: 'T[,T...]',
        help: "the joins suite's transports (default: all the backend has)",
      },
      ops: { type: 'list', choices: JOIN_OPS, value: 'OP[,OP...]', help: "the joins suite's ops (default: all)" },
      loopback: {
        type: 'flag',
        help: "every two-rank part in loopback, both ranks on device 0 (decode's sharded rows too); its files are labelled -loopback, never two-GPU figures",
      },
      out: { type: 'path', value: 'DIR', help: 'a folder to write the results into as well' },
    },
  },
  async (v, positionals) => {
    // roofline runs inside decode too: the default set leaves it out.
    const suites =
      positionals.length > 0 ? [...new Set(positionals)] : Object.keys(SUITES).filter((x) => x !== 'roofline');
    const backend = (v.backend ?? detectBackend().backend) as BackendKind;
    if ((v.transports || v.ops) && !suites.includes('joins'))
      throw new UsageError(
        `--transports and --ops choose the joins suite's rows; this run has ${suites.join(', ')}`,
        'ERR_INVALID_ARG_VALUE',
      );
    const has = transportsFor(backend, v.loopback);
    const missing = (v.transports ?? []).filter((t) => !(has as readonly string[]).includes(t));
    if (missing.length > 0)
      throw new UsageError(
        `--transports ${missing.join(',')}: ${backend === 'cpu' ? 'the CPU reference' : 'a run in loopback'} has no ${missing.join(' or ')} transport (it needs ${backend === 'cpu' ? 'CUDA' : 'two devices'}); it has ${has.join(', ')}`,
        'ERR_INVALID_ARG_VALUE',
      );
    const visible = visibleDevices(backend);
    if (backend === 'cuda' && visible === 0)
      throw new UsageError('--backend cuda: no CUDA device is visible; use --backend cpu', 'ERR_INVALID_ARG_VALUE');
    const smoke = backend === 'cpu';
    const dirs = [
      ...(backend === 'cuda' ? [new URL('../../bench/results/', import.meta.url).pathname] : []),
      ...(v.out ? [v.out] : []),
    ];
    if (smoke)
      console.error(
        "bench: on the CPU reference: a smoke run of each suite's code with small counts; its figures are not a measurement",
      );
    if (dirs.length === 0)
      console.error("bench: the CPU reference's figures are not kept in bench/results/; pass --out DIR to keep them");
    const failures: string[] = [];
    for (const s of suites) {
      const pair = pairFor(s, visible, v.loopback);
      const machine = describeMachine(backend, pair?.loopback === true);
      if (!pair)
        console.error(
          `bench: ${s}: one GPU visible: its one-GPU rows only (--loopback runs its two-rank rows too, both ranks on device 0)`,
        );
      else if (pair.loopback)
        console.error(
          `bench: ${s}: in loopback, both ranks on device 0: written as ${machine.label}, never two-GPU figures`,
        );
      const ctx: SuiteContext = {
        backend,
        smoke,
        joins: v.joins ?? (smoke ? 100 : 20_000),
        progress: new Progress(),
        transports: (v.transports ?? transportsFor(backend, pair?.loopback === true)) as TransportName[],
        ops: (v.ops ?? JOIN_OPS) as JoinOp[],
        pair,
        flush: (partial) => writeResults(s, machine, partial, dirs),
        fail: (what, e) => {
          const m = `${s}: ${what}: ${e.message}`;
          failures.push(m);
          console.error(m);
        },
      };
      const rows = await SUITES[s]!(ctx);
      ctx.progress.done();
      if (rows.length === 0)
        throw new Error(
          `${s}: no row could be measured (${failures.filter((f) => f.startsWith(`${s}:`)).length} failures, above); nothing written`,
        );
      const paths = writeResults(s, machine, rows, dirs);
      console.log(`\n${s} on ${machine.label} (${backend}${smoke ? ', smoke run' : ''}):`);
      console.table(
        rows.map((r) => ({
          op: r.op,
          transport: r.transport,
          metric: r.metric ?? '',
          bytes: r.bytes,
          unit: r.unit,
          median: costCell(r),
          p99: +r.p99.toFixed(3),
          n: r.n,
        })),
      );
      for (const p of paths) console.log(`wrote ${p}`);
    }
    if (failures.length > 0)
      throw new Error(`${failures.length} variant(s) failed, the rest written:\n  ${failures.join('\n  ')}`);
  },
);
