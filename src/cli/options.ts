/**
 * The command line's options, declared once per command: the parser and each command's `--help`
 * (every option with its default and limits) are made from the same table, so the two cannot
 * disagree. A bad value is refused in the CLI's own words, naming the option and what it takes;
 * `--name value` and `--name=value` both work, and a value may start with `-` (`--tokens -1` is a
 * bad count, not an unknown option).
 */
import { closest } from '../api/check.js';

export type CliOption =
  | { type: 'int'; min: number; max?: number; default?: number; value: string; help: string }
  | { type: 'choice'; choices: readonly string[]; default?: string; help: string }
  | { type: 'list'; choices: readonly string[]; value: string; help: string }
  | { type: 'ints'; min: number; count: readonly [number, number]; value: string; what: string; help: string }
  | { type: 'path'; default?: string; value: string; help: string }
  | { type: 'flag'; help: string };

export interface CommandSpec {
  name: string;
  /** One line, for `memra --help`. */
  summary: string;
  /** What the command does, for its own `--help`. */
  description: string;
  options: Readonly<Record<string, CliOption>>;
  /** Words after the command that are not options (bench's suites). */
  positionals?: { name: string; choices: readonly string[]; help: string };
}

type Value<O extends CliOption> = O extends { type: 'int' }
  ? number
  : O extends { type: 'ints' }
    ? number[]
    : O extends { type: 'list' }
      ? string[]
      : O extends { type: 'flag' }
        ? boolean
        : string;

/** What parsing gives: an option with a default (or a flag) always has a value. */
export type CliValues<S extends Readonly<Record<string, CliOption>>> = {
  [K in keyof S]: S[K] extends { type: 'flag' } | { default: string | number } ? Value<S[K]> : Value<S[K]> | undefined;
};

export type UsageCode = 'ERR_UNKNOWN_OPTION' | 'ERR_INVALID_ARG_VALUE' | 'ERR_MISSING_ARGS' | 'ERR_UNKNOWN_COMMAND';

/** A command line that cannot run as written: exit status 2, and the command's help points the way. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly code: UsageCode,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

const orList = (xs: readonly string[]): string =>
  xs.length <= 1 ? xs.join('') : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`;

function intLimits(o: Extract<CliOption, { type: 'int' }>): string {
  if (o.max !== undefined) return `an integer from ${o.min} to ${o.max}`;
  return o.min === 1 ? 'a positive integer' : `an integer of at least ${o.min}`;
}

function parseValue(
  flag: string,
  o: Exclude<CliOption, { type: 'flag' }>,
  raw: string,
): string | number | string[] | number[] {
  const bad = (what: string): never => {
    throw new UsageError(`${flag} must be ${what}, got '${raw}'`, 'ERR_INVALID_ARG_VALUE');
  };
  switch (o.type) {
    case 'int': {
      const n = /^[+-]?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
      if (!Number.isSafeInteger(n) || n < o.min || (o.max !== undefined && n > o.max)) bad(intLimits(o));
      return n;
    }
    case 'choice':
      if (!o.choices.includes(raw)) bad(orList(o.choices));
      return raw;
    case 'list': {
      const items = raw
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '');
      if (items.length === 0) bad(`a comma-separated list of ${orList(o.choices)}`);
      const unknown = items.find((x) => !o.choices.includes(x));
      if (unknown !== undefined)
        throw new UsageError(
          `${flag}: unknown ${flag.slice(2).replace(/s$/, '')} '${unknown}'; the choices are ${o.choices.join(', ')}`,
          'ERR_INVALID_ARG_VALUE',
        );
      return items;
    }
    case 'ints': {
      const [lo, hi] = o.count;
      const items = raw.split(',');
      if (items.length < lo || items.length > hi || !items.every((x) => /^\d+$/.test(x.trim()))) bad(o.what);
      const ns = items.map(Number);
      if (ns.some((n) => !Number.isSafeInteger(n) || n < o.min)) bad(o.what);
      return ns;
    }
    case 'path':
      if (raw === '') bad(`a ${o.value === 'DIR' ? 'folder' : 'file'} path`);
      return raw;
  }
}

/** Parse `argv` (the words after the command) against `spec`; throws UsageError. */
export function parseCommandLine<S extends CommandSpec>(
  spec: S,
  argv: readonly string[],
): { values: CliValues<S['options']>; positionals: string[]; help: boolean } {
  const values: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    if (o.type === 'flag') values[name] = false;
    else if ('default' in o && o.default !== undefined) values[name] = o.default;
  }
  const positionals: string[] = [];
  let help = false;
  const names = Object.keys(spec.options);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '-h' || arg === '--help') {
      help = true;
      continue;
    }
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, eq < 0 ? undefined : eq) : '';
    const o = spec.options[name];
    if (!o) {
      const near = closest(name || arg, names);
      throw new UsageError(
        `unknown option '${eq < 0 ? arg : arg.slice(0, eq)}'${near ? ` (did you mean --${near}?)` : ''}; the options are ${names.map((n) => `--${n}`).join(', ')}`,
        'ERR_UNKNOWN_OPTION',
      );
    }
    const flag = `--${name}`;
    if (o.type === 'flag') {
      if (eq >= 0) throw new UsageError(`${flag} takes no value, got '${arg}'`, 'ERR_INVALID_ARG_VALUE');
      values[name] = true;
      continue;
    }
    const raw = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
    if (raw === undefined) throw new UsageError(`${flag} needs a value (${optionValue(o)})`, 'ERR_MISSING_ARGS');
    values[name] = parseValue(flag, o, raw);
  }
  if (spec.positionals) {
    const p = spec.positionals;
    const unknown = positionals.find((x) => !p.choices.includes(x));
    if (unknown !== undefined)
      throw new UsageError(
        `unknown ${p.name} '${unknown}'; ${p.name}s: ${p.choices.join(', ')}`,
        'ERR_INVALID_ARG_VALUE',
      );
  } else if (positionals.length > 0) {
    throw new UsageError(
      `unexpected argument '${positionals[0]}': ${spec.name} takes only options`,
      'ERR_INVALID_ARG_VALUE',
    );
  }
  return { values: values as CliValues<S['options']>, positionals, help };
}

