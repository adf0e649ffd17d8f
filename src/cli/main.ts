#!/usr/bin/env node
/** The `memra` command (src/cli/run-cli.ts). `npm start` runs `memra decode` on the best available backend. */
import { runCli } from './run-cli.js';

process.exitCode = await runCli(process.argv.slice(2));
