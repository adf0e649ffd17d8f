/**
 * The targets table (docs/performance.md), computed from the stored results so that no measured figure in it
 * is typed by hand: each line names its goal, the figure the newest results
 * hold for it, whether it is met, and the file(s) it came from. A target with no results yet says
 * so rather than showing a stale number.
 */
import type { NamedResults, Row } from './results-types.js';
import { byDateThenName } from './newest-results.js';

/** The parts of a stored results file (results-types.ts) the targets read. */
export type StoredResults = Pick<NamedResults, 'file'> & {
  data: Pick<NamedResults['data'], 'suite' | 'date' | 'rows'>;
};

export interface Found {
  row: Row;
  file: string;
}

const us = (v: number): string => `${v.toFixed(2)} µs`;
const name = (file: string): string => `\`${file.replace(/\.json$/, '')}\``;

/** Every row matching `pick` in the newest file (by date, then name) that has one. */
function newestAll(files: StoredResults[], suite: string, pick: (r: Row) => boolean): Found[] {
  const sorted = files.filter((f) => f.data.suite === suite).sort(byDateThenName);
  for (let i = sorted.length - 1; i >= 0; i--) {
    const rows = sorted[i]!.data.rows.filter(pick);
    if (rows.length > 0) return rows.map((row) => ({ row, file: sorted[i]!.file }));
  }
  return [];
}

function newest(files: StoredResults[], suite: string, pick: (r: Row) => boolean): Found | undefined {
  return newestAll(files, suite, pick)[0];
}

/** Per transport, its newest row matching `pick`; the transport with the lowest median first. */
function bestByTransport(files: StoredResults[], suite: string, pick: (r: Row) => boolean): Found[] {
  const transports = new Set(
    files.filter((f) => f.data.suite === suite).flatMap((f) => f.data.rows.filter(pick).map((r) => r.transport)),
  );
  return [...transports]
    .map((t) => newest(files, suite, (r) => pick(r) && r.transport === t)!)
    .sort((a, b) => a.row.median - b.row.median);
}

export interface Line {
  target: string;
  goal: string;
  measured: string;
  met: boolean | undefined;
  from: string;
}

export function line(
  target: string,
  goal: string,
  found: Found[] | undefined,
  measured: (f: Found[]) => string,
  met: (f: Found[]) => boolean,
): Line {
  if (!found || found.length === 0) return { target, goal, measured: 'not measured yet', met: undefined, from: '' };
  return {
    target,
    goal,
    measured: measured(found),
    met: met(found),
    from: [...new Set(found.map((f) => name(f.file)))].join(', '),
  };
}

const KB8 = 8192;

