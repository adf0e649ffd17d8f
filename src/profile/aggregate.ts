/**
 * A profile summed up: per (layer, hop, transport) the joins' device and host-enqueue latency
 * (median, p90, p99, max from HDR histograms), rolled up per (hop, transport) over the layers,
 * per transport over the hops, and per (layer, hop) over transports for the heat map; and the
 * steps' tokens/s over time. Plain data, so it goes into JSON as it is.
 *
 * Percentiles are nearest-rank (the median of an even count is the lower middle sample), to
 * HDR precision: 3 significant digits. min and max are exact.
 */
import { HdrHistogram, nearestRank, type HdrOptions } from './hdr-histogram.js';
import { HOPS, type Hop, type JoinSample, type Profile, type StepSample } from './profile-data.js';

export interface LatencySummary {
  min: number;
  median: number;
  p90: number;
  p99: number;
  max: number;
}

/** The bytes the group's joins delivered: min < max says they varied (e.g. with the batch's rows). */
export interface ByteRange {
  min: number;
  max: number;
}

export interface JoinStats {
  n: number;
  bytes: ByteRange;
  /** The join on its receiving rank's stream, µs. */
  device: LatencySummary;
  /** The main thread enqueueing the join, µs. */
  host: LatencySummary;
}

export interface JoinRow extends JoinStats {
  layer: number;
  hop: Hop;
  transport: string;
}
/** One hop over every layer it ran on with that transport. */
export interface HopRollup extends JoinStats {
  hop: Hop;
  transport: string;
  layers: number;
}
/** One transport over every hop and layer it served. */
export interface TransportRollup extends JoinStats {
  transport: string;
  hops: Hop[];
}
/** One (layer, hop) over whichever transports served it (one, unless the config changed mid-run). */
export interface LayerHopCell extends JoinStats {
  layer: number;
  hop: Hop;
  transports: string[];
}

export interface ThroughputPoint {
  step: number;
  /** The step's host start after the first step's, ms. */
  tMs: number;
  rows: number;
  wallUs: number;
  tokensPerS: number;
  /** Tokens over wall time of the last `window` steps up to this one (fewer at the start). */
  movingTokensPerS: number;
}

export interface ThroughputSummary {
  steps: number;
  tokens: number;
  wallUs: number;
  /** All tokens over all steps' wall time: the run's throughput, weighting each step by its length. */
  overallTokensPerS: number;
  /** Over steps, exact (nearest rank). */
  minTokensPerS: number;
  medianTokensPerS: number;
  maxTokensPerS: number;
}

export interface Throughput {
  window: number;
  points: ThroughputPoint[];
  /** null when the profile has no steps. */
  summary: ThroughputSummary | null;
}

export interface Aggregate {
  joins: number;
  rows: JoinRow[];
  byHop: HopRollup[];
  byTransport: TransportRollup[];
  byLayerHop: LayerHopCell[];
  throughput: Throughput;
}

export interface AggregateOptions {
  /** Steps in the moving tokens/s (default 8). */
  window?: number;
}

/**
 * Up to 1000 s: a join stalled behind a hung peer should show up as the max, not refuse the
 * report. The wide top costs nothing, since buckets are allocated only where samples land.
 */
export const LATENCY_RANGE: HdrOptions = { digits: 3, lowest: 0.01, highest: 1e9 };

