/**
 * Which results stand for a (transport, op, metric) line when several runs measured it: the
 * newest file that has the line supplies all of its rows, so a later run of one transport
 * supersedes that transport's figures (and drops sizes it no longer runs) while lines it did not
 * run keep their older file. The README's joins table (bench/report.ts) follows the same rule.
 */
import type { NamedResults, Row } from './results-types.js';

export interface ResultsLine {
  transport: string;
  op: string;
  /** '' where the suite reports one metric only. */
  metric: string;
  file: string;
  date: string;
  /** The line's rows in its newest file, by bytes ascending (the last row of a size wins within a file). */
  rows: Row[];
}

/** What the order reads of a results file: its name and the date it records. */
type Dated = { file: string; data: { date: string } };

/** Oldest first by the date the file records; files of one date by name, as report.ts lists them. */
export function byDateThenName(a: Dated, b: Dated): number {
  return String(a.data.date).localeCompare(String(b.data.date)) || (a.file < b.file ? -1 : a.file > b.file ? 1 : 0);
}

/**
 * A card's one-GPU decode files in the order its figures are looked for: the `decode` bench's runs,
 * newest first, then the `roofline` suite's, newest first; files of other suites not at all. The
 * decode bench measures the build in the tree (scripts/gpu-session.sh's one-gpu); the roofline
 * suite is also what ab-roofline runs on each build it compares against, so its newest run may be
 * another build's, and it speaks for a card only where no decode bench has.
 */
export function byDecodeRecord<T extends Dated & { data: { suite: string } }>(files: T[]): T[] {
  const newestFirst = (suite: string): T[] =>
    files.filter((f) => f.data.suite === suite).sort((a, b) => byDateThenName(b, a));
  return [...newestFirst('decode'), ...newestFirst('roofline')];
}

/** Each (transport, op, metric) line from the newest file holding it, in the order lines first appear. */
export function newestLines(entries: NamedResults[]): ResultsLine[] {
  const lines = new Map<string, ResultsLine>();
  for (const { file, data } of [...entries].sort(byDateThenName)) {
    const fresh = new Map<string, Map<number, Row>>();
    for (const r of data.rows) {
      const k = JSON.stringify([r.transport, r.op, r.metric ?? '']);
      if (!fresh.has(k)) fresh.set(k, new Map());
      fresh.get(k)!.set(r.bytes, r);
    }
    for (const [k, rows] of fresh) {
      const [transport, op, metric] = JSON.parse(k) as [string, string, string];
      lines.set(k, {
        transport,
        op,
        metric,
        file,
        date: data.date,
        rows: [...rows.values()].sort((x, y) => x.bytes - y.bytes),
      });
    }
  }
  return [...lines.values()];
}
