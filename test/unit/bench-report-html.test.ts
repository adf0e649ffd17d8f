/**
 * The benchmark results page as text, on made-up results files: self-contained, an SVG per joins
 * op with a line per (transport, metric), each line from the newest file holding it, tables and
 * bar charts for the other suites, versions decoded in the header, and every string from the
 * files escaped.
 */
import { strict as assert } from 'node:assert';
import { renderBenchReport } from '../../bench/report-html.js';
import { newestLines } from '../../bench/newest-results.js';
import type { Machine, NamedResults, Row } from '../../bench/results-types.js';
import { count, section } from '../support/html-sections.js';

const MACHINE: Machine = {
  hostname: 'box',
  label: '2xH200',
  loopback: false,
  os: 'linux 6.1',
  cpu: 'Xeon',
  cores: 32,
  node: 'v20.20.2',
  backend: 'cuda',
  gpus: [0, 1].map((ordinal) => ({
    ordinal,
    name: 'NVIDIA H200',
    totalMem: 140 * 2 ** 30,
    multiProcessorCount: 132,
    major: 9,
    minor: 0,
    pciBusId: `0000:00:0${6 + ordinal}.0`,
    unifiedAddressing: true,
    canMapHostMemory: true,
    clockRateKHz: 1980000,
  })) as unknown as Machine['gpus'],
  driverVersion: 13000,
  cudaRuntimeVersion: 12080,
  nccl: 22803,
  addon: 'memra-addon 0.1.0',
};

/** A row whose figures are given; p90 and the rest follow from them where a test does not care. */
function row(
  suite: string,
  op: string,
  transport: string,
  bytes: number,
  median: number,
  p99: number,
  more: Partial<Omit<Row, 'preset'>> & { preset?: string | null } = {},
): Row {
  return {
    suite,
    op,
    transport,
    bytes,
    preset: null,
    unit: 'us',
    median,
    p90: p99,
    p99,
    n: 100,
    min: median,
    max: p99,
    mean: median,
    method: 'made up',
    samples: [],
    ...more,
  };
}

function file(name: string, suite: string, date: string, rows: Row[], machine: Machine = MACHINE): NamedResults {
  return { file: name, data: { suite, date, machine, rows } };
}

/** The joins section's parts: the text from each op's heading to the next. */
function opParts(joins: string): Map<string, string> {
  const parts = joins.split('<h3 class="op">').slice(1);
  return new Map(parts.map((p) => [p.slice(0, p.indexOf('</h3>')), p]));
}

const SIZES = [4096, 65536, 1048576];
const OPS = ['allReduce', 'broadcast', 'gather', 'allGather'];

/** Joins rows: median = 10 × (op index + 1) + size index, p99 twice that; device and host for ll, device only for nccl. */
function joinsRows(): Row[] {
  return OPS.flatMap((op, o) =>
    SIZES.flatMap((bytes, s) => [
      row('joins', op, 'll', bytes, 10 * (o + 1) + s, 2 * (10 * (o + 1) + s), { metric: 'device' }),
      row('joins', op, 'll', bytes, 5 * (o + 1) + s, 2 * (5 * (o + 1) + s), { metric: 'host' }),
      row('joins', op, 'nccl', bytes, 30 * (o + 1) + s, 2 * (30 * (o + 1) + s), { metric: 'device' }),
    ]),
  );
}