export function aggregate(profile: Profile, options: AggregateOptions = {}): Aggregate {
  const window = options.window ?? 8;
  if (!Number.isInteger(window) || window < 1)
    throw new RangeError(`aggregate: window must be a whole number of steps ≥ 1, got ${window}`);
  const layers = profile.meta.layers;
  if (!Number.isInteger(layers) || layers < 0)
    throw new RangeError(`aggregate: meta.layers must be a whole number ≥ 0, got ${String(layers)}`);

  const rows = new Map<string, { layer: number; hop: Hop; transport: string; g: JoinGroup }>();
  profile.joins.forEach((j, i) => {
    checkJoin(j, i, layers);
    const key = `${j.layer}\u0000${j.hop}\u0000${j.transport}`;
    let row = rows.get(key);
    if (!row) {
      row = { layer: j.layer, hop: j.hop, transport: j.transport, g: new JoinGroup() };
      rows.set(key, row);
    }
    row.g.add(j);
  });
  const ordered = [...rows.values()].sort(
    (a, b) => a.layer - b.layer || hopOrder(a.hop, b.hop) || byName(a.transport, b.transport),
  );

  const byHop = rollUp(
    ordered,
    (r) => `${r.hop}\u0000${r.transport}`,
    (r) => ({ hop: r.hop, transport: r.transport }),
  );
  const byTransport = rollUp(
    ordered,
    (r) => r.transport,
    (r) => ({ transport: r.transport }),
  );
  const byLayerHop = rollUp(
    ordered,
    (r) => `${r.layer}\u0000${r.hop}`,
    (r) => ({ layer: r.layer, hop: r.hop }),
  );

  return {
    joins: profile.joins.length,
    rows: ordered.map((r) => ({ layer: r.layer, hop: r.hop, transport: r.transport, ...r.g.stats() })),
    byHop: byHop
      .sort((a, b) => hopOrder(a.id.hop, b.id.hop) || byName(a.id.transport, b.id.transport))
      .map((u) => ({ ...u.id, layers: new Set(u.members.map((r) => r.layer)).size, ...u.g.stats() })),
    byTransport: byTransport
      .sort((a, b) => byName(a.id.transport, b.id.transport))
      .map((u) => ({ ...u.id, hops: HOPS.filter((h) => u.members.some((r) => r.hop === h)), ...u.g.stats() })),
    byLayerHop: byLayerHop
      .sort((a, b) => a.id.layer - b.id.layer || hopOrder(a.id.hop, b.id.hop))
      .map((u) => ({
        ...u.id,
        transports: [...new Set(u.members.map((r) => r.transport))].sort(byName),
        ...u.g.stats(),
      })),
    throughput: throughput(profile.steps, window),
  };
}

function throughput(steps: StepSample[], window: number): Throughput {
  steps.forEach(checkStep);
  const seen = new Set<number>();
  for (const s of steps) {
    if (seen.has(s.step)) throw new RangeError(`aggregate: step ${s.step} appears twice in the profile's steps`);
    seen.add(s.step);
  }
  const sorted = [...steps].sort((a, b) => a.step - b.step);
  const t0 = sorted[0]?.hostStartMs ?? 0;
  const points: ThroughputPoint[] = sorted.map((s, i) => {
    const recent = sorted.slice(Math.max(0, i - window + 1), i + 1);
    return {
      step: s.step,
      tMs: s.hostStartMs - t0,
      rows: s.rows,
      wallUs: s.wallUs,
      tokensPerS: perSecond(s.rows, s.wallUs),
      movingTokensPerS: perSecond(
        sum(recent, (r) => r.rows),
        sum(recent, (r) => r.wallUs),
      ),
    };
  });
  if (points.length === 0) return { window, points, summary: null };
  const rates = points.map((p) => p.tokensPerS).sort((a, b) => a - b);
  const tokens = sum(sorted, (s) => s.rows),
    wallUs = sum(sorted, (s) => s.wallUs);
  return {
    window,
    points,
    summary: {
      steps: points.length,
      tokens,
      wallUs,
      overallTokensPerS: perSecond(tokens, wallUs),
      minTokensPerS: rates[0]!,
      medianTokensPerS: rates[nearestRank(50, rates.length) - 1]!,
      maxTokensPerS: rates[rates.length - 1]!,
    },
  };
}

/** One group's histograms; rollups merge their members' histograms rather than re-read the joins. */
class JoinGroup {
  readonly device = new HdrHistogram(LATENCY_RANGE);
  readonly host = new HdrHistogram(LATENCY_RANGE);
  private bytesMin = Infinity;
  private bytesMax = -Infinity;

