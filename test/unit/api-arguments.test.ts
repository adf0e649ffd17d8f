/**
 * Every public entry point checks its arguments by type first, then by range, before anything
 * runs: a wrong type is a TypeError naming the argument and what was given, an unknown option key
 * is refused naming the allowed ones, and none of it closes the session (CPU reference).
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  asDevicePtr,
  ConfigError,
  CpuModel,
  DEFAULT_CONFIG,
  InvalidArgTypeError,
  InvalidArgValueError,
  ModelTooLargeError,
  PRESETS,
  presetByName,
  Runtime,
  Session,
  SessionStateError,
  UnknownOptionError,
} from '../../src/index.js';

const V = PRESETS.tiny.vocab;
/** A rejection, or a synchronous throw, checked by class, code and message. */
type Want = { cls: new (...a: never[]) => Error; code: string; msg: RegExp };
const typeErr = (msg: RegExp): Want => ({ cls: TypeError, code: 'ERR_INVALID_ARG_TYPE', msg });
const rangeErr = (msg: RegExp, code = 'ERR_INVALID_ARG_VALUE'): Want => ({ cls: RangeError, code, msg });
const is =
  ({ cls, code, msg }: Want) =>
  (e: Error & { code?: string }): boolean => {
    assert.ok(e instanceof cls, `${e.name}: ${e.message} is a ${cls.name}`);
    assert.equal(e.code, code, e.message);
    assert.match(e.message, msg);
    return true;
  };

describe('argument checks: a step (CPU backend)', function () {
  this.timeout(60_000);
  // One session for every case: each refused call must leave it exactly where it was, which the
  // reference model, stepped alongside, checks.
  let s: Session;
  let ref: CpuModel;
  let at = 0;
  before(async () => {
    s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2 });
    ref = new CpuModel(presetByName('tiny'), { maxBatch: 2 });
  });
  after(async () => {
    await s.close();
  });

  /** A step of fresh tokens equals the reference's: the session is open and nothing moved. */
  async function stillSteps(): Promise<void> {
    assert.equal(s.position(0), at, 'a refused call moved nothing');
    const tokens = [randomInt(0, V), randomInt(0, V)];
    const want = ref.step(tokens, [at, at]).next;
    assert.deepEqual(await s.step(tokens), want);
    at++;
  }

  const bad: Array<[string, unknown, Want]> = [
    ['a number', 5, typeErr(/^step: tokens must be an array of token ids, one a row, got 5$/)],
    ['nothing', undefined, typeErr(/^step: tokens must be an array of token ids, one a row, got undefined$/)],
    ['a string', '12', typeErr(/^step: tokens must be an array of token ids, one a row, got the string "12"$/)],
    ['a fraction', [1.5, 1], typeErr(/^step: token 1\.5 in row 0 is not an integer$/)],
    ['a string token', [1, '5'], typeErr(/^step: token in row 1 is the string "5", not an integer$/)],
    ['a bigint token', [5n, 1], typeErr(/^step: token in row 0 is the bigint 5n, not an integer$/)],
    ['a null token', [null, 1], typeErr(/^step: token in row 0 is null, not an integer$/)],
    ['NaN', [Number.NaN], typeErr(/^step: token NaN in row 0 is not an integer$/)],
    ['an undefined token', [1, undefined], typeErr(/^step: token in row 1 is undefined, not an integer$/)],
    ['a token past the vocabulary', [V, 1], rangeErr(/^step: row 0: token 256 is out of range \[0, 256\)$/)],
    ['a negative token', [1, -1], rangeErr(/^step: row 1: token -1 is out of range \[0, 256\)$/)],
    ['no rows', [], rangeErr(/^step: a step carries 1 to maxBatch \(2\) tokens, got 0$/)],
    ['too many rows', [1, 2, 3], rangeErr(/^step: a step carries 1 to maxBatch \(2\) tokens, got 3$/)],
  ];
  for (const [what, tokens, want] of bad) {
    it(`step(${what}) is refused by type or range, and the session stays open with nothing moved`, async () => {
      await assert.rejects(s.step(tokens as number[]), is(want));
      await stillSteps();
    });
  }

  it('stepDetailed refuses an unknown option and a wrong type, naming the one allowed', async () => {
    await assert.rejects(
      s.stepDetailed([1, 2], { hiden: true } as never),
      (e: Error) =>
        e instanceof UnknownOptionError &&
        e.code === 'ERR_UNKNOWN_OPTION' &&
        /^stepDetailed: options has no option 'hiden' \(did you mean 'hidden'\?\); the options are hidden$/.test(
          e.message,
        ),
    );
    await assert.rejects(
      s.stepDetailed([1, 2], { hidden: 'yes' } as never),
      is(typeErr(/^stepDetailed: options\.hidden must be true or false, got the string "yes"$/)),
    );
    await stillSteps();
  });

  it('reset and position check the slot by type, then by range', async () => {
    assert.throws(() => s.reset('0' as never), is(typeErr(/^reset: slot must be an integer, got the string "0"$/)));
    assert.throws(() => s.reset(2), is(rangeErr(/^reset: slot must be an integer in \[0, 1\], got 2$/)));
    assert.throws(() => s.position(0.5), is(typeErr(/^position: slot must be an integer, got 0\.5$/)));
    await stillSteps();
  });

  it('session.model serializes to JSON, the u64 seed as its exact decimal string', () => {
    const json = JSON.parse(JSON.stringify(s.model)) as Record<string, unknown>;
    assert.deepEqual(json, { ...PRESETS.tiny, seed: '0' });
    assert.deepEqual(Object.keys(s.model), Object.keys(PRESETS.tiny), 'toJSON is not an enumerable field');
  });
});

