/**
 * The `memra` command line, run from a list of words (main.ts passes the process's).
 *
 * Each command declares its options once (src/cli/options.ts): `memra <command> --help` prints
 * them with their defaults and limits, and the parser refuses anything else in the same words.
 * Exit status: 0, 1 when the run failed, 2 when the command line cannot run as written. With
 * `--json`, an error is `{ "error": { "code", "message" } }` on stdout.
 */
import { packageVersion } from '../package-root.js';
import { commandHelp, parseCommandLine, UsageError, type CliCommand } from './options.js';
import { cliErrorReport } from './error-report.js';
import { decodeCommand } from './decode.js';
import { profileCommand } from './profile.js';
import { selfcheckCommand } from './selfcheck.js';

const COMMANDS: Readonly<Record<string, () => Promise<CliCommand>>> = {
  selfcheck: async () => selfcheckCommand,
  decode: async () => decodeCommand,
  profile: async () => profileCommand,
  // The suites live in bench/ (the design's layout), loaded only when asked for.
  bench: async () => (await import('../../bench/run.js')).benchCommand,
};

async function usage(): Promise<string> {
  const specs = await Promise.all(Object.values(COMMANDS).map(async (c) => (await c()).spec));
  const rows: Array<[string, string]> = [
    ...specs.map((s): [string, string] => [s.name, s.summary]),
    ['help [command]', "this text, or a command's options"],
  ];
  const col = Math.max(...rows.map(([n]) => n.length)) + 3;
  return (
    `usage: memra <command> [options]\n\ncommands:\n${rows.map(([n, s]) => `  ${n.padEnd(col)}${s}`).join('\n')}\n\n` +
    '`memra <command> --help` lists its options with their defaults and limits; `memra --version` prints the version.'
  );
}

async function command(name: string): Promise<CliCommand> {
  const c = COMMANDS[name];
  if (!c)
    throw new UsageError(
      `unknown command '${name}'; the commands are ${[...Object.keys(COMMANDS), 'help'].join(', ')}`,
      'ERR_UNKNOWN_COMMAND',
    );
  return c();
}

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    console.error(await usage());
    return 2;
  }
  if (name === '--help' || name === '-h') {
    console.log(await usage());
    return 0;
  }
  if (name === '--version' || name === '-v') {
    console.log(packageVersion());
    return 0;
  }
  if (name === 'help') {
    if (rest.length === 0) console.log(await usage());
    else console.log(commandHelp((await command(rest[0]!)).spec));
    return 0;
  }
  const cmd = await command(name);
  const { values, positionals, help } = parseCommandLine(cmd.spec, rest);
  if (help) {
    console.log(commandHelp(cmd.spec));
    return 0;
  }
  await cmd.run(values, positionals);
  return 0;
}

/**
 * Run one command line (the words after `memra`) and return its exit status; an error is
 * reported here, as JSON on stdout when the line has --json.
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  try {
    return await main(argv);
  } catch (e) {
    const r = cliErrorReport(e);
    const cmd = argv[0] !== undefined && COMMANDS[argv[0]] ? argv[0] : undefined;
    if (argv.includes('--json')) console.log(JSON.stringify({ error: { code: r.code, message: r.message } }));
    else
      console.error(
        `memra${cmd ? ` ${cmd}` : ''}: ${r.message}${r.usage ? `\n(\`memra ${cmd ? `${cmd} ` : ''}--help\` lists ${cmd ? 'the options' : 'the commands'})` : ''}`,
      );
    return r.usage ? 2 : 1;
  }
}
