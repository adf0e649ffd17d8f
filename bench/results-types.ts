/**
 * The shape of one bench/results/*.json as bench/results-file.ts writes it, for the readers of
 * those files (the README tables and the HTML page).
 */
import type { Machine, Row } from './results-file.js';
import type { LoopResult } from './soak/loop-result.js';

export type { Machine, Row };

export interface ResultsFile {
  suite: string;
  date: string;
  machine: Machine;
  rows: Row[];
  /** The soak's loops (bench/soak/): what ran and what held. */
  loops?: LoopResult[];
}

/** A results file with the name it was read under. */
export interface NamedResults {
  file: string;
  data: ResultsFile;
}
