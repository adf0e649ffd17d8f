/**
 * The public types held to what the API does: compiled by `tsc -p tsconfig.json` in `npm test`,
 * never run. Each `@ts-expect-error` fails the build the day the line under it compiles, so a
 * loosened type cannot pass unseen; every other line must compile as a caller would write it.
 */
import {
  type BackendKind,
  ConfigError,
  type DecodeConfig,
  type DecodeConfigPatch,
  type ErrorCode,
  type Hop,
  InvalidArgTypeError,
  type JoinTiming,
  type Layout,
  type ModelConfig,
  type ModelConfigJson,
  ModelTooLargeError,
  PRESETS,
  type PresetName,
  type Remedy,
  Runtime,
  type RuntimeOptions,
  Session,
  type SessionModel,
  type SessionOptions,
  type StepOptions,
  type StepOutput,
  type StepTiming,
  type TransportName,
} from '../../src/index.js';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function holds<T extends true>(_: T): void {}

export async function sessionTypes(): Promise<void> {
  const s = await Session.open({ backend: 'cpu', model: 'tiny', maxBatch: 2, config: 'bench/configs/ep-eager.json' });
  await Session.open({ model: { ...PRESETS.small, seed: 7n } });
  // @ts-expect-error: a model is a preset's name or a ModelConfig
  await Session.open({ model: 'huge-typo' });
  // @ts-expect-error: an unknown option key
  await Session.open({ backnd: 'cpu' });
  // @ts-expect-error: maxBatch is a number
  await Session.open({ maxBatch: '2' });

  // setConfig takes any part of a config, at any depth; a list is given whole.
  await s.setConfig({ profile: true });
  await s.setConfig({ transport: { default: 'push' } });
  await s.setConfig({ spin: { hostMicros: 50 } });
  await s.setConfig({ transport: { layers: [{ from: 0, to: 1, transport: 'oneshot' }] } });
  await s.setConfig('bench/configs/ep-graph.json');
  // @ts-expect-error: not a transport
  await s.setConfig({ transport: { default: 'pigeon' } });
  // @ts-expect-error: a layer range is whole
  await s.setConfig({ transport: { layers: [{ from: 0 }] } });
  const patch: DecodeConfigPatch = { wo: 'allreduce' };
  const whole: DecodeConfig = s.decodeConfig;
  holds<Equal<typeof whole.transport.default, TransportName>>(true);
  void patch;

  const out: StepOutput = await s.stepDetailed([1, 2], { hidden: true } satisfies StepOptions);
  const joins: JoinTiming[] = (await out.joins) ?? [];
  const hop: Hop | undefined = joins[0]?.hop;
  const timing: StepTiming = out.timing;
  void hop;
  void timing;
  // @ts-expect-error: a step carries numbers
  await s.step(['1']);

  // The model serializes: its JSON form has the seed as a string.
  const model: SessionModel = s.model;
  const json: ModelConfigJson = model.toJSON();
  holds<Equal<typeof json.seed, string>>(true);
  holds<Equal<ModelConfig['seed'], bigint>>(true);
  const layout: Layout = s.layout;
  const backend: BackendKind = s.backend;
  void layout;
  void backend;

  await using closed = s;
  void closed;
}

export async function runtimeTypes(): Promise<void> {
  const options: RuntimeOptions = { backend: 'cpu', devices: [0, 1], spinMicros: 100 };
  // @ts-expect-error: an unknown option key
  const typo: RuntimeOptions = { spinMicro: 100 };
  void typo;
  await using rt = await Runtime.open(options);
  void rt;
}

export function errorTypes(e: unknown): string {
  const codes: ErrorCode[] = [
    'ERR_INVALID_ARG_TYPE',
    'ERR_INVALID_ARG_VALUE',
    'ERR_UNKNOWN_OPTION',
    'ERR_CONFIG',
    'ERR_MODEL_TOO_LARGE',
    'ERR_SLOT_FULL',
    'ERR_SESSION_CLOSED',
    'ERR_WORKER_EXITED',
  ];
  // @ts-expect-error: not a code memra throws
  const bogus: ErrorCode = 'ERR_NOPE';
  void bogus;
  if (e instanceof ModelTooLargeError) {
    const remedies: readonly Remedy[] = e.remedies;
    return `${e.bytesPerDevice} > ${e.deviceLimit}: ${remedies.map((r) => r.value).join()}`;
  }
  if (e instanceof ConfigError) return `${e.source} ${e.path} ${e.model?.name ?? ''} ${e.code satisfies ErrorCode}`;
  if (e instanceof InvalidArgTypeError) return e.code satisfies ErrorCode;
  const options: SessionOptions = {};
  const preset: PresetName = 'tiny';
  return `${codes.length} ${JSON.stringify(options)} ${preset}`;
}
