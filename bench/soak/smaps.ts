/**
 * Where resident memory sits, for diagnosing an RSS check (`npm run soak -- --smaps --out DIR`):
 * at checkpoints along a long decode, /proc/self/smaps_rollup whole, /proc/self/smaps summed by
 * kind of mapping ([heap], [stack], anonymous, file-backed by path: libcuda, /dev/nvidia*, ...),
 * process.memoryUsage(), and the V8 spaces of the main isolate and of each device worker's (whose
 * heaps are in RSS but in none of the main thread's figures). A loop's checkpoints go to one JSON
 * file in DIR, with what grew between the first checkpoint after the warm-up and the last, by
 * group and by mapping (a mapping is keyed by its start address, so one that grows in place is
 * named; mappings that came or went are summed apart).
 *
 * Anonymous mappings are split four ways by what their shape suggests, not by what they are
 * (smaps names no owner): executable (JIT code), 256 KiB and 256 KiB-aligned (V8's heap pages,
 * any isolate's: its young generation's too, which become resident only as the isolate's
 * allocations first walk through them), 64 MiB-aligned and at most 64 MiB (glibc's per-thread
 * malloc arenas), and the rest (larger V8 objects, thread stacks, malloc's large blocks, the
 * driver's). Only mappings outside the V8 pages are listed one by one. There is no hook for
 * mallinfo.
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import v8 from 'node:v8';
import type { HeapSpace } from '../../src/workers/device-control.js';

const KiB = 1024;
const MiB = 2 ** 20;
const ARENA = 64 * MiB;
const V8_PAGE = 256 * KiB;
export const V8_PAGES = 'anonymous, 256 KiB pages (V8 heap?)';

/** Bytes per smaps field (Rss, Pss, Private_Dirty, Anonymous, Swap, ...). */
export type Fields = Record<string, number>;

export interface Mapping {
  start: number;
  end: number;
  perms: string;
  /** The path or pseudo-name ([heap], [stack], [anon:...]); '' for anonymous. */
  path: string;
  fields: Fields;
}

/** The group a mapping is summed under. */
export function groupOf(m: Pick<Mapping, 'start' | 'end' | 'perms' | 'path'>): string {
  if (m.path.startsWith('[')) return m.path.startsWith('[anon:') ? `anonymous ${m.path}` : m.path;
  if (m.path !== '') return m.path.replace(/ \(deleted\)$/, '');
  if (m.perms.includes('x')) return 'anonymous, executable';
  if (m.end - m.start === V8_PAGE && m.start % V8_PAGE === 0) return V8_PAGES;
  if (m.start % ARENA === 0 && m.end - m.start <= ARENA) return 'anonymous, 64 MiB-aligned (a malloc arena?)';
  return 'anonymous';
}

/** /proc/<self>/smaps, parsed. */
export function parseSmaps(text: string): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | undefined;
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      cur = {
        start: Number.parseInt(head[1]!, 16),
        end: Number.parseInt(head[2]!, 16),
        perms: head[3]!,
        path: head[4]!.trim(),
        fields: {},
      };
      out.push(cur);
      continue;
    }
    const f = /^(\w+):\s+(\d+) kB$/.exec(line);
    if (f && cur) cur.fields[f[1]!] = Number(f[2]) * KiB;
  }
  return out;
}

/** /proc/<self>/smaps_rollup, parsed (bytes). */
export function parseRollup(text: string): Fields {
  const out: Fields = {};
  for (const line of text.split('\n')) {
    const f = /^(\w+):\s+(\d+) kB$/.exec(line);
    if (f) out[f[1]!] = Number(f[2]) * KiB;
  }
  return out;
}

const SUMMED = ['Size', 'Rss', 'Pss', 'Private_Dirty', 'Private_Clean', 'Shared_Dirty', 'Shared_Clean', 'Swap'];

export interface Group {
  mappings: number;
  sizeBytes: number;
  rssBytes: number;
  privateDirtyBytes: number;
  swapBytes: number;
}

export interface Checkpoint {
  /** `warm-up`, `25%`, `end`, ... */
  label: string;
  /** Iterations done when it was taken. */
  at: number;
  /** Seconds since the loop's first checkpoint. */
  atS: number;
  /** How long reading and summing took, ms (the step times around it include it). */
  tookMs: number;
  memoryUsage: NodeJS.MemoryUsage;
  /** V8 heap spaces by isolate: `main`, then `rank 0`, `rank 1` (each device worker's). */
  v8Spaces: Record<string, Record<string, Omit<HeapSpace, 'name'>>>;
  rollup: Fields;
  groups: Record<string, Group>;
  /** Every mapping but V8's pages with at least 64 KiB resident: `start-end perms path`, resident and dirty bytes. */
  mappings: Array<{ key: string; group: string; sizeBytes: number; rssBytes: number; privateDirtyBytes: number }>;
}

