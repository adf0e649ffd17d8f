#!/usr/bin/env node
/**
 * The `memra` command line. `npm start` runs `memra decode` on the best available backend.
 */
import { parseArgs } from 'node:util';
import { selfcheck } from './selfcheck.js';
import { decode, printDecode } from './decode.js';

const USAGE = `usage: memra <command> [options]

commands:
  selfcheck [--backend auto|cuda|cpu] [--joins N] [--json]
      open the runtime on the best available backend (CUDA with two GPUs, else the CPU
      reference), run N ordered cross-device joins and check the result
  decode [--preset tiny|small|bench] [--tokens N] [--batch T] [--config FILE]
         [--backend auto|cuda|cpu] [--layout sharded|unsharded] [--no-profile] [--json]
      greedy decoding of the synthetic model (shared/MODEL.md): row s starts from token s and
      feeds its tokens back; default model: small on two GPUs, tiny on the CPU reference.
      Prints tokens/s and each hop's join latency (device events on the receiving rank);
      --no-profile leaves the joins untimed`;

const BACKENDS = ['auto', 'cuda', 'cpu'];

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) { console.log(USAGE); return 0; }
  if (command === 'decode') return decodeCommand(rest);
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

async function decodeCommand(argv: string[]): Promise<number> {
  // Profiling is on unless --no-profile (this Node's parseArgs has no negated booleans).
  const args = argv.filter((a) => a !== '--no-profile');
  const { values } = parseArgs({
    args,
    options: {
      preset: { type: 'string' },
      tokens: { type: 'string', default: '32' },
      batch: { type: 'string', default: '1' },
      config: { type: 'string' },
      backend: { type: 'string', default: 'auto' },
      layout: { type: 'string', default: 'sharded' },
      json: { type: 'boolean', default: false },
    },
  });
  const bad = (what: string): number => { console.error(`memra decode: ${what}`); return 2; };
  if (!BACKENDS.includes(values.backend!)) return bad(`--backend must be auto, cuda or cpu, got '${values.backend}'`);
  if (values.layout !== 'sharded' && values.layout !== 'unsharded') return bad(`--layout must be sharded or unsharded, got '${values.layout}'`);
  const tokens = Number(values.tokens), batch = Number(values.batch);
  if (!Number.isInteger(tokens) || tokens < 1) return bad(`--tokens must be a positive integer, got '${values.tokens}'`);
  if (!Number.isInteger(batch) || batch < 1 || batch > 8) return bad(`--batch must be an integer from 1 to 8, got '${values.batch}'`);
  const r = await decode({
    tokens, batch, json: values.json!, profile: args.length === argv.length, backend: values.backend as 'auto' | 'cuda' | 'cpu', layout: values.layout,
    ...(values.preset ? { preset: values.preset } : {}),
    ...(values.config ? { config: values.config } : {}),
  });
  if (values.json) console.log(JSON.stringify(r));
  else printDecode(r);
  return 0;
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (e: unknown) => {
  console.error(`memra: ${(e as Error).message}`);
  process.exitCode = 1;
});
