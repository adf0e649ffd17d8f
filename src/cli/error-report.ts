/**
 * An error as the command line reports it: its code (the API's own, or the CLI's for a bad
 * command line) and a message in CLI syntax. The API words a fix as it is called
 * (`backend: 'cpu'`); here the same fix reads `--backend cpu`.
 */
import type { Remedy } from '../api/errors.js';
import { UsageError } from './options.js';

/** The API's option names as the command line spells them. */
const FLAGS: Readonly<Record<string, string>> = {
  backend: '--backend',
  model: '--preset',
  layout: '--layout',
  maxBatch: '--batch',
  devices: '--devices',
};

export interface CliErrorReport {
  code: string;
  message: string;
  /** A command line that cannot run as written (exit status 2), else a failure (1). */
  usage: boolean;
}

export function cliErrorReport(e: unknown): CliErrorReport {
  if (!(e instanceof Error)) return { code: 'ERR_UNEXPECTED', message: String(e), usage: false };
  const { code, problem, remedies } = e as Error & { code?: unknown; problem?: string; remedies?: readonly Remedy[] };
  const cli = (remedies ?? []).filter((r) => FLAGS[r.option]);
  const message =
    problem !== undefined && cli.length > 0
      ? `${problem}; use ${cli.map((r) => `${FLAGS[r.option]} ${r.value}`).join(' or ')}`
      : (problem ?? e.message);
  return { code: typeof code === 'string' ? code : 'ERR_UNEXPECTED', message, usage: e instanceof UsageError };
}