function sumGroups(maps: Mapping[]): Record<string, Group> {
  const groups: Record<string, Group> = {};
  for (const m of maps) {
    const k = groupOf(m);
    const g = groups[k] ?? { mappings: 0, sizeBytes: 0, rssBytes: 0, privateDirtyBytes: 0, swapBytes: 0 };
    groups[k] = g;
    g.mappings++;
    g.sizeBytes += m.fields.Size ?? m.end - m.start;
    g.rssBytes += m.fields.Rss ?? 0;
    g.privateDirtyBytes += m.fields.Private_Dirty ?? 0;
    g.swapBytes += m.fields.Swap ?? 0;
  }
  return groups;
}

const keyOf = (m: Mapping): string => `${m.start.toString(16)}-${m.end.toString(16)} ${m.perms} ${m.path}`.trim();

const bySpace = (spaces: HeapSpace[]): Record<string, Omit<HeapSpace, 'name'>> =>
  Object.fromEntries(spaces.map(({ name, ...rest }) => [name, rest]));

/** The main isolate's spaces, as heapSpaces() gives a worker's. */
export function mainHeapSpaces(): HeapSpace[] {
  return v8.getHeapSpaceStatistics().map((s) => ({
    name: s.space_name,
    sizeBytes: s.space_size,
    physicalBytes: s.physical_space_size,
    usedBytes: s.space_used_size,
  }));
}

/**
 * One checkpoint of this process, after a collection where `--expose-gc` allows one; `workers`
 * gives each device worker's heap spaces (a worker's heap is not collected here).
 */
export async function takeCheckpoint(
  label: string,
  at: number,
  t0: number,
  workers: () => Promise<HeapSpace[][]> = async () => [],
): Promise<Checkpoint> {
  (globalThis as { gc?: () => void }).gc?.();
  const t = performance.now();
  const ranks = await workers().catch(() => [] as HeapSpace[][]);
  const maps = parseSmaps(readFileSync('/proc/self/smaps', 'utf8'));
  let rollup: Fields;
  try {
    rollup = parseRollup(readFileSync('/proc/self/smaps_rollup', 'utf8'));
  } catch {
    // Kernels before 4.14: the same sums from smaps.
    rollup = Object.fromEntries(SUMMED.map((f) => [f, maps.reduce((a, m) => a + (m.fields[f] ?? 0), 0)]));
  }
  const v8Spaces = {
    main: bySpace(mainHeapSpaces()),
    ...Object.fromEntries(ranks.map((r, i) => [`rank ${i}`, bySpace(r)])),
  };
  const mappings = maps
    .filter((m) => (m.fields.Rss ?? 0) >= 64 * KiB && groupOf(m) !== V8_PAGES)
    .map((m) => ({
      key: keyOf(m),
      group: groupOf(m),
      sizeBytes: m.end - m.start,
      rssBytes: m.fields.Rss ?? 0,
      privateDirtyBytes: m.fields.Private_Dirty ?? 0,
    }));
  const memoryUsage = process.memoryUsage();
  const groups = sumGroups(maps);
  return {
    label,
    at,
    atS: (t - t0) / 1000,
    tookMs: performance.now() - t,
    memoryUsage,
    v8Spaces,
    rollup,
    groups,
    mappings,
  };
}

export interface Growth {
  from: string;
  to: string;
  rssBytes: number;
  /** Groups whose resident bytes moved by at least 64 KiB, largest rise first. */
  groups: Array<{ group: string; rssBytes: number; privateDirtyBytes: number }>;
  /** Mappings present at both (same start address) that moved by at least 64 KiB, largest first. */
  mappings: Array<{ key: string; group: string; rssBytes: number }>;
  /** Resident bytes in mappings at `to` whose start was not mapped at `from`, and the reverse. */
  newMappingsRssBytes: number;
  goneMappingsRssBytes: number;
  memoryUsage: Record<string, number>;
  /** Per isolate, each space's resident bytes moved (physicalBytes), where it moved. */
  v8PhysicalBytes: Record<string, Record<string, number>>;
}