function optionValue(o: CliOption): string {
  switch (o.type) {
    case 'int':
    case 'ints':
    case 'path':
    case 'list':
      return o.value;
    case 'choice':
      return o.choices.join('|');
    case 'flag':
      return '';
  }
}

function optionNotes(o: CliOption): string {
  const notes: string[] = [];
  if (o.type === 'int') notes.push(intLimits(o));
  if (o.type === 'list') notes.push(`any of ${o.choices.join(', ')}`);
  if ('default' in o && o.default !== undefined) notes.push(`default ${o.default}`);
  return notes.length > 0 ? ` (${notes.join('; ')})` : '';
}

/** Wrap `text` to `width` columns, every line after the first indented by `indent`. */
function wrap(text: string, width: number, indent: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width - indent) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

/** `memra <command> --help`: usage, what it does, and every option with its limits and default. */
export function commandHelp(spec: CommandSpec): string {
  const rows: Array<[string, string]> = [];
  if (spec.positionals)
    rows.push([`[${spec.positionals.name}...]`, `${spec.positionals.help}: ${spec.positionals.choices.join(', ')}`]);
  for (const [name, o] of Object.entries(spec.options)) {
    const v = optionValue(o);
    rows.push([`--${name}${v ? ` ${v}` : ''}`, `${o.help}${optionNotes(o)}`]);
  }
  rows.push(['-h, --help', 'this help']);
  const col = Math.min(30, Math.max(...rows.map(([l]) => l.length)) + 4);
  const body = rows.map(([l, r]) => `  ${l.padEnd(col - 2)}${wrap(r, 100, col)}`).join('\n');
  const usage = `usage: memra ${spec.name}${spec.positionals ? ` [${spec.positionals.name}...]` : ''} [options]`;
  return `${usage}\n\n${wrap(spec.description, 100, 0)}\n\noptions:\n${body}`;
}

/** A command: its options, and what it does with them once parsed. */
export interface CliCommand {
  spec: CommandSpec;
  run(values: Record<string, unknown>, positionals: string[]): Promise<void>;
}

/** A command whose `run` sees its own options typed. */
export function defineCommand<S extends CommandSpec>(
  spec: S,
  run: (values: CliValues<S['options']>, positionals: string[]) => Promise<void>,
): CliCommand {
  return { spec, run: (values, positionals) => run(values as CliValues<S['options']>, positionals) };
}
