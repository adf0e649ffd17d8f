/**
 * The one-GPU decode targets (docs/performance.md): each step case's share of its floor
 * (`rooflinePct`, bench/decode-roofline.ts) against its goal, from the newest one-GPU file of the
 * card they are set for (TARGET_CARD, bench/results-machine.ts) that measured the case, a decode
 * bench run before any roofline suite run (newest-results.ts's byDecodeRecord). They are one
 * GPU's goals, so two-GPU and loopback files do not count, nor another card's. The goals are what
 * a decode kernel is judged by in the field: FlashMLA's decode attention reads at 90% of its
 * card's bandwidth, so every weight byte read once at 90% of the floor, a little less where the
 * cache's rows are read too (position 4000), a batch's routing (t = 8) and an eager step's launch
 * gaps.
 */
import { type Found, type Line, line, linesTable, type StoredResults } from './report-targets.js';
import { byDecodeRecord } from './newest-results.js';
import { isTargetCardResults } from './results-machine.js';
import type { Row } from './results-types.js';

/** What the targets read of a results file: report-targets.ts's, and the machine it names. */
type Labelled = StoredResults & { data: { machine?: { label?: string; loopback?: boolean } } };

interface Case {
  target: string;
  /** The least share of the floor, in percent. */
  goal: number;
  pick: (r: Row) => boolean;
}

const deviceStep = (r: Row): boolean =>
  r.op === 'step' && r.metric === 'device' && r.rooflinePct !== undefined && r.floorMs !== undefined;
const graph = (r: Row): boolean => deviceStep(r) && r.transport === 'unsharded+graph';

export const ROOFLINE_CASES: Case[] = [
  {
    target: 'decode step, step graph, t = 1, positions 0-63',
    goal: 90,
    pick: (r) => graph(r) && r.t === 1 && r.positions === '0-63',
  },
  {
    target: 'decode step, step graph, t = 1, position 4000',
    goal: 88,
    pick: (r) => graph(r) && r.t === 1 && r.positions === '4000',
  },
  { target: 'decode step, step graph, t = 8', goal: 85, pick: (r) => graph(r) && r.t === 8 },
  {
    target: 'decode step, eager, t = 1, positions 0-63',
    goal: 80,
    pick: (r) => deviceStep(r) && r.transport === 'unsharded' && r.t === 1 && r.positions === '0-63',
  },
];

function newestCase(files: Labelled[], pick: (r: Row) => boolean): Found | undefined {
  for (const f of byDecodeRecord(files.filter(isTargetCardResults))) {
    const row = f.data.rows.find(pick);
    if (row) return { row, file: f.file };
  }
  return undefined;
}

export function rooflineTargetLines(files: Labelled[]): Line[] {
  return ROOFLINE_CASES.map((c) =>
    line(
      c.target,
      `≥ ${c.goal}% of the floor`,
      [newestCase(files, c.pick)].filter((f): f is Found => f !== undefined),
      ([f]) =>
        `${f!.row.rooflinePct!.toFixed(1)}% (${f!.row.median.toFixed(2)} ms against ${f!.row.floorMs!.toFixed(2)} ms)`,
      ([f]) => f!.row.rooflinePct! >= c.goal,
    ),
  );
}

export const rooflineTargetsTable = (files: Labelled[]): string => linesTable(rooflineTargetLines(files));
