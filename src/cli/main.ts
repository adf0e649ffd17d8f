#!/usr/bin/env node
/**
 * The `memra` command line. `npm start` runs `memra selfcheck` until the decode walk lands.
 */
import { parseArgs } from 'node:util';
import { selfcheck } from './selfcheck.js';

const USAGE = `usage: memra <command> [options]

commands:
  selfcheck [--backend auto|cuda|cpu] [--joins N] [--json]
      open the runtime on the best available backend (CUDA with two GPUs, else the CPU
      reference), run N ordered cross-device joins and check the result`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  if (command !== 'selfcheck') {
    console.error(`memra: unknown command '${command}'\n${USAGE}`);
    return 2;
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      backend: { type: 'string', default: 'auto' },
      joins: { type: 'string', default: '2000' },
      json: { type: 'boolean', default: false },
    },
  });
  const backend = values.backend as 'auto' | 'cuda' | 'cpu';
  if (!['auto', 'cuda', 'cpu'].includes(backend)) {
    console.error(`memra selfcheck: --backend must be auto, cuda or cpu, got '${values.backend}'`);
    return 2;
  }
  const joins = Number(values.joins);
  if (!Number.isInteger(joins) || joins < 1) {
    console.error(`memra selfcheck: --joins must be a positive integer, got '${values.joins}'`);
    return 2;
  }
  const r = await selfcheck(backend, joins);
  if (values.json) console.log(JSON.stringify(r));
  else {
    console.log(`backend: ${r.backend} (${r.why})`);
    console.log(`peer access: ${r.peer}`);
    console.log(`${r.joins} ordered joins: ${r.hostMicrosPerJoin.toFixed(2)} us of main-thread time each; result checked`);
  }
  return 0;
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (e: unknown) => {
  console.error(`memra: ${(e as Error).message}`);
  process.exitCode = 1;
});
