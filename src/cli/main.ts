#!/usr/bin/env node
/**
 * The `memra` command line. `npm start` runs `memra decode` on the best available backend.
 */
import { parseArgs } from 'node:util';
import { selfcheck } from './selfcheck.js';
import { decode, printDecode, type DecodeOptions } from './decode.js';
import { printProfile, profile } from './profile.js';
import { WALKS, type WalkName } from '../decode/decode-config.js';

const USAGE = `usage: memra <command> [options]

commands:
  selfcheck [--backend auto|cuda|cpu] [--joins N] [--json]
      open the runtime on the best available backend (CUDA where a GPU is visible, else the CPU
      reference), run N ordered cross-device joins (one GPU: from its one rank to itself) and
      check the result
  decode [--preset tiny|small|bench] [--tokens N] [--batch T] [--config FILE]
         [--backend auto|cuda|cpu] [--layout sharded|unsharded] [--walk seed|replicated]
         [--devices D[,D]] [--loopback] [--no-profile] [--json]
      greedy decoding of the synthetic model (docs/model.md): row s starts from token s and
      feeds its tokens back; default model: small on the GPU, tiny on the CPU reference; default
      layout: sharded over two GPUs, unsharded on one (it prints which it chose and why).
      --walk picks the sharded layout's walk (over the config's): seed (root-centred, five
      joins a layer) or replicated (both ranks hold h, three joins a layer).
      --devices picks the ordinals (one: unsharded; two: sharded); --loopback puts both ranks
      of the sharded walk on one device (for testing two-rank code on one card).
      Prints tokens/s and each hop's join latency (device events on the receiving rank);
      --no-profile leaves the joins untimed
  profile [decode's options] [--out DIR]
      a decode with every join profiled, written to DIR (default memra-profile/):
      profile.json (raw samples, per-(layer, hop, transport) histograms), trace.json (Chrome
      trace events: open in Perfetto) and report.html (self-contained SVG plots)
  bench [ring|joins|decode|ep ...] [--backend cuda|cpu] [--joins N] [--transports a,b] [--loopback] [--out DIR]
      the benchmark suites (default: all); results as JSON in bench/results/ (GPU runs) and DIR.
      On one GPU, decode runs unsharded and the two-rank suites in loopback, labelled so`;

const BACKENDS = ['auto', 'cuda', 'cpu'];

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  if (command === 'decode') return decodeCommand(rest);
  if (command === 'profile') return profileCommand(rest);
  if (command === 'bench') {
    // The suites live in bench/ (the design's layout), loaded only when asked for.
    const { runBench } = await import('../../bench/run.js');
    return runBench(rest);
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
    console.log(
      `${r.joins} ordered joins: ${r.hostMicrosPerJoin.toFixed(2)} us of main-thread time each; result checked`,
    );
  }
  return 0;
}

type DecodeArgs = Omit<DecodeOptions, 'onStep'> & { out?: string };

/** decode's options (and profile's --out); a string is the message for a bad one. */
function parseDecodeArgs(command: string, argv: string[], withOut: boolean): DecodeArgs | string {
  // Profiling is on unless --no-profile (this Node's parseArgs has no negated booleans).
  const args = argv.filter((a) => a !== '--no-profile');
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        preset: { type: 'string' },
        tokens: { type: 'string', default: '32' },
        batch: { type: 'string', default: '1' },
        config: { type: 'string' },
        backend: { type: 'string', default: 'auto' },
        layout: { type: 'string' },
        walk: { type: 'string' },
        devices: { type: 'string' },
        loopback: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        ...(withOut ? { out: { type: 'string' as const, default: 'memra-profile' } } : {}),
      },
    }));
  } catch (e) {
    return (e as Error).message;
  }
  if (!BACKENDS.includes(values.backend!)) return `--backend must be auto, cuda or cpu, got '${values.backend}'`;
  if (values.layout !== undefined && values.layout !== 'sharded' && values.layout !== 'unsharded')
    return `--layout must be sharded or unsharded, got '${values.layout}'`;
  if (values.walk !== undefined && !(WALKS as readonly string[]).includes(values.walk))
    return `--walk must be ${WALKS.join(' or ')}, got '${values.walk}'`;
  const devices = values.devices === undefined ? undefined : values.devices.split(',');
  if (devices && (devices.length > 2 || !devices.every((d) => /^\d+$/.test(d))))
    return `--devices must be one device ordinal or two separated by a comma (0, or 0,1), got '${values.devices}'`;
  const tokens = Number(values.tokens),
    batch = Number(values.batch);
  if (!Number.isInteger(tokens) || tokens < 1) return `--tokens must be a positive integer, got '${values.tokens}'`;
  if (!Number.isInteger(batch) || batch < 1 || batch > 8)
    return `--batch must be an integer from 1 to 8, got '${values.batch}'`;
  if (withOut && args.length !== argv.length) return `${command} always profiles; --no-profile does not apply`;
  return {
    tokens,
    batch,
    json: values.json!,
    profile: args.length === argv.length,
    backend: values.backend as 'auto' | 'cuda' | 'cpu',
    loopback: values.loopback!,
    ...(values.layout ? { layout: values.layout as 'sharded' | 'unsharded' } : {}),
    ...(values.walk ? { walk: values.walk as WalkName } : {}),
    ...(devices ? { devices: devices.map(Number) } : {}),
    ...(values.preset ? { preset: values.preset } : {}),
    ...(values.config ? { config: values.config } : {}),
    ...(withOut && typeof (values as { out?: unknown }).out === 'string'
      ? { out: (values as { out: string }).out }
      : {}),
  };
}

async function decodeCommand(argv: string[]): Promise<number> {
  const o = parseDecodeArgs('decode', argv, false);
  if (typeof o === 'string') {
    console.error(`memra decode: ${o}`);
    return 2;
  }
  const r = await decode(o);
  if (o.json) console.log(JSON.stringify(r));
  else printDecode(r);
  return 0;
}

async function profileCommand(argv: string[]): Promise<number> {
  const o = parseDecodeArgs('profile', argv, true);
  if (typeof o === 'string') {
    console.error(`memra profile: ${o}`);
    return 2;
  }
  const { out, json, profile: _on, ...rest } = o;
  const r = await profile(rest, out!);
  if (json) console.log(JSON.stringify({ ...r.report, files: r.files }));
  else printProfile(r);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    console.error(`memra: ${(e as Error).message}`);
    process.exitCode = 1;
  },
);
