/**
 * Profiles made up for the exporters' tests: deterministic (a seeded PRNG, so a failure replays)
 * and shaped like the walk's: joins in walk order (layer, then hop), each timed on its hop's
 * receiving rank, laid one after another on that rank's stream, their host enqueues back to back
 * from the step's start unless a test places them. Every cost is a callback, so a test can make
 * the right answer known by construction.
 */
import {
  SEED_HOPS,
  RECEIVER,
  type Hop,
  type JoinSample,
  type Profile,
  type StepSample,
} from '../../src/profile/profile-data.js';
import { seededRandom } from './seeded-random.js';

export interface JoinSite {
  step: number;
  layer: number;
  hop: Hop;
  random: () => number;
}

export interface SyntheticProfileOptions {
  seed?: number;
  layers?: number;
  steps?: number;
  /** Hops each layer runs, in walk order; default the seed walk's. */
  hops?: readonly Hop[];
  rows?: (step: number) => number;
  transport?: (site: JoinSite) => string;
  bytes?: (site: JoinSite) => number;
  deviceUs?: (site: JoinSite) => number;
  hostEnqueueUs?: (site: JoinSite) => number;
  /** Where the join's host enqueue starts after its step's; default: back to back, the step's earlier joins' enqueue summed. */
  hostStartUs?: (site: JoinSite, backToBackUs: number) => number;
  /** Default: the device time the step's joins cover on the busier rank, plus 200 µs. */
  wallUs?: (step: number, deviceEndUs: number) => number;
  /** Default: the step's joins' host enqueue times plus 40 µs. */
  stepEnqueueUs?: (step: number, joinsEnqueueUs: number) => number;
  /** Device time between consecutive joins on one stream (the compute between them), µs. */
  gapUs?: number;
  preset?: string;
  machine?: string;
  epGraph?: Profile['epGraph'];
}

export function syntheticProfile(o: SyntheticProfileOptions = {}): Profile {
  const random = seededRandom(o.seed ?? 1);
  const layers = o.layers ?? 4,
    nSteps = o.steps ?? 8,
    hops = o.hops ?? SEED_HOPS,
    gapUs = o.gapUs ?? 3;
  const steps: StepSample[] = [];
  const joins: JoinSample[] = [];
  let hostStartMs = 1000;
  for (let step = 0; step < nSteps; step++) {
    const cursor = [gapUs, gapUs];
    let joinsEnqueueUs = 0;
    for (let layer = 0; layer < layers; layer++) {
      for (const hop of hops) {
        const site: JoinSite = { step, layer, hop, random };
        const rank = RECEIVER[hop];
        const deviceUs = o.deviceUs ? o.deviceUs(site) : 5 + 20 * random();
        const hostEnqueueUs = o.hostEnqueueUs ? o.hostEnqueueUs(site) : 1 + 4 * random();
        const hostStartUs = o.hostStartUs ? o.hostStartUs(site, joinsEnqueueUs) : joinsEnqueueUs;
        joins.push({
          step,
          token: 17 + step,
          layer,
          hop,
          transport: o.transport ? o.transport(site) : 'll',
          bytes: o.bytes ? o.bytes(site) : 4096,
          rank,
          hostStartUs,
          hostEnqueueUs,
          deviceUs,
          deviceStartUs: cursor[rank]!,
        });
        cursor[rank]! += deviceUs + gapUs;
        joinsEnqueueUs += hostEnqueueUs;
      }
    }
    const deviceEndUs = Math.max(cursor[0]!, cursor[1]!);
    const wallUs = o.wallUs ? o.wallUs(step, deviceEndUs) : deviceEndUs + 200;
    const hostEnqueueUs = o.stepEnqueueUs ? o.stepEnqueueUs(step, joinsEnqueueUs) : joinsEnqueueUs + 40;
    steps.push({ step, rows: o.rows ? o.rows(step) : 4, hostStartMs, hostEnqueueUs, wallUs });
    hostStartMs += wallUs / 1000 + 0.05;
  }
  return {
    meta: {
      preset: o.preset ?? 'synthetic',
      layers,
      backend: 'cpu',
      machine: o.machine ?? 'cpu reference',
      date: '2026-01-02T03:04:05.000Z',
      config: { transport: { default: 'll' }, wo: 'concat', epGraph: false, profile: true },
    },
    steps,
    joins,
    ...(o.epGraph ? { epGraph: o.epGraph } : {}),
  };
}
