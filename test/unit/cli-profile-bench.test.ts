/**
 * `memra profile` and `memra bench` on the CPU reference: the three profile files agree with each
 * other and with the run, and bench writes its JSON where asked and never into bench/results/
 * from a CPU run; the suites' ranks follow the machine, and a loopback run says so.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseProfileJson } from '../../src/profile/json-export.js';
import { REPLICATED_HOPS, SEED_HOPS } from '../../src/profile/profile-data.js';
import { presetByName } from '../../src/decode/model-config.js';
import { pairFor } from '../../bench/run.js';
import { LOOPBACK_PAIR } from '../../bench/suite-context.js';

const cli = new URL('../../src/cli/main.js', import.meta.url).pathname;
const run = (args: string[]): string =>
  execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

describe('memra profile and memra bench (CPU backend)', function () {
  this.timeout(120_000);
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'memra-cli-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  for (const [walk, hops] of [
    ['seed', SEED_HOPS],
    ['replicated', REPLICATED_HOPS],
  ] as const) {
    it(`profile writes JSON, a Chrome trace and an HTML report of the same run (the ${walk} walk: ${hops.length} hops a layer)`, () => {
      const tokens = 4,
        L = presetByName('tiny').layers;
      const out = JSON.parse(
        run(['profile', '--backend', 'cpu', '--walk', walk, '--tokens', String(tokens), '--out', dir, '--json']),
      ) as { files: string[]; tokens: number[][] };
      assert.deepEqual(out.files.map((f) => f.slice(dir.length + 1)).sort(), [
        'profile.json',
        'report.html',
        'trace.json',
      ]);
      const doc = parseProfileJson(readFileSync(join(dir, 'profile.json'), 'utf8'));
      assert.equal(doc.profile.steps.length, tokens);
      assert.equal(doc.profile.joins.length, tokens * L * hops.length);
      assert.equal(doc.profile.meta.preset, 'tiny');
      assert.equal(doc.aggregate.rows.length, L * hops.length, 'one aggregate row per (layer, hop, transport)');
      for (const r of doc.aggregate.rows) assert.equal(r.n, tokens, `${r.hop} layer ${r.layer}: a sample per step`);
      assert.deepEqual(
        doc.aggregate.rows.filter((r) => r.layer === 0).map((r) => r.hop),
        [...hops],
      );
      const trace = JSON.parse(readFileSync(join(dir, 'trace.json'), 'utf8')) as {
        traceEvents: Array<{ ph: string; name: string; args?: { name?: string } }>;
      };
      const tracks = trace.traceEvents
        .filter((e) => e.ph === 'M' && e.name === 'thread_name')
        .map((e) => e.args!.name!);
      for (const want of [/main thread/, /rank 0/, /rank 1/])
        assert.ok(
          tracks.some((t) => want.test(t)),
          `a track matching ${want} among ${tracks.join(', ')}`,
        );
      const slices = trace.traceEvents.filter((e) => e.ph === 'X');
      assert.ok(slices.length >= tokens * L * hops.length, `${slices.length} slices`);
      const html = readFileSync(join(dir, 'report.html'), 'utf8');
      assert.match(html, /<svg/);
      assert.doesNotMatch(html, /https?:\/\//);
      for (const hop of hops)
        assert.match(html, new RegExp(`font-weight="600">${hop}</text>`), `a heat-map column for ${hop}`);
    });
  }

  it('profile refuses --no-profile and an unsharded run by name', () => {
    for (const [args, msg] of [
      [['--no-profile'], /unknown option '--no-profile'/],
      [['--layout', 'unsharded', '--tokens', '1'], /an unsharded run has no joins to profile/],
    ] as const) {
      try {
        run(['profile', '--backend', 'cpu', '--out', dir, ...args]);
        assert.fail(`memra profile ${args.join(' ')} succeeded`);
      } catch (e) {
        assert.match((e as { stderr: string }).stderr, msg);
      }
    }
  });

  it('bench suites follow the machine: two devices where there are two; on one, decode alone runs one rank and the rest in loopback', () => {
    for (const s of ['ring', 'joins', 'decode', 'ep']) {
      assert.deepEqual(pairFor(s, 2, false), {}, `${s} on two GPUs`);
      assert.deepEqual(pairFor(s, 8, true), LOOPBACK_PAIR, `${s} with --loopback`);
      assert.deepEqual(pairFor(s, 1, false), s === 'decode' ? undefined : LOOPBACK_PAIR, `${s} on one GPU`);
    }
  });

  it('a bench suite run in loopback is written as such: loopback in its machine and its label', () => {
    run(['bench', 'ring', '--backend', 'cpu', '--joins', '100', '--loopback', '--out', dir]);
    const files = readdirSync(dir);
    assert.equal(files.length, 1);
    assert.match(files[0]!, /^ring-cpu\d+-loopback-\d{4}-\d\d-\d\d\.json$/);
    const data = JSON.parse(readFileSync(join(dir, files[0]!), 'utf8')) as {
      machine: { label: string; loopback: boolean };
    };
    assert.equal(data.machine.loopback, true);
    assert.match(data.machine.label, /-loopback$/);
  });

  it('bench writes a CPU run only to --out, and names an unknown suite', () => {
    const results = new URL('../../../bench/results/', import.meta.url).pathname;
    const before = existsSync(results) ? readdirSync(results) : [];
    run(['bench', 'ring', '--backend', 'cpu', '--joins', '100', '--out', dir]);
    const files = readdirSync(dir);
    assert.equal(files.length, 1);
    assert.match(files[0]!, /^ring-cpu\d+-\d{4}-\d\d-\d\d\.json$/);
    const data = JSON.parse(readFileSync(join(dir, files[0]!), 'utf8')) as {
      suite: string;
      machine: { node: string; nccl: number };
      rows: Array<{ n: number; samples: number[] }>;
    };
    assert.equal(data.suite, 'ring');
    assert.equal(data.machine.node, process.version);
    assert.equal(typeof data.machine.nccl, 'number');
    for (const r of data.rows) assert.equal(r.samples.length, r.n);
    assert.deepEqual(existsSync(results) ? readdirSync(results) : [], before, 'nothing new in bench/results/');
    try {
      run(['bench', 'warp']);
      assert.fail('an unknown suite ran');
    } catch (e) {
      assert.equal((e as { status: number }).status, 2);
      assert.match((e as { stderr: string }).stderr, /unknown suite 'warp'; suites: ring, joins, decode, ep/);
    }
  });
});
