/**
 * The HTML report as text: self-contained (no network reference, no script), every profile string
 * escaped, an SVG per plot, and a heat map of exactly layers × hops cells whose colours and
 * tooltips follow the medians.
 */
import { strict as assert } from 'node:assert';
import { renderHtmlReport } from '../../src/profile/html-report.js';
import { HOPS, SEED_HOPS, type Hop } from '../../src/profile/profile-data.js';
import { syntheticProfile } from '../support/synthetic-profile.js';
import { count, section } from '../support/html-sections.js';

describe('profile HTML report', () => {
  // device = 10·(layer+1) + hop index µs, so layer 0 fan-out is the fastest cell and the last layer's ep return the slowest.
  const layers = 5;
  const profile = syntheticProfile({
    layers,
    steps: 12,
    transport: ({ layer }) => (layer % 2 === 0 ? 'll' : 'nccl'),
    deviceUs: ({ layer, hop }) => 10 * (layer + 1) + SEED_HOPS.indexOf(hop),
    epGraph: { dispatches: 7, captures: 3, refused: [{ layer: 4, reason: 'refused <b>per-rank</b> & "quoted"' }] },
  });

  it('is one self-contained page: no network reference, no script, no external file', () => {
    const html = renderHtmlReport(profile);
    assert.match(html, /^<!doctype html>/);
    assert.match(html, /<\/html>\s*$/);
    assert.doesNotMatch(html, /https?:\/\//);
    assert.doesNotMatch(html, /<script|<link|<img|<iframe|@import|src=/i);
    // The only url() is the heat map's own gradient, by fragment.
    for (const u of html.match(/url\([^)]*\)/g) ?? []) assert.match(u, /^url\(#[\w-]+\)$/);
  });

  it('has an SVG per plot: two latency ladders, the heat map, tokens/s over time', () => {
    const html = renderHtmlReport(profile);
    assert.equal(count(section(html, 'latency'), /<svg /), 2);
    assert.equal(count(section(html, 'heatmap'), /<svg /), 1);
    assert.equal(count(section(html, 'throughput'), /<svg /), 1);
    for (const id of ['latency', 'heatmap', 'throughput']) {
      const s = section(html, id);
      assert.equal(count(s, /<svg /), count(s, /<\/svg>/), `#${id}: every svg closed`);
    }
  });

  it('ladders: one device and one host ladder per transport and per (hop, transport), on a labelled log axis', () => {
    const lat = section(renderHtmlReport(profile), 'latency');
    const [perTransport, perHop] = lat.split('</svg>');
    assert.equal(count(perTransport!, /<g class="ladder">/), 2 * 2);
    assert.equal(count(perHop!, /<g class="ladder">/), 2 * SEED_HOPS.length * 2);
    // Device times span 10..54 µs and host 1..5 µs: decades from 1 µs to 100 µs, labelled.
    for (const tick of ['1 µs', '10 µs', '100 µs'])
      assert.ok(perTransport!.includes(`>${tick}</text>`), `tick ${tick}`);
    // The ll transport serves layers 0, 2, 4: device max 50 + the last hop's index.
    assert.match(
      perTransport!,
      new RegExp(
        `<title>ll, device: min 10 µs, .*max ${50 + SEED_HOPS.length - 1} µs \\(n = ${3 * SEED_HOPS.length * 12}\\)</title>`,
      ),
    );
  });

  it('heat map: exactly layers × hops cells, tooltips with the medians, colour from fastest to slowest', () => {
    const heat = section(renderHtmlReport(profile), 'heatmap');
    const cells = [
      ...heat.matchAll(
        /<rect class="cell[^"]*" x="[\d.]+" y="[\d.]+" width="[\d.]+" height="[\d.]+" fill="(#[0-9a-f]{6})"><title>([^<]*)<\/title><\/rect>/g,
      ),
    ];
    assert.equal(cells.length, layers * SEED_HOPS.length);
    const byTip = new Map(cells.map((c) => [c[2]!.split(':')[0]!, { fill: c[1]!, tip: c[2]! }]));
    const at = (l: number, hop: Hop) => byTip.get(`layer ${l} · ${hop} (${l % 2 === 0 ? 'll' : 'nccl'})`)!;
    // A constant cost's median is the constant: layer 2 wo = 30 + 2.
    assert.match(at(2, 'wo').tip, /median 32 µs, p90 32 µs, p99 32 µs, max 32 µs; .*\(n = 12\)/);
    // The ramp's ends (viridis) on the fastest and the slowest cell.
    assert.equal(at(0, 'fan-out').fill, '#440154');
    assert.equal(at(layers - 1, 'ep return').fill, '#fde725');
    // Different medians, different colours.
    assert.notEqual(at(1, 'wo').fill, at(3, 'wo').fill);
    assert.match(heat, /url\(#heat-ramp\)/, 'a legend in the ramp');
  });

  it("heat map: a column per hop of the walk profiled, and a layer's untimed hop a grey cell, so the grid is still layers × hops", () => {
    const walk = ['head all-gather', 'wo all-gather', 'ep exchange'] as const;
    const p = syntheticProfile({ layers: 3, steps: 2, hops: walk });
    p.joins = p.joins.filter((j) => !(j.layer === 1 && j.hop === 'wo all-gather'));
    const heat = section(renderHtmlReport(p), 'heatmap');
    assert.equal(count(heat, /<rect class="cell/), 3 * walk.length);
    assert.equal(count(heat, /<rect class="cell empty"/), 1);
    assert.match(heat, /<title>layer 1 · wo all-gather: no samples<\/title>/);
    for (const hop of HOPS) {
      const column = new RegExp(`font-weight="600">${hop}</text>`);
      if ((walk as readonly string[]).includes(hop)) assert.match(heat, column);
      else assert.doesNotMatch(heat, column, `${hop}: a hop the walk does not run has no column`);
    }
  });

  it('tokens/s over time: one point per step on each line, labelled axes', () => {
    const t = section(renderHtmlReport(profile), 'throughput');
    for (const cls of ['per-step', 'moving']) {
      const pts = new RegExp(`<polyline class="${cls}" points="([^"]*)"`).exec(t)![1]!.split(' ');
      assert.equal(pts.length, profile.steps.length, cls);
      // x grows with time.
      const xs = pts.map((p) => Number(p.split(',')[0]));
      for (let i = 1; i < xs.length; i++) assert.ok(xs[i]! > xs[i - 1]!, `${cls} x ${i}`);
    }
    assert.match(t, />tokens\/s<\/text>/);
    assert.match(t, />time since the first step \((ms|s)\)<\/text>/);
  });

  it('summary: meta, tokens/s, EP graph counters, total joins', () => {
    const s = section(renderHtmlReport(profile), 'summary');
    assert.match(s, /<th>Joins timed<\/th><td>300<\/td>/);
    assert.match(s, /<th>Layers<\/th><td>5<\/td>/);
    assert.match(s, /dispatches 7, captures 3, layers refused 1/);
    assert.match(s, /<th>Tokens\/s, median step<\/th><td>[\d,]+<\/td>/);
  });

  it('escapes every string from the profile', () => {
    const p = syntheticProfile({
      layers: 1,
      steps: 2,
      preset: '<script>alert(1)</script>',
      machine: 'rig "A" & <b>B</b>',
      transport: () => '<i>x</i>',
      epGraph: { dispatches: 0, captures: 0, refused: [{ layer: 0, reason: "it's <br>" }] },
    });
    p.meta.config = { note: '</pre><script>' };
    const html = renderHtmlReport(p);
    assert.doesNotMatch(html, /<script|<b>|<i>|<br>|<\/pre><script/);
    assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(html.includes('rig &quot;A&quot; &amp; &lt;b&gt;B&lt;/b&gt;'));
    assert.ok(html.includes('&lt;i&gt;x&lt;/i&gt;'));
    assert.ok(html.includes('it&#39;s &lt;br&gt;'));
  });

  it('renders an empty profile without NaN', () => {
    const html = renderHtmlReport(syntheticProfile({ steps: 0 }));
    assert.doesNotMatch(html, /NaN|undefined|Infinity/);
    assert.match(section(html, 'latency'), /No joins were timed/);
    assert.match(section(html, 'throughput'), /No steps were recorded/);
  });
});
