/**
 * `npm install`'s addon step (scripts/install-addon.mjs) where the CUDA toolkit is not: it must
 * succeed, build nothing, and say what is missing and how to build the addon later. Run with a
 * PATH that holds only `node` (and, where a case needs them, stand-in tools that record being run).
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const script = new URL('../../../scripts/install-addon.mjs', import.meta.url).pathname;

describe('npm install without the CUDA toolkit', () => {
  let bin = '';
  beforeEach(() => {
    bin = mkdtempSync(join(tmpdir(), 'memra-install-'));
    symlinkSync(process.execPath, join(bin, 'node'));
  });
  afterEach(() => rmSync(bin, { recursive: true, force: true }));

  /** A stand-in tool that leaves a mark if anything runs it. */
  function fake(name: string): string {
    const path = join(bin, name);
    writeFileSync(path, `#!/bin/sh\ntouch ${JSON.stringify(join(bin, `${name}.ran`))}\nexit 1\n`);
    chmodSync(path, 0o755);
    return path;
  }

  function install(env: Record<string, string>): { status: number | null; out: string } {
    const { CUDACXX: _unset, MEMRA_SKIP_ADDON: _also, ...rest } = process.env;
    const r = spawnSync(process.execPath, [script], {
      env: { ...rest, PATH: bin, ...env },
      encoding: 'utf8',
      timeout: 30_000,
    });
    return { status: r.status, out: r.stdout + r.stderr };
  }

  it('skips the addon, names what is missing and the command that builds it, and succeeds', () => {
    const r = install({});
    assert.equal(r.status, 0, r.out);
    assert.match(
      r.out,
      /memra: the CUDA addon was not built: no CUDA compiler \(nvcc is not on PATH and CUDACXX is unset\), and no cmake on PATH/,
    );
    assert.match(r.out, /CPU reference backend/);
    assert.match(r.out, /npm run build:addon/);
    assert.match(r.out, /npm rebuild memra/);
  });

  it('with cmake but no nvcc, names only the compiler and runs nothing', () => {
    fake('cmake');
    const r = install({});
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /no CUDA compiler \(nvcc is not on PATH and CUDACXX is unset\)\. /);
    assert.doesNotMatch(r.out, /no cmake/);
    assert.equal(existsSync(join(bin, 'cmake.ran')), false, 'cmake was not run');
  });

  it('with nvcc but no cmake, names cmake and runs nothing', () => {
    fake('nvcc');
    const r = install({});
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /the CUDA addon was not built: no cmake on PATH\. /);
    assert.equal(existsSync(join(bin, 'nvcc.ran')), false, 'nvcc was not run');
  });

  it('names a CUDACXX that is not an executable, rather than looking on PATH', () => {
    fake('cmake');
    fake('nvcc');
    const r = install({ CUDACXX: join(bin, 'no-such-nvcc') });
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /CUDACXX is set to '.*no-such-nvcc', which is not an executable CUDA compiler/);
    assert.equal(existsSync(join(bin, 'cmake.ran')), false);
  });

  it('MEMRA_SKIP_ADDON=1 skips the build on purpose, saying so', () => {
    fake('cmake');
    fake('nvcc');
    const r = install({ MEMRA_SKIP_ADDON: '1' });
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /MEMRA_SKIP_ADDON=1, so the CUDA addon was not built/);
    assert.equal(existsSync(join(bin, 'cmake.ran')) || existsSync(join(bin, 'nvcc.ran')), false);
  });
});