export function targetLines(files: StoredResults[]): Line[] {
  const lines: Line[] = [];
  // The ring's main-thread cost, one kernel per worker.
  const ring = newest(files, 'ring', (r) => r.op === 'join-kernel');
  lines.push(
    line(
      'main-thread cost of a join, one kernel per worker',
      '≤ 5 µs',
      ring && [ring],
      ([f]) => `${us(f!.row.median)} median`,
      ([f]) => f!.row.median <= 5,
    ),
  );
  // Device times at 8 KB, the best transport of each op, and the eager host time.
  const device = (op: string): Found[] =>
    bestByTransport(files, 'joins', (r) => r.op === op && r.metric === 'device' && r.bytes === KB8);
  // From joins run28 on, per-rank graphs replay back to back; the same file's figure with
  // the pipeline drained between replays (every earlier run's method) is shown beside it.
  const sameFile = (x: Found, metric: string): Row | undefined =>
    files
      .find((f) => f.file === x.file)
      ?.data.rows.find(
        (r) => r.transport === x.row.transport && r.op === x.row.op && r.metric === metric && r.bytes === x.row.bytes,
      );
  const drained = (x: Found): string => {
    const d = sameFile(x, 'device-drained');
    return d ? `, drained between replays ${us(d.median)}` : '';
  };
  const best = (f: Found[]): string => `${us(f[0]!.row.median)} (\`${f[0]!.row.transport}\`${drained(f[0]!)})`;
  lines.push(
    line(
      'all-reduce, device time in a graph, 8 KB',
      '≤ 3 µs',
      device('allReduce'),
      (f) =>
        `${best(f)}; ${f
          .slice(1)
          .map((x) => `${x.row.transport} ${us(x.row.median)}`)
          .join(', ')}`,
      (f) => f[0]!.row.median <= 3,
    ),
  );
  for (const op of ['broadcast', 'allGather']) {
    lines.push(line(`${op}, device time, 8 KB`, '≤ 2 µs', device(op), best, (f) => f[0]!.row.median <= 2));
  }
  const host = ['broadcast', 'allGather', 'gather', 'allReduce']
    .map((op) => bestByTransport(files, 'joins', (r) => r.op === op && r.metric === 'host' && r.bytes === KB8)[0])
    .filter((f): f is Found => f !== undefined);
  // An `ll` host row measured with the LL server on (joins bench from run21) says so, with the
  // same file's launched figure beside it: the server is a choice (src/runtime/link.ts).
  const launched = (x: Found): Row | undefined => sameFile(x, 'host-launch');
  const hostCell = (x: Found): string => {
    const l = x.row.method?.includes('LL server on') ? launched(x) : undefined;
    return `${x.row.op} ${us(x.row.median)} (\`${x.row.transport}\`${l ? `, LL server; launched ${us(l.median)}` : ''})`;
  };
  lines.push(
    line(
      'eager join, host time, 8 KB (every op)',
      '≤ 6 µs',
      host,
      (f) => f.map(hostCell).join(', '),
      (f) => f.every((x) => x.row.median <= 6),
    ),
  );
  // The decode walk, bench at t = 1.
  const step = (t: string): Found | undefined => newest(files, 'decode', (r) => r.op === 'step' && r.transport === t);
  // Like against like: eagerly enqueued steps, and steps replayed from the step graph.
  const modes = [
    { label: 'eager', suffix: '' },
    { label: 'step graph', suffix: '+graph' },
  ];
  const versus = modes
    .map(({ label, suffix }) => {
      const one = step(`unsharded${suffix}`);
      const two = ['push', 'oneshot', 'll', 'peer', 'host', 'nccl', 'mixed']
        .map((t) => step(`${t}${suffix}`))
        .filter((f): f is Found => f !== undefined)
        .sort((a, b) => a.row.median - b.row.median);
      return one && two.length ? { label, one, two: two[0]! } : undefined;
    })
    .filter((x): x is { label: string; one: Found; two: Found } => x !== undefined);
  lines.push(
    line(
      'decode step, two GPUs against one (bench, t = 1)',
      'two faster',
      versus.length ? versus.flatMap((v) => [v.one, v.two]) : undefined,
      () =>
        versus
          .map(
            (v) =>
              `${v.label}: one GPU ${v.one.row.median.toFixed(2)} ms, two ${v.two.row.median.toFixed(2)} ms (\`${v.two.row.transport}\`)`,
          )
          .join('; '),
      () => versus.some((v) => v.two.row.median < v.one.row.median),
    ),
  );
  // Per path, [joins, step] of push and oneshot where both were measured.
  const shareOf = (suffix: string): Found[][] =>
    ['push', 'oneshot']
      .map((t) => {
        const j = newest(files, 'decode', (r) => r.op === 'joins' && r.transport === `${t}${suffix}`),
          s = step(`${t}${suffix}`);
        return j && s ? [j, s] : undefined;
      })
      .filter((x): x is Found[] => x !== undefined);
  // Met where both paths meet it (either transport), eagerly and from the step graph. Eager
  // differences count only from decode-2xH200-2026-11-30-run12 on: before, the walk without joins
  // ran first, on buffers no real step had filled, and was the slower walk (run11).
  const eagerShare = shareOf(''),
    graphShare = shareOf('+graph');
  const share = [...eagerShare, ...graphShare];
  const pct = ([j, s]: Found[]): string => `${j!.row.transport} ${((j!.row.median / s!.row.median) * 100).toFixed(1)}%`;
  const within = (f: Found[][]): boolean => f.length > 0 && f.some(([j, s]) => j!.row.median / s!.row.median <= 0.1);
  lines.push(
    line(
      "joins' share of a decode step, push or one-shot (eager and step graph)",
      '≤ 10%',
      share.flat(),
      () => `eager: ${eagerShare.map(pct).join(', ')}; step graph: ${graphShare.map(pct).join(', ')}`,
      () => within(eagerShare) && within(graphShare),
    ),
  );
  // Memory rows: bytes holds the device ordinal, the median GiB in use (cudaMemGetInfo).
  const gb = (x: Found): number => (x.row.median * 2 ** 30) / 1e9;
  lines.push(
    line(
      'device memory per GPU, bench sharded',
      '≤ 24 GB',
      newestAll(files, 'decode', (r) => r.op === 'memory' && r.transport === 'sharded'),
      (f) => f.map((x) => `GPU ${x.row.bytes}: ${gb(x).toFixed(2)} GB`).join(', '),
      (f) => f.every((x) => gb(x) <= 24),
    ),
  );
  // The EP step through the parent graph against its eager twin.
  const graph = newest(files, 'ep', (r) => r.op === 'moe step' && r.transport === 'graph');
  const eager = newest(files, 'ep', (r) => r.op === 'moe step' && r.transport === 'eager ll');
  const stepG = newest(files, 'ep', (r) => r.op === 'step' && r.transport === 'graph');
  const stepE = newest(files, 'ep', (r) => r.op === 'step' && r.transport === 'eager ll');
  // tokens/s at t = 1 is 1000 / (step ms): the per-token effect is the ratio of step medians.
  const perToken =
    stepG && stepE
      ? `; tokens/s ${(1000 / stepE.row.median).toFixed(1)} → ${(1000 / stepG.row.median).toFixed(1)} (${((stepE.row.median / stepG.row.median - 1) * 100).toFixed(1)}%)`
      : '';
  lines.push(
    line(
      'MoE step, EP graph against the eager twin (bench, t = 1)',
      '≥ 1.5× faster',
      graph && eager ? [graph, eager] : undefined,
      ([g, e]) =>
        `graph ${us(g!.row.median)}, eager ${us(e!.row.median)}: ${(e!.row.median / g!.row.median).toFixed(2)}×${perToken}`,
      ([g, e]) => e!.row.median / g!.row.median >= 1.5,
    ),
  );
  // Measured on both paths, eagerly and from the step graph; met only where both are.
  const prof = newest(files, 'decode', (r) => r.op === 'profile overhead' && r.transport === 'll');
  const profGraph = newest(files, 'decode', (r) => r.op === 'profile overhead' && r.transport === 'll+graph');
  const hostOnly = newest(
    files,
    'decode',
    (r) => r.op === 'profile overhead' && r.transport === 'll (host times only)',
  );
  const withEvents = newest(
    files,
    'decode',
    (r) => r.op === 'profile overhead' && r.transport === 'll (timing events)',
  );
  const apart = [
    hostOnly && `without device times ${hostOnly.row.median.toFixed(2)}%`,
    withEvents && `with timing events ${withEvents.row.median.toFixed(2)}%`,
  ]
    .filter(Boolean)
    .join(', ');
  const aside = apart ? ` (${apart})` : '';
  const pctOf = (f: Found): string => `${f.row.median.toFixed(2)}%`;
  lines.push(
    line(
      'profiling on, cost in tokens/s (eager and step graph)',
      '≤ 3%',
      prof && [prof, ...(profGraph ? [profGraph] : [])],
      ([e, g]) => `eager ${pctOf(e!)}${aside}${g ? `; step graph ${pctOf(g)}` : ''}`,
      (f) => f.every((x) => x.row.median <= 3),
    ),
  );
  return lines;
}

export function targetsTable(files: StoredResults[]): string {
  return linesTable(targetLines(files));
}

/** The targets table's layout, for any list of lines. */
export function linesTable(lines: Line[]): string {
  const out = ['| target | goal | measured (medians) | met | results |', '| --- | --- | --- | --- | --- |'];
  for (const l of lines)
    out.push(
      `| ${l.target} | ${l.goal} | ${l.measured} | ${l.met === undefined ? '—' : l.met ? '**yes**' : 'no'} | ${l.from} |`,
    );
  return out.join('\n');
}
