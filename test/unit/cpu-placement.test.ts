import { strict as assert } from 'node:assert';
import { parseCpuList, planWorkerCpus, readPlacementInputs } from '../../src/runtime/cpu-placement.js';

/** Two sockets of 8 cores, hyperthreads c and c + 16: socket 0 = 0-7,16-23, socket 1 = 8-15,24-31. */
const socket = (s: number): number[] => [
  ...Array.from({ length: 8 }, (_, i) => s * 8 + i),
  ...Array.from({ length: 8 }, (_, i) => 16 + s * 8 + i),
];
const siblings = (c: number): number[] => [c % 16, (c % 16) + 16];
const all = Array.from({ length: 32 }, (_, i) => i);

describe('worker CPU placement', () => {
  it('parses sysfs cpu lists and refuses malformed ones by name', () => {
    assert.deepEqual(parseCpuList('0-3,8,10-11\n'), [0, 1, 2, 3, 8, 10, 11]);
    assert.deepEqual(parseCpuList('5'), [5]);
    assert.deepEqual(parseCpuList(''), []);
    assert.deepEqual(parseCpuList('3,1-2,2'), [1, 2, 3]);
    assert.throws(() => parseCpuList('0-3,x'), /'x' is not a CPU number or a range/);
    assert.throws(() => parseCpuList('7-2'), /range '7-2' runs backwards/);
  });

  it("gives each worker a core of its own on its GPU's socket, never a sibling of the other's, never CPU 0", () => {
    // GPUs on different sockets: each worker on its own socket's highest core.
    assert.deepEqual(planWorkerCpus({ allowed: all, local: [socket(0), socket(1)], siblings }), [23, 31]);
    // Both GPUs on socket 0: the second worker skips 23's sibling (7) as well as 23 itself.
    const both = planWorkerCpus({ allowed: all, local: [socket(0), socket(0)], siblings });
    assert.deepEqual(both, [23, 22]);
    assert.notEqual(both[0]! % 16, both[1]! % 16, 'not hyperthread siblings');
  });

  it('keeps to the allowed CPUs, falls back to any allowed core, and says when there is none to spare', () => {
    // A cpuset of 0-3: local lists name socket 1 only, so the plan uses allowed cores.
    assert.deepEqual(
      planWorkerCpus({ allowed: [0, 1, 2, 3], local: [socket(1), socket(1)], siblings: (c) => [c] }),
      [3, 2],
    );
    // Unknown locality (empty list): any allowed core.
    assert.deepEqual(planWorkerCpus({ allowed: [0, 4, 5], local: [[], []], siblings: (c) => [c] }), [5, 4]);
    // Only CPU 0 and one more: the second worker gets none.
    assert.deepEqual(
      planWorkerCpus({
        allowed: [0, 1],
        local: [
          [0, 1],
          [0, 1],
        ],
        siblings: (c) => [c],
      }),
      [1, undefined],
    );
  });

  it('reads its inputs from /proc and sysfs, lowercasing the bus id, and tolerates missing topology files', () => {
    const files: Record<string, string> = {
      '/proc/self/status': 'Name:\tnode\nCpus_allowed_list:\t0-31\nMems_allowed_list:\t0-1\n',
      '/sys/bus/pci/devices/0000:19:00.0/local_cpulist': '0-7,16-23\n',
      '/sys/devices/system/cpu/cpu23/topology/thread_siblings_list': '7,23\n',
    };
    const read = (p: string): string => {
      if (!(p in files)) throw new Error(`ENOENT ${p}`);
      return files[p]!;
    };
    const inp = readPlacementInputs(['0000:19:00.0'.toUpperCase(), '0000:9A:00.0'], read);
    assert.deepEqual(inp.allowed, all);
    assert.deepEqual(inp.local, [socket(0), []]);
    assert.deepEqual(inp.siblings(23), [7, 23]);
    assert.deepEqual(inp.siblings(5), [5], 'no topology file: a core is its own only sibling');
    assert.throws(() => readPlacementInputs([], () => 'Name: node\n'), /no Cpus_allowed_list/);
  });
});