  add(j: JoinSample): void {
    this.device.record(j.deviceUs);
    this.host.record(j.hostEnqueueUs);
    this.bytesMin = Math.min(this.bytesMin, j.bytes);
    this.bytesMax = Math.max(this.bytesMax, j.bytes);
  }

  absorb(other: JoinGroup): void {
    this.device.merge(other.device);
    this.host.merge(other.host);
    this.bytesMin = Math.min(this.bytesMin, other.bytesMin);
    this.bytesMax = Math.max(this.bytesMax, other.bytesMax);
  }

  stats(): JoinStats {
    return {
      n: this.device.count,
      bytes: { min: this.bytesMin, max: this.bytesMax },
      device: summarise(this.device),
      host: summarise(this.host),
    };
  }
}

function summarise(h: HdrHistogram): LatencySummary {
  return { min: h.min, median: h.percentile(50), p90: h.percentile(90), p99: h.percentile(99), max: h.max };
}

interface Row {
  layer: number;
  hop: Hop;
  transport: string;
  g: JoinGroup;
}

function rollUp<Id>(
  rows: Row[],
  key: (r: Row) => string,
  id: (r: Row) => Id,
): Array<{ id: Id; members: Row[]; g: JoinGroup }> {
  const out = new Map<string, { id: Id; members: Row[]; g: JoinGroup }>();
  for (const r of rows) {
    const k = key(r);
    let u = out.get(k);
    if (!u) {
      u = { id: id(r), members: [], g: new JoinGroup() };
      out.set(k, u);
    }
    u.members.push(r);
    u.g.absorb(r.g);
  }
  return [...out.values()];
}

function checkJoin(j: JoinSample, i: number, layers: number): void {
  const where = `aggregate: join ${i} (step ${j.step}, layer ${j.layer}, hop ${JSON.stringify(j.hop)})`;
  if (!(HOPS as readonly string[]).includes(j.hop))
    throw new RangeError(`${where}: hop must be one of ${HOPS.map((h) => JSON.stringify(h)).join(', ')}`);
  if (!Number.isInteger(j.layer) || j.layer < 0 || j.layer >= layers)
    throw new RangeError(`${where}: layer must be a whole number in [0, ${layers}) (meta.layers)`);
  if (typeof j.transport !== 'string' || j.transport === '')
    throw new RangeError(`${where}: transport must be a non-empty string, got ${JSON.stringify(j.transport)}`);
  for (const field of ['bytes', 'deviceUs', 'hostEnqueueUs'] as const) {
    const v = j[field];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
      throw new RangeError(`${where}: ${field} must be a finite number ≥ 0, got ${String(v)}`);
    if (field !== 'bytes' && v > LATENCY_RANGE.highest!)
      throw new RangeError(`${where}: ${field} ${v} µs is beyond the ${LATENCY_RANGE.highest} µs the histograms track`);
  }
}

function checkStep(s: StepSample): void {
  const where = `aggregate: step ${s.step}`;
  if (!Number.isInteger(s.step))
    throw new RangeError(`aggregate: a step's index must be a whole number, got ${String(s.step)}`);
  if (!Number.isInteger(s.rows) || s.rows < 1)
    throw new RangeError(`${where}: rows must be a whole number ≥ 1, got ${String(s.rows)}`);
  if (typeof s.wallUs !== 'number' || !Number.isFinite(s.wallUs) || s.wallUs <= 0)
    throw new RangeError(`${where}: wallUs must be a finite number > 0, got ${String(s.wallUs)}`);
  if (typeof s.hostStartMs !== 'number' || !Number.isFinite(s.hostStartMs))
    throw new RangeError(`${where}: hostStartMs must be a finite number, got ${String(s.hostStartMs)}`);
}

function perSecond(tokens: number, us: number): number {
  return (tokens * 1e6) / us;
}

function sum<T>(xs: T[], f: (x: T) => number): number {
  let s = 0;
  for (const x of xs) s += f(x);
  return s;
}

function hopOrder(a: Hop, b: Hop): number {
  return HOPS.indexOf(a) - HOPS.indexOf(b);
}

function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
