/** The decode config file: defaults, per-layer transports, and errors that name the path. */
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConfigError,
  DEFAULT_CONFIG,
  loadDecodeConfig,
  parseDecodeConfig,
  transportForLayer,
} from '../../src/decode/decode-config.js';

const BENCH = { name: "'bench'", layers: 30 };

describe('decode config', () => {
  it('fills every omitted field with the defaults', () => {
    assert.deepEqual(parseDecodeConfig({}), DEFAULT_CONFIG);
  });

  it('picks the last range covering a layer, else the default', () => {
    const cfg = parseDecodeConfig(
      {
        transport: {
          default: 'push',
          layers: [
            { from: 0, to: 9, transport: 'oneshot' },
            { from: 5, to: 6, transport: 'nccl' },
          ],
        },
      },
      { source: 'x', model: BENCH },
    );
    assert.deepEqual(
      [0, 4, 5, 6, 7, 9, 10, 29].map((l) => transportForLayer(cfg, l)),
      ['oneshot', 'oneshot', 'nccl', 'nccl', 'oneshot', 'oneshot', 'push', 'push'],
    );
  });

  it("takes the walk (seed by default), and the EP graph only with the seed walk's", () => {
    assert.equal(parseDecodeConfig({}).walk, 'seed');
    assert.equal(parseDecodeConfig({ walk: 'replicated' }).walk, 'replicated');
    assert.equal(parseDecodeConfig({ walk: 'replicated', stepGraph: true }).stepGraph, true);
    assert.equal(parseDecodeConfig({ walk: 'seed', epGraph: true }).epGraph, true);
  });

  it('takes the LL server idle bound (0, the default, launches every join)', () => {
    assert.equal(parseDecodeConfig({}).llServeMicros, 0);
    assert.equal(parseDecodeConfig({ llServeMicros: 1000 }).llServeMicros, 1000);
  });

  it('loads the mixed config shipped for the decode benchmark', () => {
    const cfg = loadDecodeConfig(new URL('../../../bench/configs/mixed.json', import.meta.url).pathname, {
      model: BENCH,
    });
    assert.equal(transportForLayer(cfg, 0), 'oneshot');
    assert.equal(transportForLayer(cfg, 15), 'll');
    assert.equal(transportForLayer(cfg, 25), 'nccl');
  });

  const bad: Array<[unknown, RegExp]> = [
    [
      { transport: { default: 'carrier-pigeon' } },
      /\$\.transport\.default: must be one of host, peer, push, oneshot, ll, nccl, got "carrier-pigeon"/,
    ],
    [
      { transport: { layers: [{ from: 0, to: 40, transport: 'push' }] } },
      /\$\.transport\.layers\[0\]\.to: must be an integer in \[0, 29\], got 40/,
    ],
    [
      { transport: { layers: [{ from: 5, to: 2, transport: 'push' }] } },
      /\$\.transport\.layers\[0\]\.to: must be >= from \(5\), got 2/,
    ],
    [{ transport: { layers: {} } }, /\$\.transport\.layers: must be an array/],
    [{ wo: 'sum' }, /\$\.wo: must be one of concat, allreduce, got "sum"/],
    [{ walk: 'balanced' }, /\$\.walk: must be one of seed, replicated, got "balanced"/],
    [
      { walk: 'replicated', epGraph: true },
      /\$\.epGraph: cannot be on with \$\.walk "replicated": the EP graph is the seed walk's EP step/,
    ],
    [{ epGraph: 'yes' }, /\$\.epGraph: must be true or false, got "yes"/],
    [{ validate: 1 }, /\$\.validate: must be true or false, got 1/],
    [{ stepGraph: 'on' }, /\$\.stepGraph: must be true or false, got "on"/],
    [{ spin: { deviceTicks: 0 } }, /\$\.spin\.deviceTicks: must be an integer in \[1, /],
    [{ llServeMicros: -1 }, /\$\.llServeMicros: must be an integer in \[0, 60000000\], got -1/],
    [{ llServeMicros: 2.5 }, /\$\.llServeMicros: must be an integer in \[0, 60000000\], got 2\.5/],
    [
      { spni: {} },
      /\$\.spni: unknown field; allowed: walk, transport, wo, epGraph, stepGraph, validate, profile, llServeMicros, spin/,
    ],
    [[], /\$: must be an object/],
  ];
  for (const [json, re] of bad) {
    it(`refuses ${JSON.stringify(json)} naming the path`, () => {
      assert.throws(
        () => parseDecodeConfig(json, { source: 'cfg.json', model: BENCH }),
        (e: Error) =>
          e instanceof ConfigError &&
          e.code === 'ERR_CONFIG' &&
          /^cfg\.json \(checked against model 'bench', 30 layers\): /.test(e.message) &&
          re.test(e.message),
      );
    });
  }

  it('names the file when it is missing or not JSON', () => {
    const dir = mkdtempSync(join(tmpdir(), 'memra-cfg-'));
    try {
      const broken = join(dir, 'broken.json');
      writeFileSync(broken, '{ "wo": ');
      assert.throws(() => loadDecodeConfig(broken), new RegExp(`${broken}: \\$: is not valid JSON`));
      assert.throws(
        () => loadDecodeConfig(join(dir, 'missing.json')),
        new RegExp(`${join(dir, 'missing.json')}: \\$: no such file: tried ${join(dir, 'missing.json')}$`),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