/** What moved from checkpoint `a` to `b`. */
export function growth(a: Checkpoint, b: Checkpoint): Growth {
  const names = new Set([...Object.keys(a.groups), ...Object.keys(b.groups)]);
  const groups = [...names]
    .map((group) => ({
      group,
      rssBytes: (b.groups[group]?.rssBytes ?? 0) - (a.groups[group]?.rssBytes ?? 0),
      privateDirtyBytes: (b.groups[group]?.privateDirtyBytes ?? 0) - (a.groups[group]?.privateDirtyBytes ?? 0),
    }))
    .filter((g) => Math.abs(g.rssBytes) >= 64 * KiB)
    .sort((x, y) => y.rssBytes - x.rssBytes);
  const startOf = (k: string): string => k.slice(0, k.indexOf('-'));
  const before = new Map(a.mappings.map((m) => [startOf(m.key), m]));
  const after = new Map(b.mappings.map((m) => [startOf(m.key), m]));
  const mappings: Growth['mappings'] = [];
  let fresh = 0,
    gone = 0;
  for (const [s, m] of after) {
    const p = before.get(s);
    if (!p) fresh += m.rssBytes;
    else if (Math.abs(m.rssBytes - p.rssBytes) >= 64 * KiB)
      mappings.push({ key: m.key, group: m.group, rssBytes: m.rssBytes - p.rssBytes });
  }
  for (const [s, m] of before) if (!after.has(s)) gone += m.rssBytes;
  mappings.sort((x, y) => y.rssBytes - x.rssBytes);
  const v8PhysicalBytes: Growth['v8PhysicalBytes'] = {};
  for (const [iso, spaces] of Object.entries(b.v8Spaces)) {
    const moved = Object.entries(spaces)
      .map(([k, v]) => [k, v.physicalBytes - (a.v8Spaces[iso]?.[k]?.physicalBytes ?? 0)] as const)
      .filter(([, d]) => d !== 0);
    if (moved.length > 0) v8PhysicalBytes[iso] = Object.fromEntries(moved);
  }
  const mu = a.memoryUsage as unknown as Record<string, number>;
  const mv = b.memoryUsage as unknown as Record<string, number>;
  return {
    from: a.label,
    to: b.label,
    rssBytes: (b.rollup.Rss ?? 0) - (a.rollup.Rss ?? 0),
    groups,
    mappings: mappings.slice(0, 40),
    newMappingsRssBytes: fresh,
    goneMappingsRssBytes: gone,
    memoryUsage: Object.fromEntries(Object.keys(mv).map((k) => [k, mv[k]! - (mu[k] ?? 0)])),
    v8PhysicalBytes,
  };
}

/** A growth in a line: the total, the three groups that rose most, and each isolate's heap. */
export function describeGrowth(g: Growth): string {
  const mib = (b: number): string => `${b >= 0 ? '+' : ''}${(b / MiB).toFixed(1)} MiB`;
  const top = g.groups
    .filter((x) => x.rssBytes > 0)
    .slice(0, 3)
    .map((x) => `${x.group} ${mib(x.rssBytes)}`);
  const heaps = Object.entries(g.v8PhysicalBytes).map(
    ([iso, spaces]) => `${iso} ${mib(Object.values(spaces).reduce((a, b) => a + b, 0))}`,
  );
  return (
    `smaps from ${g.from} to ${g.to}: RSS ${mib(g.rssBytes)}${top.length ? `; most in ${top.join(', ')}` : ''}` +
    `${heaps.length ? `; V8 heaps resident ${heaps.join(', ')}` : ''}`
  );
}

/** Where along the loop after its warm-up the checkpoints fall: closer early, where the GPU's RSS rose. */
const AT = [1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 3 / 4];

/**
 * Checkpoints along one loop of `count` iterations: after its first iteration, at the end of its
 * warm-up (`from`), at 1/32, 1/16, 1/8, 1/4, 1/2 and 3/4 of the rest, and at its end; `write`
 * puts them in `dir`.
 */
export class SmapsTrace {
  readonly checkpoints: Checkpoint[] = [];
  private readonly t0 = performance.now();
  private readonly marks = new Map<number, string>();

  constructor(
    private readonly dir: string,
    private readonly name: string,
    from: number,
    count: number,
    private readonly workers: () => Promise<HeapSpace[][]> = async () => [],
  ) {
    for (const f of AT) {
      const at = from + Math.round((count - from) * f);
      if (at > from && at < count) this.marks.set(at, `${+(100 * f).toFixed(1)}%`);
    }
  }

  async take(label: string, at: number): Promise<void> {
    this.checkpoints.push(await takeCheckpoint(label, at, this.t0, this.workers));
  }

  /** After iteration `i` (0-based): the label of the checkpoint due then, if one is. */
  due(i: number): string | undefined {
    return this.marks.get(i + 1);
  }

  /** Writes `smaps-<name>.json`; returns its path and the growth from the warm-up's checkpoint to the last. */
  write(): { path: string; growth?: Growth } {
    const warm = this.checkpoints.find((c) => c.label === 'warm-up');
    const last = this.checkpoints[this.checkpoints.length - 1];
    const g = warm && last && last !== warm ? growth(warm, last) : undefined;
    mkdirSync(this.dir, { recursive: true });
    const path = join(this.dir, `smaps-${this.name.replace(/[^\w.+-]+/g, '-')}.json`);
    writeFileSync(
      path,
      JSON.stringify(
        {
          loop: this.name,
          pid: process.pid,
          execArgv: process.execArgv,
          growth: g,
          // Each step between checkpoints, for a finer look.
          steps: this.checkpoints.slice(1).map((c, i) => growth(this.checkpoints[i]!, c)),
          checkpoints: this.checkpoints,
        },
        null,
        1,
      ),
    );
    return g ? { path, growth: g } : { path };
  }
}