describe('bench report page', () => {
  const ring = file('ring-a.json', 'ring', '2026-11-30T01:00:00.000Z', [
    row('ring', 'join-kernel', 'ring', 4096, 6.8, 18, { p90: 8.7, n: 20000 }),
    row('ring', 'join-nop', 'ring', 4096, 2.14, 5.46, { p90: 2.65, n: 20000 }),
    row('ring', 'direct-kernel', 'none', 4096, 8.47, 16.9, { p90: 10.5, n: 20000 }),
  ]);
  const decode = file('decode-a.json', 'decode', '2026-11-30T03:00:00.000Z', [
    row('decode', 'step', 'll', 0, 9.4, 10.8, { unit: 'ms', metric: 'host' }),
    row('decode', 'step', 'nccl', 0, 11.9, 14.2, { unit: 'ms', metric: 'host' }),
    row('decode', 'joins', 'll', 0, 1.5, 2.5, { unit: 'ms', metric: 'host' }),
    row('decode', 'joins', 'push', 0, -0.5, 0.5, { unit: 'ms', metric: 'host' }),
  ]);
  const joins = file('joins-a.json', 'joins', '2026-11-30T02:00:00.000Z', joinsRows());
  const all = [decode, joins, ring];

  it('is one self-contained page: no network reference, no script, nothing fetched', () => {
    const html = renderBenchReport(all);
    assert.match(html, /^<!doctype html>/);
    assert.match(html, /<\/html>\s*$/);
    assert.doesNotMatch(html, /https?:/);
    assert.doesNotMatch(html, /<script|<link|<img|<iframe|@import|src=|href=|url\(/i);
    assert.doesNotMatch(html, /NaN|undefined/);
    assert.equal(count(html, /<svg /), count(html, /<\/svg>/), 'every svg closed');
  });

  it("orders the suites joins, ring, decode, then the rest, whatever the files' order", () => {
    const html = renderBenchReport([
      file('zz.json', 'zeta', '2026-11-29T00:00:00.000Z', [row('zeta', 'x', 't', 0, 1, 2)]),
      ...all,
    ]);
    const ids = [...html.matchAll(/<section id="([^"]+)">/g)].map((m) => m[1]);
    assert.deepEqual(ids, ['machines', 'suite-joins', 'suite-ring', 'suite-decode', 'suite-zeta']);
  });

  it("keeps one GPU's and loopback's files apart, under their machine label: a newer loopback line never replaces a two-GPU one", () => {
    const one: Machine = { ...MACHINE, label: '1xH200-loopback', loopback: true, gpus: MACHINE.gpus.slice(0, 1) };
    const loop = file(
      'joins-loop.json',
      'joins',
      '2026-12-02T00:00:00.000Z',
      [row('joins', 'allReduce', 'll', 4096, 77.5, 99.5, { metric: 'device' })],
      one,
    );
    const single = file(
      'decode-one.json',
      'decode',
      '2026-12-02T00:00:00.000Z',
      [row('decode', 'step', 'unsharded', 0, 5.79, 6.1, { unit: 'ms', metric: 'host' })],
      { ...MACHINE, label: '1xH200', gpus: MACHINE.gpus.slice(0, 1) },
    );
    const html = renderBenchReport([...all, loop, single]);
    const ids = [...html.matchAll(/<section id="([^"]+)">/g)].map((m) => m[1]);
    assert.deepEqual(ids, [
      'machines',
      'suite-joins',
      'suite-ring',
      'suite-decode',
      'suite-decode-1xH200',
      'suite-joins-1xH200-loopback',
    ]);
    const two = section(html, 'suite-joins');
    assert.doesNotMatch(two, /joins-loop\.json|77\.5/, 'the two-GPU joins hold no loopback figure');
    assert.match(two, /joins-a\.json/);
    const apart = section(html, 'suite-joins-1xH200-loopback');
    assert.match(apart, /<h2>Joins on 1xH200-loopback<\/h2>/);
    assert.match(apart, /joins-loop\.json/);
    assert.match(section(html, 'suite-decode-1xH200'), /<h2>decode on 1xH200<\/h2>[\s\S]*decode-one\.json/);
    assert.doesNotMatch(section(html, 'suite-decode'), /decode-one\.json/);
  });

  it('header: the machine, its GPUs and versions decoded, the files and their dates', () => {
    const head = section(renderBenchReport(all), 'machines');
    assert.match(head, /2 × NVIDIA H200 \(140 GiB, sm_90\)/);
    for (const v of [
      '<td>13.0</td>',
      '<td>12.8</td>',
      '<td>2.28.3</td>',
      '<td>v20.20.2</td>',
      '<td>memra-addon 0.1.0</td>',
    ])
      assert.ok(head.includes(v), v);
    // One machine for all three files.
    const machines = head.slice(0, head.indexOf('<details>'));
    assert.equal(count(machines, /<tr><td>/), 1);
    assert.match(machines, /<td class="num">3<\/td><\/tr>/);
    assert.match(head, /dated 2026-11-30T01:00:00.000Z to 2026-11-30T03:00:00.000Z/);
    for (const f of ['ring-a.json', 'joins-a.json', 'decode-a.json']) assert.ok(head.includes(`<code>${f}</code>`), f);
    // A file from before NCCL was recorded, on a CPU-only machine: said so, not guessed.
    const old = { ...MACHINE, label: 'cpu16', gpus: [], driverVersion: 0 } as Partial<Machine>;
    delete old.nccl;
    const oldHead = section(
      renderBenchReport([file('old.json', 'ring', '2026-01-01', [], old as Machine)]),
      'machines',
    );
    assert.match(oldHead, /none \(CPU reference\)/);
    assert.match(oldHead, /<td>not recorded<\/td>/);
    assert.match(oldHead, /<td>none<\/td>/);
  });

  it("joins: an SVG per op, in the walk's order, a line per (transport, metric) with its points and legend", () => {
    const parts = opParts(section(renderBenchReport(all), 'suite-joins'));
    assert.deepEqual([...parts.keys()], ['broadcast', 'allGather', 'gather', 'allReduce']);
    for (const [op, part] of parts) {
      assert.equal(count(part, /<svg /), 1, op);
      assert.equal(count(part, /<g class="series">/), 3, `${op}: ll device, ll host, nccl device`);
      assert.equal(count(part, /<circle class="point"/), 3 * SIZES.length, op);
      for (const label of ['ll · device', 'll · host', 'nccl · device'])
        assert.ok(part.includes(`>${label}</text></g>`), `${op}: legend ${label}`);
    }
    // broadcast is OPS[1]: ll device at 64 KiB (size index 1) has median 21 and p99 42.
    assert.match(
      parts.get('broadcast')!,
      /<title>ll · device, 64 KiB: median 21 µs, p90 42 µs, p99 42 µs \(n = 100\); joins-a\.json \(2026-11-30T02:00:00\.000Z\)<\/title>/,
    );
    // The table repeats every figure: gather (OPS[2]) nccl device at 1 MiB: median 92, p99 184.
    assert.match(
      parts.get('gather')!,
      /<td class="num" title="median 92 µs, p90 184 µs, p99 184 µs \(n = 100\)"[^>]*>92 µs \(184 µs\)<\/td><td><code>joins-a\.json<\/code><\/td>/,
    );
  });

  it('joins: the newest file holding a line supplies the whole line; lines it lacks keep their older file', () => {
    const older = file('joins-b-older.json', 'joins', '2026-11-30T01:00:00.000Z', [
      row('joins', 'broadcast', 'll', 4096, 10, 20, { metric: 'device' }),
      row('joins', 'broadcast', 'll', 65536, 11, 22, { metric: 'device' }),
      row('joins', 'broadcast', 'push', 4096, 40, 80, { metric: 'device' }),
    ]);
    // Newer by date though first in the list and first by name.
    const newer = file('joins-a-newer.json', 'joins', '2026-11-30T05:00:00.000Z', [
      row('joins', 'broadcast', 'll', 4096, 99, 199, { metric: 'device' }),
    ]);
    const part = opParts(section(renderBenchReport([newer, older]), 'suite-joins')).get('broadcast')!;
    const tips = [...part.matchAll(/<title>(ll · device[^<]*)<\/title>/g)].map((m) => m[1]);
    assert.deepEqual(tips, [
      'll · device, 4 KiB: median 99 µs, p90 199 µs, p99 199 µs (n = 100); joins-a-newer.json (2026-11-30T05:00:00.000Z)',
    ]);
    assert.match(part, /<title>push · device, 4 KiB: median 40 µs, .*; joins-b-older\.json/);
    assert.doesNotMatch(part, /median 10 µs|median 11 µs/);

    // Same date: the later name wins, as the README table's order has it.
    const lines = newestLines([
      file('b.json', 'joins', 'd', [row('joins', 'gather', 'll', 4096, 2, 3)]),
      file('a.json', 'joins', 'd', [row('joins', 'gather', 'll', 4096, 1, 3)]),
    ]);
    assert.deepEqual(
      lines.map((l) => [l.file, l.rows.map((r) => r.median)]),
      [['b.json', [2]]],
    );
  });

  it("ring: a table per file with every row's figures and the way it was measured", () => {
    const s = section(renderBenchReport(all), 'suite-ring');
    assert.equal(count(s, /<svg /), 0);
    assert.equal(count(s, /<tr title="made up">/), 3);
    assert.match(
      s,
      /<td>join-kernel<\/td><td>ring<\/td><td><\/td><td class="num">4096<\/td><td>us<\/td><td class="num">6.8<\/td><td class="num">8.7<\/td><td class="num">18<\/td><td class="num">20000<\/td>/,
    );
  });

  it('decode: a bar chart per (op, metric, unit), bars from 0 (left of it when negative) with a whisker to p99', () => {
    const s = section(renderBenchReport(all), 'suite-decode');
    assert.equal(count(s, /<svg /), 2, 'step and joins');
    assert.equal(count(s, /<g class="bar">/), 4);
    assert.match(s, /<title>nccl: median 11.9 ms, p90 14.2 ms, p99 14.2 ms \(n = 100\)<\/title>/);
    assert.equal(count(s, /<tr title="made up">/), 4);
    const joinsChart = s.slice(s.indexOf('joins (host), ms'));
    const rects = [...joinsChart.matchAll(/<rect x="([\d.-]+)" y="[\d.-]+" width="([\d.]+)"/g)]
      .slice(0, 2)
      .map((m) => [Number(m[1]), Number(m[2])]);
    const [ll, push] = rects as [[number, number], [number, number]];
    // Both bars meet at the zero line: ll (+1.5) starts there, push (-0.5) ends there, a third as long.
    // Coordinates are rounded to 0.1 px, so three of them may be off by 0.15 together.
    assert.ok(Math.abs(push[0] + push[1] - ll[0]) <= 0.2, `push [${push}] ends at ll's start ${ll[0]}`);
    assert.ok(Math.abs(push[1] * 3 - ll[1]) <= 0.5, `push ${push[1]} px, ll ${ll[1]} px`);
  });

  it('escapes every string from the results files', () => {
    const evil = '<script>alert("x")</script>';
    const html = renderBenchReport([
      file(
        'joins-<b>.json',
        'joins',
        '2026-11-30T00:00:00.000Z',
        [row('joins', 'broadcast', evil, 4096, 5, 9, { metric: 'device' })],
        { ...MACHINE, label: 'a&b', gpus: [{ ...MACHINE.gpus[0]!, name: '<i>gpu</i>' }] },
      ),
      file('ring-x.json', 'ring', '2026-11-30T00:00:00.000Z', [
        row('ring', '"op"', evil, 4096, 1, 2, { method: 'says "hi" <b>', unit: '<u>' }),
      ]),
      file('x.json', '<svg onload=x>', '2026-11-30T00:00:00.000Z', [row('s', 'o', 't', 0, 1, 2)]),
    ]);
    assert.doesNotMatch(html, /<script|<b>|<i>|<u>|<svg onload/i);
    assert.ok(html.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'), 'the transport, escaped');
    assert.ok(html.includes('<tr title="says &quot;hi&quot; &lt;b&gt;">'), 'the method, escaped in its attribute');
    assert.ok(html.includes('a&amp;b'));
    assert.ok(html.includes('&lt;i&gt;gpu&lt;/i&gt;'));
    assert.ok(html.includes('<section id="suite-_svg_onload_x_">'), 'a suite name made safe for an id');
  });

  it('renders no files, and figures that are not numbers, without NaN', () => {
    assert.match(renderBenchReport([]), /No results files/);
    const html = renderBenchReport([
      file('r.json', 'ring', 'd', [row('ring', 'o', 't', 4096, NaN, NaN)]),
      file('j.json', 'joins', 'd', [row('joins', 'broadcast', 't', 4096, 0, 0)]),
    ]);
    assert.doesNotMatch(html, /NaN/);
    assert.match(html, /<td class="num">n\/a<\/td>/);
    assert.match(html, /Nothing to plot on log axes/);
  });
});
