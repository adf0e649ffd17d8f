/**
 * The soak's smaps checkpoints (bench/soak/smaps.ts): smaps parsed and grouped by kind of
 * mapping, what grew between two checkpoints named by group and by mapping, a loop's file
 * written where it was asked, and `--smaps` refused without a directory to write to.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { soakMain } from '../../bench/soak/main.js';
import {
  SmapsTrace,
  V8_PAGES,
  describeGrowth,
  groupOf,
  growth,
  parseRollup,
  parseSmaps,
  takeCheckpoint,
  type Checkpoint,
} from '../../bench/soak/smaps.js';

const SMAPS = `55d0c0a00000-55d0c0c00000 rw-p 00000000 00:00 0                          [heap]
Size:               2048 kB
Rss:                1024 kB
Private_Dirty:      1024 kB
7f0000000000-7f0000040000 rw-p 00000000 00:00 0
Size:                256 kB
Rss:                 128 kB
Private_Dirty:       128 kB
7f1000000000-7f1001000000 rw-p 00000000 00:00 0
Size:              16384 kB
Rss:                8192 kB
Private_Dirty:      8192 kB
7f2000000000-7f2000100000 r-xp 00000000 00:00 0
Size:               1024 kB
Rss:                 512 kB
7f3000001000-7f3000801000 rw-p 00000000 00:00 0
Size:               8192 kB
Rss:                  64 kB
7f4000000000-7f4000200000 r-xp 00000000 08:01 1234                       /usr/lib/x86_64-linux-gnu/libcuda.so.1
Size:               2048 kB
Rss:                2048 kB
7f5000000000-7f5000001000 rw-s 00000000 00:05 99                         /dev/nvidiactl (deleted)
Size:                  4 kB
Rss:                   4 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
Rss:                  80 kB
`;

const KiB = 1024;

function checkpoint(label: string, rss: Record<string, number>, heap: number): Checkpoint {
  const maps = Object.entries(rss).map(([key, rssBytes]) => ({
    key,
    group: key.endsWith('libcuda.so.1') ? 'libcuda' : 'anonymous',
    sizeBytes: 0,
    rssBytes,
    privateDirtyBytes: rssBytes,
  }));
  const groups: Checkpoint['groups'] = {};
  for (const m of maps) {
    const g = groups[m.group] ?? { mappings: 0, sizeBytes: 0, rssBytes: 0, privateDirtyBytes: 0, swapBytes: 0 };
    g.mappings++;
    g.rssBytes += m.rssBytes;
    g.privateDirtyBytes += m.privateDirtyBytes;
    groups[m.group] = g;
  }
  const total = maps.reduce((a, m) => a + m.rssBytes, 0);
  return {
    label,
    at: 0,
    atS: 0,
    tookMs: 0,
    memoryUsage: { rss: total, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 },
    v8Spaces: { 'rank 0': { new_space: { sizeBytes: 32 << 20, physicalBytes: heap, usedBytes: 0 } } },
    rollup: { Rss: total },
    groups,
    mappings: maps,
  };
}

describe("the soak's smaps checkpoints", () => {
  it('parses smaps and groups each mapping by what its name and shape say', () => {
    const maps = parseSmaps(SMAPS);
    assert.equal(maps.length, 8);
    assert.deepEqual(maps[0], {
      start: 0x55d0c0a00000,
      end: 0x55d0c0c00000,
      perms: 'rw-p',
      path: '[heap]',
      fields: { Size: 2048 * KiB, Rss: 1024 * KiB, Private_Dirty: 1024 * KiB },
    });
    assert.deepEqual(maps.map(groupOf), [
      '[heap]',
      V8_PAGES,
      'anonymous, 64 MiB-aligned (a malloc arena?)',
      'anonymous, executable',
      'anonymous',
      '/usr/lib/x86_64-linux-gnu/libcuda.so.1',
      '/dev/nvidiactl',
      '[stack]',
    ]);
    assert.deepEqual(parseRollup('Rss:  1736 kB\nPss_Anon:  112 kB\n'), { Rss: 1736 * KiB, Pss_Anon: 112 * KiB });
  });

  it('names what grew between two checkpoints: the group, the mapping at its address, the isolate', () => {
    const a = checkpoint('warm-up', { '1000-2000 rw-p': 1 << 20, '3000-4000 r-xp /x/libcuda.so.1': 4 << 20 }, 4 << 20);
    const b = checkpoint(
      'end',
      { '1000-3000 rw-p': 9 << 20, '3000-4000 r-xp /x/libcuda.so.1': 4 << 20, '9000-a000 rw-p': 1 << 20 },
      12 << 20,
    );
    const g = growth(a, b);
    assert.equal(g.rssBytes, 9 << 20);
    assert.deepEqual(g.groups, [{ group: 'anonymous', rssBytes: 9 << 20, privateDirtyBytes: 9 << 20 }]);
    // The mapping that grew in place is named by its start, though its end moved.
    assert.deepEqual(g.mappings, [{ key: '1000-3000 rw-p', group: 'anonymous', rssBytes: 8 << 20 }]);
    assert.equal(g.newMappingsRssBytes, 1 << 20);
    assert.equal(g.goneMappingsRssBytes, 0);
    assert.deepEqual(g.v8PhysicalBytes, { 'rank 0': { new_space: 8 << 20 } });
    assert.equal(
      describeGrowth(g),
      'smaps from warm-up to end: RSS +9.0 MiB; most in anonymous +9.0 MiB; V8 heaps resident rank 0 +8.0 MiB',
    );
  });

  it("takes this process's checkpoints and writes a loop's file with what grew after the warm-up", async () => {
    const one = await takeCheckpoint('now', 0, performance.now());
    assert.ok(one.rollup.Rss! > 0 && one.groups['[heap]'] !== undefined);
    assert.ok(one.v8Spaces.main?.new_space !== undefined);
    const dir = mkdtempSync(join(tmpdir(), 'soak-smaps-'));
    try {
      const t = new SmapsTrace(dir, 'long-decode-ll+graph', 10, 330, async () => [
        [{ name: 'new_space', sizeBytes: 1, physicalBytes: 1, usedBytes: 0 }],
      ]);
      await t.take('after the first step', 0);
      const due: Array<[number, string]> = [];
      for (let i = 0; i < 330; i++) {
        if (i + 1 === 10) await t.take('warm-up', 10);
        const label = t.due(i);
        if (label) {
          due.push([i + 1, label]);
          await t.take(label, i + 1);
        }
      }
      await t.take('end', 330);
      assert.deepEqual(due, [
        [20, '3.1%'],
        [30, '6.3%'],
        [50, '12.5%'],
        [90, '25%'],
        [170, '50%'],
        [250, '75%'],
      ]);
      const w = t.write();
      assert.equal(w.path, join(dir, 'smaps-long-decode-ll+graph.json'));
      const file = JSON.parse(readFileSync(w.path, 'utf8'));
      assert.equal(file.checkpoints.length, 9);
      assert.equal(file.steps.length, 8);
      assert.deepEqual([file.growth.from, file.growth.to], ['warm-up', 'end']);
      assert.ok(file.checkpoints[1].v8Spaces['rank 0'].new_space);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('npm run soak refuses --smaps without --out, before it opens anything', async () => {
    const errors: string[] = [];
    const log = console.error;
    console.error = (m: string) => errors.push(m);
    try {
      assert.equal(await soakMain(['--backend', 'cpu', '--smaps']), 2);
    } finally {
      console.error = log;
    }
    assert.deepEqual(errors, ['soak: --smaps needs --out DIR: its checkpoints are written there']);
  });
});
