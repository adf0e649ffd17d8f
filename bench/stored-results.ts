/**
 * The results files in bench/results/, read by the name they were written under. A file may be
 * stored gzipped (`NAME.json.gz`, read and named as `NAME.json`): a joins run with its raw
 * samples is over 1 MB, a tenth of that compressed.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { NamedResults, ResultsFile } from './results-types.js';

/** Every results file in `dir`, by name. */
export function readStoredResults(dir: string): NamedResults[] {
  const stored = new Map<string, string>();
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.json') || f.endsWith('.json.gz'))) {
    const file = f.replace(/\.gz$/, '');
    if (stored.has(file)) throw new Error(`bench:report: both ${file} and ${file}.gz are in ${dir}; keep one`);
    stored.set(file, f);
  }
  return [...stored.keys()].sort().map((file) => {
    const f = stored.get(file)!;
    const raw = readFileSync(join(dir, f));
    return { file, data: JSON.parse((f.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8')) as ResultsFile };
  });
}