describe('argument checks: the config and the session state (CPU backend)', function () {
  this.timeout(60_000);
  let s: Session;
  beforeEach(async () => {
    s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2 });
  });
  afterEach(async () => {
    await s.close();
  });

  /** The session still takes a step, and its rows' tokens are in the vocabulary. */
  async function stillSteps(): Promise<void> {
    const next = await s.step([randomInt(0, V), randomInt(0, V)]);
    assert.ok(next.length === 2 && next.every((x) => Number.isInteger(x) && x >= 0 && x < V), `${next}`);
  }

  it('setConfig refuses a value that is neither a path nor an object, and keeps the config in force', async () => {
    await s.setConfig({ wo: 'allreduce' });
    for (const v of [undefined, 7, null, ['ll']]) {
      await assert.rejects(
        s.setConfig(v as never),
        is(typeErr(/^setConfig: config must be a config object or the path of a JSON config file, got /)),
      );
    }
    await assert.rejects(s.setConfig({ wo: 'sum' } as never), (e: Error) => e instanceof ConfigError);
    assert.equal(s.decodeConfig.wo, 'allreduce');
    await stillSteps();
  });

  it('setConfig lays a partial config over the config in force, field by field; a list is replaced whole', async () => {
    await s.setConfig({ profile: true });
    assert.equal(s.decodeConfig.profile, true);
    await s.setConfig({ transport: { layers: [{ from: 1, to: 1, transport: 'push' }] } });
    await s.setConfig({ transport: { default: 'oneshot' } });
    await s.setConfig({ spin: { hostMicros: 50 } });
    assert.deepEqual(s.decodeConfig, {
      ...DEFAULT_CONFIG,
      profile: true,
      transport: { default: 'oneshot', layers: [{ from: 1, to: 1, transport: 'push' }] },
      spin: { ...DEFAULT_CONFIG.spin, hostMicros: 50 },
    });
    await s.setConfig({ transport: { layers: [] } });
    assert.deepEqual(s.decodeConfig.transport, { default: 'oneshot', layers: [] });
    // The config in force is in the message when the clash is with it.
    await s.setConfig({ epGraph: true });
    await assert.rejects(
      s.setConfig({ stepGraph: true }),
      /setConfig: config \(checked against model 'tiny', 2 layers\): \$\.stepGraph: cannot be on with \$\.epGraph \(on in the config in force\)/,
    );
    assert.equal(s.decodeConfig.stepGraph, false);
    await stillSteps();
  });

  it('a busy or closed session says so with a code', async () => {
    const first = s.step([1, 2]);
    await assert.rejects(s.step([1, 2]), (e: Error) => e instanceof SessionStateError && e.code === 'ERR_SESSION_BUSY');
    await first;
    await s.close();
    await assert.rejects(
      s.step([1, 2]),
      (e: Error) =>
        e instanceof SessionStateError && e.code === 'ERR_SESSION_CLOSED' && /closed by close\(\)/.test(e.message),
    );
  });
});

