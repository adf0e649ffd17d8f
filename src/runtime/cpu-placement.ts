/**
 * Which CPU core each pinned device worker runs on. A worker's loop reads ring records the main
 * thread writes and makes one CUDA launch per record; left to the scheduler it moves between
 * cores (cold caches) and sometimes onto the socket far from its GPU (every launch crosses the
 * interconnect). So each worker gets one core of its own, on its GPU's NUMA node (sysfs
 * `local_cpulist` of the GPU's PCI device), never a hyperthread sibling of another worker's core,
 * and never CPU 0, where the kernel and the main thread's first timers tend to land.
 *
 * The plan is pure (planWorkerCpus) and tested on its own; reading sysfs is separate
 * (readPlacementInputs) and anything it cannot read leaves the workers unpinned, with the reason.
 */
import { readFileSync } from 'node:fs';

/** "0-3,8,10-11" -> [0, 1, 2, 3, 8, 10, 11]; throws naming the bad part. */
export function parseCpuList(text: string): number[] {
  const out = new Set<number>();
  const body = text.trim();
  if (body === '') return [];
  for (const part of body.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`cpu list '${text.trim()}': '${part}' is not a CPU number or a range a-b`);
    const lo = Number(m[1]),
      hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo) throw new Error(`cpu list '${text.trim()}': range '${part}' runs backwards`);
    for (let c = lo; c <= hi; c++) out.add(c);
  }
  return [...out].sort((a, b) => a - b);
}

export interface PlacementInputs {
  /** CPUs this process may use. */
  allowed: number[];
  /** Per rank: the CPUs local to its GPU (empty when unknown). */
  local: number[][];
  /** A CPU's hyperthread siblings, itself included. */
  siblings(cpu: number): number[];
}

/**
 * One CPU per rank: the highest-numbered allowed CPU local to the rank's GPU that no other rank's
 * core shares a physical core with; else any such allowed CPU. Undefined for a rank when nothing
 * is left (fewer free cores than ranks).
 */
export function planWorkerCpus(p: PlacementInputs): Array<number | undefined> {
  const allowed = new Set(p.allowed);
  const taken = new Set<number>();
  return p.local.map((local) => {
    const free = (c: number): boolean => c !== 0 && allowed.has(c) && !taken.has(c);
    const pick = (pool: number[]): number | undefined => [...pool].sort((a, b) => b - a).find(free);
    const cpu = pick(local.filter((c) => allowed.has(c))) ?? pick(p.allowed);
    if (cpu !== undefined) for (const s of p.siblings(cpu)) taken.add(s);
    return cpu;
  });
}

/** The planner's inputs from /proc and sysfs, for GPUs at these PCI bus ids ("0000:19:00.0"). */
export function readPlacementInputs(
  busIds: string[],
  read: (path: string) => string = (f) => readFileSync(f, 'utf8'),
): PlacementInputs {
  const status = read('/proc/self/status');
  const line = /^Cpus_allowed_list:\s*(.*)$/m.exec(status);
  if (!line) throw new Error('/proc/self/status has no Cpus_allowed_list');
  const local = busIds.map((id) => {
    try {
      return parseCpuList(read(`/sys/bus/pci/devices/${id.toLowerCase()}/local_cpulist`));
    } catch {
      return []; // unknown locality: any allowed core will do
    }
  });
  return {
    allowed: parseCpuList(line[1]!),
    local,
    siblings: (cpu) => {
      try {
        return parseCpuList(read(`/sys/devices/system/cpu/cpu${cpu}/topology/thread_siblings_list`));
      } catch {
        return [cpu];
      }
    },
  };
}
