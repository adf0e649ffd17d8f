/**
 * The package a dependent project installs: `npm pack`'s tarball, unpacked into a scratch
 * project's node_modules/memra, imported from there in ESM and in TypeScript, running the
 * README's example on the CPU reference (with a model that fits) and exiting without close().
 *
 * Offline and fast by construction: the tarball is packed from the dist/ that `npm test` has just
 * compiled (`--ignore-scripts`: no second tsc), unpacked as npm would, and its dependencies are
 * links to this repository's node_modules rather than downloads. The package's install script,
 * which builds the CUDA addon, is never run: the addon this repository built, where there is
 * one, is copied into the package's build/Release/ instead.
 */
import { strict as assert } from 'node:assert';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const repo = new URL('../../../', import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
};

/** Steps the example takes here (the README's 64, cut to keep the suite fast). */
const STEPS = 8;

/**
 * The README's session example, with a model and config that fit the CPU reference (the config
 * still a path into the package's bench/configs/, found from this project), and no close().
 */
function readmeExample(): string {
  const readme = readFileSync(join(repo, 'README.md'), 'utf8');
  const block = /## Decoding from your own loop\s+```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(block, 'the README has the session example');
  const example = block
    .replace("model: 'bench',", "model: 'tiny', backend: 'cpu',")
    .replace('bench/configs/mixed.json', 'bench/configs/ep-eager.json')
    .replace('i < 64;', `i < ${STEPS};`)
    .replace(/^await session\.close\(\);.*$/m, '');
  assert.notEqual(example, block);
  assert.doesNotMatch(example, /close\(\)/);
  return example;
}

function run(
  cmd: string,
  args: string[],
  cwd: string,
): { status: number | null; signal: string | null; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

describe('the packed package, installed in a scratch project', function () {
  this.timeout(120_000);
  let dir = '';
  let files: string[] = [];
  let size = 0;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'memra-scratch-'));
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
        cwd: repo,
        encoding: 'utf8',
      }),
    ) as Array<{ filename: string; size: number; files: Array<{ path: string }> }>;
    files = packed!.files.map((f) => f.path);
    size = packed!.size;
    const pkg = join(dir, 'node_modules', 'memra');
    mkdirSync(pkg, { recursive: true });
    execFileSync('tar', ['-xzf', join(dir, packed!.filename), '-C', pkg, '--strip-components=1']);
    for (const dep of [...Object.keys(manifest.dependencies), '@types/node']) {
      mkdirSync(join(dir, 'node_modules', dep, '..'), { recursive: true });
      symlinkSync(join(repo, 'node_modules', dep), join(dir, 'node_modules', dep));
    }
    const addon = join(repo, 'build', 'Release', 'memra.node');
    if (existsSync(addon)) {
      mkdirSync(join(pkg, 'build', 'Release'), { recursive: true });
      copyFileSync(addon, join(pkg, 'build', 'Release', 'memra.node'));
    }
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'scratch', private: true, type: 'module', dependencies: { memra: manifest.version } }),
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("holds what a dependent needs and nothing of the repository's own (tests, results)", () => {
    for (const want of [
      'package.json',
      'README.md',
      'LICENSE',
      'dist/src/index.js',
      'dist/src/index.d.ts',
      'dist/src/cli/main.js',
      'dist/bench/run.js',
      'bench/configs/mixed.json',
      'CMakeLists.txt',
      'scripts/install-addon.mjs',
    ]) {
      assert.ok(files.includes(want), `${want} is in the package`);
    }
    assert.ok(
      files.some((f) => f.startsWith('addon/')) && files.some((f) => f.startsWith('cu/')),
      "the addon's sources",
    );
    for (const f of files)
      assert.doesNotMatch(f, /^(dist\/)?test\/|^bench\/results\/|\.map$|^notes\//, `${f} is not shipped`);
    // Every module a shipped one imports is shipped too (the TypeScript test skips lib checks for speed).
    const pkg = join(dir, 'node_modules', 'memra');
    for (const f of files.filter((x) => /\.(js|d\.ts)$/.test(x))) {
      for (const [, spec] of readFileSync(join(pkg, f), 'utf8').matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+)'/g)) {
        const target = join(f, '..', spec!);
        assert.ok(
          files.includes(target) || files.includes(target.replace(/\.js$/, '.d.ts')),
          `${f} imports ${spec}, which is shipped`,
        );
      }
    }
    assert.ok(files.length < 400 && size < 1_000_000, `${files.length} files, ${size} bytes packed`);
  });

  it('runs the README example from ESM, and exits without close()', () => {
    writeFileSync(join(dir, 'example.mjs'), readmeExample());
    const r = run(process.execPath, ['example.mjs'], dir);
    assert.equal(r.signal, null, 'the process exited by itself');
    assert.equal(r.status, 0, r.stderr);
    const rows = r.stdout.trim().split('\n');
    assert.equal(rows.length, STEPS);
    for (const line of rows) {
      const tokens = JSON.parse(line.replace(/\s+/g, '')) as number[];
      assert.ok(tokens.length === 2 && tokens.every((x) => Number.isInteger(x) && x >= 0 && x < 256), line);
    }
    assert.match(
      r.stderr,
      /memra: a session \(cpu, model 'tiny', sharded\) was still open when the process ran out of work: drained and freed it/,
    );
  });

  it('compiles the README example and the package types in TypeScript, and runs it', () => {
    const ts = [
      "import type { DecodeConfigPatch, ErrorCode, JoinTiming, Layout } from 'memra';",
      "import pkg from 'memra/package.json' with { type: 'json' };",
      'const patch: DecodeConfigPatch = { profile: false };',
      "const layout: Layout = 'sharded';",
      "const code: ErrorCode = 'ERR_MODEL_TOO_LARGE';",
      'const seen: JoinTiming[] = [];',
      readmeExample(),
      'await session.setConfig(patch);',
      'console.log(JSON.stringify({ version: pkg.version, layout, code, seen: seen.length, model: session.model }));',
    ].join('\n');
    writeFileSync(join(dir, 'example.ts'), ts);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          types: ['node'],
          outDir: 'out',
          resolveJsonModule: true,
          skipLibCheck: true,
        },
        files: ['example.ts'],
      }),
    );
    const tsc = run(
      process.execPath,
      [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
      dir,
    );
    assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
    const r = run(process.execPath, ['out/example.js'], dir);
    assert.equal(r.status, 0, r.stderr);
    const last = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      version: string;
      model: { seed: string; layers: number };
    };
    assert.equal(last.version, manifest.version);
    assert.deepEqual([last.model.seed, last.model.layers], ['0', 2]);
  });

  it('exports the root, the CLI and package.json, and nothing deeper', () => {
    const r = run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        [
          "const { Session } = await import('memra');",
          "const cli = import.meta.resolve('memra/cli');",
          "let deep = 'exported';",
          "try { await import('memra/dist/src/runtime/rank.js'); } catch (e) { deep = e.code; }",
          'console.log(JSON.stringify({ session: typeof Session, cli: cli.endsWith("/memra/dist/src/cli/main.js"), deep }));',
        ].join('\n'),
      ],
      dir,
    );
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { session: 'function', cli: true, deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });
    const version = run(
      process.execPath,
      [join(dir, 'node_modules', 'memra', 'dist', 'src', 'cli', 'main.js'), '--version'],
      dir,
    );
    assert.equal(version.stdout.trim(), manifest.version);
  });
});
