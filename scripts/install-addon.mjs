#!/usr/bin/env node
/**
 * `npm install`'s step for the CUDA addon: build it with cmake-js when a CUDA compiler and cmake
 * are there, and otherwise skip it with one message, so an install on a machine without the CUDA
 * toolkit still succeeds and memra runs on its CPU reference backend. With both tools present a
 * failed build fails the install, as before: a half-working toolkit is a problem to see, not to
 * hide.
 *
 * The CUDA compiler is found the way CMake finds it: `CUDACXX` when set, else `nvcc` on PATH.
 * MEMRA_SKIP_ADDON=1 skips the build on purpose (an install that only needs the TypeScript).
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const HOW =
  'build it with `npm run build:addon` (in this package) or `npm rebuild memra` (in a project that depends on it)';

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** What stops the build, in words, or undefined when nothing does. */
function missing() {
  const gaps = [];
  const cudacxx = process.env.CUDACXX;
  if (cudacxx) {
    const path = isAbsolute(cudacxx) ? cudacxx : onPath(cudacxx);
    if (!path || !executable(path))
      gaps.push(`CUDACXX is set to '${cudacxx}', which is not an executable CUDA compiler`);
  } else if (!onPath('nvcc')) {
    gaps.push('no CUDA compiler (nvcc is not on PATH and CUDACXX is unset)');
  }
  if (!onPath('cmake')) gaps.push('no cmake on PATH');
  return gaps.length ? gaps.join(', and ') : undefined;
}

if (process.env.MEMRA_SKIP_ADDON === '1') {
  console.log(
    `memra: MEMRA_SKIP_ADDON=1, so the CUDA addon was not built; memra runs on its CPU reference backend until it is: ${HOW}.`,
  );
  process.exit(0);
}

const why = missing();
if (why) {
  console.log(
    `memra: the CUDA addon was not built: ${why}. memra runs on its CPU reference backend until it is. ` +
      `It needs CUDA 13 (nvcc) and cmake 3.25 or later; once they are there, ${HOW}.`,
  );
  process.exit(0);
}

const cmakeJs = join(dirname(createRequire(import.meta.url).resolve('cmake-js/package.json')), 'bin', 'cmake-js');
const build = spawnSync(
  process.execPath,
  [cmakeJs, 'compile', '--CDCMAKE_CUDA_ARCHITECTURES=90', '--CDCMAKE_BUILD_TYPE=Release'],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
if (build.error) throw build.error;
process.exit(build.status ?? 1);