describe('argument checks: Session.open, before anything starts', function () {
  this.timeout(60_000);
  const open = (o: object): Promise<Session> => Session.open({ backend: 'cpu', model: 'tiny', ...o } as never);

  const bad: Array<[string, object, Want]> = [
    ["maxBatch '2'", { maxBatch: '2' }, typeErr(/^SessionOptions\.maxBatch must be an integer, got the string "2"$/)],
    ['maxBatch 9', { maxBatch: 9 }, rangeErr(/^SessionOptions\.maxBatch must be an integer in \[1, 8\], got 9$/)],
    ['maxBatch 1.5', { maxBatch: 1.5 }, typeErr(/^SessionOptions\.maxBatch must be an integer, got 1\.5$/)],
    [
      "layout 'flat'",
      { layout: 'flat' },
      rangeErr(/^SessionOptions\.layout must be one of 'sharded', 'unsharded', got 'flat'$/),
    ],
    ['backend 2', { backend: 2 }, typeErr(/^SessionOptions\.backend must be one of 'auto', 'cuda', 'cpu', got 2$/)],
    ['onProgress true', { onProgress: true }, typeErr(/^SessionOptions\.onProgress must be a function, got true$/)],
    [
      'config 3',
      { config: 3 },
      typeErr(/^SessionOptions\.config must be a config object or the path of a JSON config file, got 3$/),
    ],
    [
      'model 7',
      { model: 7 },
      typeErr(/^SessionOptions\.model must be a preset name \(tiny, small, bench\) or a ModelConfig object, got 7$/),
    ],
    [
      "model 'huge-typo'",
      { model: 'huge-typo' },
      rangeErr(/^unknown model preset 'huge-typo': the presets are tiny, small, bench$/),
    ],
    [
      'a model with a string width',
      { model: { ...PRESETS.tiny, hidden: '256' } },
      typeErr(/^SessionOptions\.model\.hidden must be an integer, got the string "256"$/),
    ],
    [
      'a model with a number seed',
      { model: { ...PRESETS.tiny, seed: 3 } },
      typeErr(/^SessionOptions\.model\.seed must be a u64 bigint in \[0, 2\^64\), got 3$/),
    ],
    [
      'runtime.spinMicros as a string',
      { runtime: { spinMicros: '5' } },
      typeErr(/^SessionOptions\.runtime\.spinMicros must be an integer, got the string "5"$/),
    ],
  ];
  for (const [what, o, want] of bad) {
    it(`refuses ${what} by type or range`, async () => {
      await assert.rejects(open(o), is(want));
    });
  }

  it('refuses an unknown option key, naming the keys allowed and the likely one meant', async () => {
    for (const [o, re] of [
      [
        { backnd: 'cpu' },
        /^SessionOptions has no option 'backnd' \(did you mean 'backend'\?\); the options are model, backend, layout, maxBatch, config, onProgress, runtime$/,
      ],
      [
        { runtime: { ringCapcity: 8 } },
        /^SessionOptions\.runtime has no option 'ringCapcity' \(did you mean 'ringCapacity'\?\); the options are backend, devices, /,
      ],
      [
        { model: { ...PRESETS.tiny, layer: 3 } },
        /^SessionOptions\.model has no option 'layer' \(did you mean 'layers'\?\)/,
      ],
      [{ frobnicate: 1 }, /^SessionOptions has no option 'frobnicate'; the options are /],
    ] as const) {
      await assert.rejects(open(o), (e: Error & { code?: string }) => {
        assert.ok(e instanceof UnknownOptionError && e instanceof TypeError);
        assert.equal(e.code, 'ERR_UNKNOWN_OPTION');
        assert.match(e.message, re);
        return true;
      });
    }
  });

  it("refuses bench on the CPU reference in the user's terms: its bytes a device against the 2 GiB limit, before any allocation", async () => {
    const t = performance.now();
    await assert.rejects(
      Session.open({ backend: 'cpu', model: 'bench', maxBatch: 2, config: 'bench/configs/mixed.json' }),
      (e: ModelTooLargeError) => {
        assert.ok(e instanceof ModelTooLargeError && e instanceof RangeError);
        assert.equal(e.code, 'ERR_MODEL_TOO_LARGE');
        assert.ok(e.bytesPerDevice > 21e9 && e.bytesPerDevice < 23e9, `${e.bytesPerDevice} bytes`);
        assert.equal(e.deviceLimit, 2 ** 31);
        assert.match(
          e.message,
          /^model 'bench' needs 2\d\.\d GB \(\d+\.\d GiB\) on a device \(sharded, maxBatch 2: 2\d\.\d GB \(\d+\.\d GiB\) of weights, \d\.\d\d GB \(\d\.\d\d GiB\) of activations and KV cache\), and the CPU reference holds at most 2\.1 GB \(2\.0 GiB\) a device; use model: 'tiny' or model: 'small'/,
        );
        assert.doesNotMatch(e.message, /arenaBytes/);
        return true;
      },
    );
    assert.ok(performance.now() - t < 5000, 'refused before any weight was made');
  });

  it('finds a config path against the working directory, then among the shipped bench/configs/, and says where it looked', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'memra-cwd-'));
    const cwd = process.cwd();
    try {
      process.chdir(dir);
      writeFileSync(join(dir, 'local.json'), JSON.stringify({ wo: 'allreduce' }));
      for (const [config, want] of [
        ['local.json', (s: Session) => s.decodeConfig.wo === 'allreduce'],
        ['bench/configs/ep-eager.json', (s: Session) => s.decodeConfig.transport.default === 'push'],
        ['ep-graph.json', (s: Session) => s.decodeConfig.epGraph],
      ] as const) {
        const s = await open({ config });
        try {
          assert.ok(want(s), config);
        } finally {
          await s.close();
        }
      }
      await assert.rejects(open({ config: 'nowhere.json' }), (e: ConfigError) => {
        assert.equal(e.code, 'ERR_CONFIG');
        assert.match(
          e.message,
          new RegExp(
            `^nowhere\\.json \\(checked against model 'tiny', 2 layers\\): \\$: no such file: tried ${join(dir, 'nowhere.json')}, .*bench/configs/nowhere\\.json \\(the working directory, then memra's own files\\)$`,
          ),
        );
        return true;
      });
    } finally {
      process.chdir(cwd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the file and the model a config was checked against', async () => {
    await assert.rejects(open({ config: 'bench/configs/mixed.json' }), (e: ConfigError) => {
      assert.equal(e.code, 'ERR_CONFIG');
      assert.deepEqual(e.model, { name: "'tiny'", layers: 2 });
      assert.match(
        e.message,
        /^\/.*bench\/configs\/mixed\.json \(checked against model 'tiny', 2 layers\): \$\.transport\.layers\[0\]\.to: must be an integer in \[0, 1\], got 9$/,
      );
      return true;
    });
  });
});

