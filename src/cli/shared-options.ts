/** Options more than one command takes, written once so their help reads the same everywhere. */
import type { CliOption } from './options.js';

export const BACKEND_OPTION = {
  type: 'choice',
  choices: ['auto', 'cuda', 'cpu'],
  default: 'auto',
  help: 'auto: CUDA where a GPU is visible, else the CPU reference',
} as const satisfies CliOption;

export const JSON_OPTION = {
  type: 'flag',
  help: 'one JSON document on stdout (an error too: { "error": { "code", "message" } }, with a non-zero exit status)',
} as const satisfies CliOption;
