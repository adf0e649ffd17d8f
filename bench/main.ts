/** `npm run bench -- [suite...] [options]`: see run.ts (the same runner as `memra bench`). */
import { runBench } from './run.js';

process.exitCode = await runBench(process.argv.slice(2));
