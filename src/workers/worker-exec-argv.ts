/**
 * The Node options a device worker starts with. A worker inherits the process's `execArgv`, and
 * some options only make sense for the process's own entry point: under
 * `node --input-type=module -e '...'` every worker exited at once ("--input-type can only be
 * used with string input"). Workers get the process's options without those; loaders
 * (`--import`, `--require`, `--loader`), conditions, source maps and the like are kept, since a
 * worker loads code the same way its process does.
 */

/** Options that choose or run the process's entry point, with whether each takes a value. */
const ENTRY_OPTIONS: ReadonlyMap<string, boolean> = new Map([
  ['-e', true],
  ['--eval', true],
  ['-p', true],
  ['--print', true],
  ['--input-type', true],
  ['-c', false],
  ['--check', false],
  ['-i', false],
  ['--interactive', false],
  ['--test', false],
  ['--test-only', false],
  ['--test-name-pattern', true],
  ['--test-skip-pattern', true],
  ['--test-reporter', true],
  ['--test-reporter-destination', true],
  ['--test-concurrency', true],
  ['--test-timeout', true],
  ['--test-shard', true],
  ['--experimental-test-coverage', false],
  ['--watch', false],
  ['--watch-path', true],
  ['--watch-preserve-output', false],
  ['--run', true],
]);

/** Options a worker is known to take, for when Node refuses the rest (see workerStartOptions). */
const LOADER_OPTIONS = [
  '--import',
  '--require',
  '-r',
  '--loader',
  '--experimental-loader',
  '--conditions',
  '-C',
  '--enable-source-maps',
  '--no-warnings',
  '--disable-warning',
  '--no-deprecation',
  '--experimental-default-type',
];

/** Whether `arg` is the entry option `name`, as `name` or `name=value`. */
const is = (arg: string, name: string): boolean => arg === name || arg.startsWith(`${name}=`);

/** Short flags run together (`-pe`): an entry option if any of them is one. */
function shortGroup(arg: string): { entry: boolean; takesValue: boolean } {
  if (!/^-[a-zA-Z]{2,}$/.test(arg)) return { entry: false, takesValue: false };
  const flags = [...arg.slice(1)].map((c) => ENTRY_OPTIONS.get(`-${c}`));
  return { entry: flags.some((f) => f !== undefined), takesValue: flags.some((f) => f === true) };
}

/** `execArgv` without the entry-point options (and their values). */
export function workerExecArgv(execArgv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    const name = [...ENTRY_OPTIONS.keys()].find((n) => is(arg, n));
    if (name !== undefined) {
      if (ENTRY_OPTIONS.get(name) && !arg.includes('=')) i++; // its value is the next argument
      continue;
    }
    const group = shortGroup(arg);
    if (group.entry) {
      if (group.takesValue) i++;
      continue;
    }
    out.push(arg);
  }
  return out;
}

/** Only the loader-like options of `execArgv`, each with its value. */
export function loaderExecArgv(execArgv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    const name = LOADER_OPTIONS.find((n) => is(arg, n));
    if (name === undefined) continue;
    out.push(arg);
    const takesValue = !['--enable-source-maps', '--no-warnings', '--no-deprecation'].includes(name);
    if (takesValue && !arg.includes('=') && i + 1 < execArgv.length) out.push(execArgv[++i]!);
  }
  return out;
}

/**
 * The `execArgv` choices for a worker, best first: inherit everything when nothing needs
 * dropping (Node's default, which also leaves out process-wide options by itself); else the
 * options without the entry point's; and, should Node refuse one of those for a worker (a V8 or
 * process-wide option, which applies to every thread anyway), the loader options alone.
 */
export function workerExecArgvChoices(execArgv: readonly string[] = process.execArgv): Array<string[] | undefined> {
  const filtered = workerExecArgv(execArgv);
  if (filtered.length === execArgv.length) return [undefined];
  return [filtered, loaderExecArgv(filtered)];
}