describe('argument checks: Runtime.open and the rank operations (CPU backend)', function () {
  this.timeout(60_000);

  it('Runtime.open checks every option by type, and refuses an unknown key', async () => {
    await assert.rejects(
      Runtime.open({ backend: 'cpu', spinMicros: '5' } as never),
      is(typeErr(/^RuntimeOptions\.spinMicros must be an integer, got the string "5"$/)),
    );
    await assert.rejects(
      Runtime.open({ backend: 'cpu', peerAccess: 1 } as never),
      is(typeErr(/^RuntimeOptions\.peerAccess must be true or false, got 1$/)),
    );
    await assert.rejects(
      Runtime.open({ backend: 'cpu', devices: [0, '1'] } as never),
      is(typeErr(/^RuntimeOptions\.devices\[1\] must be a device ordinal \(an integer\), got "1"$/)),
    );
    await assert.rejects(
      Runtime.open({ backend: 'cpu', devices: [0, 1, 2] } as never),
      is(
        rangeErr(
          /^RuntimeOptions\.devices must be one device ordinal \(one worker\) or two \(one per rank\), got \[0,1,2\]$/,
        ),
      ),
    );
    await assert.rejects(
      Runtime.open({ backend: 'cpu', ringCapacty: 8 } as never),
      (e: Error) => e instanceof UnknownOptionError && /did you mean 'ringCapacity'/.test(e.message),
    );
    await assert.rejects(
      Runtime.open(null as never),
      is(typeErr(/^RuntimeOptions must be an options object, got null$/)),
    );
  });

  it('a rank operation with a bad argument is refused on the main thread and the runtime keeps working', async () => {
    const rt = await Runtime.open({ backend: 'cpu' });
    try {
      const [r0, r1] = rt.pair('the test');
      const n = randomInt(17, 300);
      const x = await r0.alloc(n * 4);
      const value = randomInt(1, 1000) + 0.5;
      assert.throws(
        () => r0.fill(x, String(n) as never, value),
        is(typeErr(/^fill: n must be an integer, got the string "\d+"$/)),
      );
      assert.throws(
        () => r0.fill(asDevicePtr(-4), n, value),
        is(rangeErr(/^fill: ptr must be an integer in \[0, 2\^53 - 1\], got -4$/)),
      );
      assert.throws(
        () => r0.fill(x, n, '1' as never),
        is(typeErr(/^fill: value must be a number, got the string "1"$/)),
      );
      assert.throws(
        () => r0.memset(x, 256, 4),
        is(rangeErr(/^memset: byteValue must be an integer in \[0, 255\], got 256$/)),
      );
      assert.throws(
        () => r1.record({} as never),
        is(typeErr(/^record: ev must be a DeviceEvent \(from createEvent\), got an object$/)),
      );
      assert.throws(
        () => r1.signal(0, -1),
        is(rangeErr(/^signal: value must be an integer in \[0, 4294967295\], got -1$/)),
      );
      await assert.rejects(
        r0.alloc('64' as never),
        is(typeErr(/^alloc: bytes must be an integer, got the string "64"$/)),
      );
      await assert.rejects(r0.alloc(0), is(rangeErr(/^alloc: bytes must be an integer in \[1, 2\^53 - 1\], got 0$/)));
      await assert.rejects(
        r0.upload(x, [1, 2] as never),
        is(typeErr(/^upload: data must be a typed array or DataView, got an array of 2$/)),
      );
      await assert.rejects(r0.createEvent('yes' as never), is(typeErr(/^createEvent: timing must be true or false/)));
      assert.equal(rt.failure, undefined, 'nothing reached a worker');
      r0.fill(x, n, value);
      r0.signal(0, 1);
      await rt.waitCompleted(0, 0, 1);
      const got = await r0.downloadF32(x, n);
      assert.ok(got.every((v) => v === value));
    } finally {
      await rt.close();
    }
  });

  it('an InvalidArgValueError keeps its remedy apart from its problem', () => {
    const e = new InvalidArgValueError('no device', { remedies: [{ option: 'backend', value: 'cpu' }] });
    assert.equal(e.message, "no device; use backend: 'cpu'");
    assert.equal(e.problem, 'no device');
    assert.ok(new InvalidArgTypeError('x') instanceof TypeError);
  });
});
