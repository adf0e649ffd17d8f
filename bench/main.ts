/** `npm run bench -- [suite...] [options]`: `memra bench` (see `memra bench --help`). */
import { runCli } from '../src/cli/run-cli.js';

process.exitCode = await runCli(['bench', ...process.argv.slice(2)]);
