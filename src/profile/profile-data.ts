/**
 * What a profiled decode run records: the one data model the aggregation, the JSON export, the
 * Chrome trace and the HTML report all read. The walk (src/decode/device-walk.ts) fills it; the
 * exporters never talk to a device.
 *
 * Times: host times come from `performance.now()` on the main thread (ms since the process's
 * time origin); device times from CUDA timing events (the CPU reference's emulated events), each
 * pair on ONE rank's stream, since events on two devices cannot be subtracted.
 */

/** Every walk's hops, in walk order within a layer (src/decode/walk-joins.ts has each one's join). */
export const HOPS = [
  'fan-out',
  'head all-gather',
  'wo',
  'wo all-gather',
  'ep fan-out',
  'ep exchange',
  'ep return',
] as const;
export type Hop = (typeof HOPS)[number];

/** The seed walk's hops, a layer's in walk order (src/decode/seed-walk.ts). */
export const SEED_HOPS: readonly Hop[] = ['fan-out', 'head all-gather', 'wo', 'ep fan-out', 'ep return'];
/** The replicated walk's (src/decode/replicated-walk.ts). */
export const REPLICATED_HOPS: readonly Hop[] = ['head all-gather', 'wo all-gather', 'ep exchange'];

/** The rank whose stream receives each hop, where its device time is taken (the all-gathers and
 *  the exchange land on both; rank 0 is timed). */
export const RECEIVER: Record<Hop, 0 | 1> = {
  'fan-out': 1,
  'head all-gather': 0,
  wo: 0,
  'wo all-gather': 0,
  'ep fan-out': 1,
  'ep exchange': 0,
  'ep return': 0,
};

/** One join of one step: its identity and what it cost. */
export interface JoinSample {
  /** The decode step (0-based, in run order). */
  step: number;
  /** The cache position of row 0 in that step (the token's index in its sequence). */
  token: number;
  layer: number;
  hop: Hop;
  transport: string;
  /** Bytes the join delivers to its receiving rank. */
  bytes: number;
  /** The rank whose stream the device time was taken on (the join's receiver). */
  rank: 0 | 1;
  /** Host: the join's first ring write after its step began, µs (places it on the main thread's track). */
  hostStartUs: number;
  /** Host: from the first ring write of the join until both workers have enqueued it, µs. */
  hostEnqueueUs: number;
  /** Device: the event pair around the join on `rank`'s stream, µs. */
  deviceUs: number;
  /** Device: the join's start event after `rank`'s step-start event, µs (places it on a timeline). */
  deviceStartUs: number;
}

/** One decode step as the main thread saw it. */
export interface StepSample {
  step: number;
  /** Rows (sequences) the step advanced: its tokens. */
  rows: number;
  /** Host time the step's first record was written, ms (performance.now()). */
  hostStartMs: number;
  /** Host: enqueueing the whole step (every layer, both rings), µs. */
  hostEnqueueUs: number;
  /** Host: from the first record until the next tokens were read back, µs. */
  wallUs: number;
}

export interface ProfileMeta {
  preset: string;
  layers: number;
  backend: 'cuda' | 'cpu';
  /** Where it ran, e.g. "2x NVIDIA H200" or "cpu reference". */
  machine: string;
  /** ISO date of the run. */
  date: string;
  /** The decode config (transports per layer, wo mode, EP graph gate) as JSON. */
  config: unknown;
}

export interface Profile {
  meta: ProfileMeta;
  steps: StepSample[];
  joins: JoinSample[];
  /** The EP graph slots' counters: graph launches, capture attempts, refusals. */
  epGraph?: { dispatches: number; captures: number; refused: Array<{ layer: number; reason: string }> };
}
