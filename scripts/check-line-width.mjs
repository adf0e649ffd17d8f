#!/usr/bin/env node
/**
 * Line width for the files Biome does not format: the C++, CUDA and shell sources git tracks
 * (.cpp, .h, .cu, .cuh, .sh, and a file without an extension that starts with a shell's `#!`,
 * such as .ci/run) stay within 120 columns, Biome's width for the TypeScript. A column is a code
 * point. Prints each line over the width as FILE:LINE and exits 1 when there is one.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const WIDTH = 120;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = /\.(cpp|h|cu|cuh|sh)$/;
const SHELL = /^#!\S*\/(env )?(ba)?sh\b/;

function covered(file, text) {
  if (SOURCE.test(file)) return true;
  return !basename(file).includes('.') && SHELL.test(text);
}

const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
let over = 0;
for (const file of files) {
  const path = join(root, file);
  if (!statSync(path, { throwIfNoEntry: false })?.isFile()) continue; // deleted in the work tree
  const text = readFileSync(path, 'utf8');
  if (!covered(file, text)) continue;
  text.split('\n').forEach((line, i) => {
    const columns = [...line].length;
    if (columns <= WIDTH) return;
    console.error(`${file}:${i + 1}: ${columns} columns, over ${WIDTH}`);
    over++;
  });
}
if (over > 0) {
  console.error(`check-line-width: ${over} line(s) over ${WIDTH} columns`);
  process.exit(1);
}
