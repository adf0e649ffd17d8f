/**
 * `npm run bench -- [suite...] [--backend cuda|cpu] [--joins N] [--transports a,b] [--out DIR]`
 *
 * Runs the named suites (default: all) and writes `bench/results/<suite>-<machine>-<date>.json`,
 * plus a copy in DIR when given (the GPU host returns files from there).
 */
import { parseArgs } from 'node:util';
import { detectBackend } from '../src/runtime/runtime.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import { benchRing } from './ring.js';
import { benchJoins } from './joins.js';
import { benchDecode } from './decode.js';
import { benchEp } from './ep.js';
import { describeMachine, writeResults, type Row } from './results-file.js';
import { Progress } from '../src/cli/progress.js';

const SUITES: Record<string, (backend: BackendKind, joins: number, p: Progress, transports?: string[], flush?: (rows: Row[]) => void) => Promise<Row[]>> = {
  ring: benchRing,
  joins: benchJoins,
  decode: benchDecode,
  ep: benchEp,
};

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    backend: { type: 'string' },
    joins: { type: 'string', default: '20000' },
    out: { type: 'string' },
    transports: { type: 'string' },
  },
});

const suites = positionals.length > 0 ? positionals : ['ring', 'joins'];
for (const s of suites) {
  if (!SUITES[s]) {
    console.error(`bench: unknown suite '${s}'; suites: ${Object.keys(SUITES).join(', ')}`);
    process.exit(2);
  }
}
const backend = (values.backend ?? detectBackend().backend) as BackendKind;
if (backend !== 'cuda' && backend !== 'cpu') {
  console.error(`bench: --backend must be cuda or cpu, got '${backend}'`);
  process.exit(2);
}
const joins = Number(values.joins);
if (!Number.isInteger(joins) || joins < 100) {
  console.error(`bench: --joins must be an integer >= 100, got '${values.joins}'`);
  process.exit(2);
}

const machine = describeMachine(backend);
const progress = new Progress();
for (const s of suites) {
  const dirs = [new URL('../../bench/results/', import.meta.url).pathname, ...(values.out ? [values.out] : [])];
  const rows = await SUITES[s]!(backend, joins, progress, values.transports?.split(','), (partial) => writeResults(s, machine, partial, dirs));
  progress.done();
  const paths = writeResults(s, machine, rows, dirs);
  console.log(`\n${s} on ${machine.label} (${backend}):`);
  console.table(rows.map((r) => ({ op: r.op, transport: r.transport, metric: r.metric ?? '', bytes: r.bytes, unit: r.unit, median: +r.median.toFixed(3), p99: +r.p99.toFixed(3), n: r.n })));
  for (const p of paths) console.log(`wrote ${p}`);
}
