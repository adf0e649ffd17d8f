/**
 * The folder of memra's own package.json: where the shipped files (bench/configs/, the addon's
 * build) are, whether this runs from the repository's dist/ or from a dependent's node_modules.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function find(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const p = join(dir, 'package.json');
    if (existsSync(p) && (JSON.parse(readFileSync(p, 'utf8')) as { name?: string }).name === 'memra') return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`memra: no package.json of memra above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

let root: string | undefined;

export function packageRoot(): string {
  root ??= find();
  return root;
}

/** The package's version, for `memra --version`. */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}
