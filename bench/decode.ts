/**
 * `decode`: the `bench` model at t = 1 on the two-H200 machine: one GPU unsharded, two GPUs with
 * each transport, and the mixed config in bench/configs/. One sample = one step's main-thread
 * wall time (enqueue the whole walk, wait for the tokens in the mailbox), so it includes every
 * kernel and join on the device plus the host's enqueue.
 *
 * The joins' cost per token is measured by difference: the same sharded walk with a transport
 * that moves nothing (wrong numbers, same kernels) is timed step for step, and each variant's
 * samples are paired with it by step index (same positions, so the same attention lengths).
 *
 * On the CPU reference the suite runs `tiny` (a smoke run of this code, not a measurement).
 */
import type { Runtime } from '../src/runtime/runtime.js';
import { TRANSPORTS, type Transport } from '../src/runtime/transports/transport.js';
import type { BackendKind } from '../src/runtime/device-api.js';
import { presetByName } from '../src/decode/model-config.js';
import { DEFAULT_CONFIG, loadDecodeConfig, type DecodeConfig } from '../src/decode/decode-config.js';
import type { Progress } from '../src/cli/progress.js';
import { row, type Row } from './results-file.js';
import { presetFor, timeSteps, withWalk, type StepTimes } from './walk-run.js';
import type { DeviceWalk } from '../src/decode/device-walk.js';

/** Moves nothing: the walk's kernels without its joins. */
const NO_JOINS: Transport = {
  name: 'll', graphMode: 'per-rank',
  broadcast: () => undefined, allGather: () => undefined, gather: () => undefined, allReduce: () => undefined,
};

export async function benchDecode(backend: BackendKind, _joins: number, progress: Progress): Promise<Row[]> {
  const preset = presetFor(backend);
  const rows: Row[] = [];
  const base = { suite: 'decode', op: 'step', bytes: 0, preset, unit: 'ms', metric: 'host' };
  const method = 'main-thread wall time of one t=1 step: enqueue the walk, wait for its tokens';
  const memory = async (rt: Runtime, label: string): Promise<void> => {
    for (const r of rt.ranks) {
      const m = await r.control.call('memInfo');
      rows.push(row({ ...base, op: 'memory', transport: label, bytes: r.ordinal, unit: 'GiB', metric: 'device', method: `cudaMemGetInfo total - free on device ${r.ordinal}, weights and caches loaded` }, [(m.total - m.free) / 2 ** 30]));
    }
  };
  await withWalk(backend, 'unsharded', async (walk, rt) => {
    await memory(rt, 'unsharded');
    rows.push(row({ ...base, transport: 'unsharded', method }, (await timeSteps(walk, DEFAULT_CONFIG, 'decode unsharded', progress)).host));
    const graphed = { ...DEFAULT_CONFIG, stepGraph: true };
    await walk.prepare(graphed);
    const g = await graphedSteps(walk, graphed, 'decode unsharded, step graph', progress);
    if (g) rows.push(row({ ...base, transport: 'unsharded+graph', method: `${method}; the step replayed from its graph` }, g));
  }, progress);
  await withWalk(backend, 'sharded', async (walk, rt) => {
    await memory(rt, 'sharded');
    await walk.prepare(DEFAULT_CONFIG, NO_JOINS);
    // Every variant's joins are its step time minus this walk's, so it must not pay for being
    // first: unwarmed, it took 6.00 ms against ll's 5.44 (decode-2xH200-2026-11-30).
    await timeSteps(walk, DEFAULT_CONFIG, 'decode warm-up (not recorded)', progress);
    const bare = (await timeSteps(walk, DEFAULT_CONFIG, 'decode no joins', progress)).host;
    rows.push(row({ ...base, transport: 'no-joins', method: `${method}; the sharded walk with joins that move nothing` }, bare));
    const mixedPath = new URL('../../bench/configs/mixed.json', import.meta.url).pathname;
    const variants: Array<[string, DecodeConfig]> = TRANSPORTS.map((t): [string, DecodeConfig] => [t, { ...DEFAULT_CONFIG, transport: { default: t, layers: [] } }]);
    // The mixed config is written for bench's 30 layers.
    if (preset === 'bench') variants.push(['mixed', loadDecodeConfig(mixedPath, presetByName(preset).layers)]);
    // Profiling's cost (issue 6: at most 3% of tokens/s): the ll walk with every join profiled,
    // paired step by step with the same walk unprofiled.
    try {
      const ll: DecodeConfig = { ...DEFAULT_CONFIG, transport: { default: 'll', layers: [] } };
      await walk.prepare(ll);
      const plain = (await timeSteps(walk, ll, 'decode ll, unprofiled', progress)).host;
      const profiled: DecodeConfig = { ...ll, profile: true };
      await walk.prepare(profiled);
      const withProfile = (await timeSteps(walk, profiled, 'decode ll, profiled', progress)).host;
      rows.push(row({ ...base, transport: 'll+profile', method: `${method}; every join profiled (events, stamps, read-back)` }, withProfile));
      rows.push(row({ ...base, op: 'profile overhead', unit: '%', transport: 'll', method: 'profiled step time / unprofiled step time at the same position, minus 1, in percent' }, withProfile.map((v, i) => (v / plain[i]! - 1) * 100)));
      // What the device times cost, apart from the rest: the same profile with host times only,
      // and with every join bracketed by timing events instead of timing itself.
      const variant = async (label: string, transport: string, method: string, set: (on: boolean) => void): Promise<void> => {
        await walk.prepare(ll);
        set(false);
        await walk.prepare(profiled);
        const s = (await timeSteps(walk, profiled, `decode ll, profiled ${label}`, progress)).host;
        set(true);
        await walk.prepare(ll);
        rows.push(row({ ...base, op: 'profile overhead', unit: '%', transport, method }, s.map((v, i) => (v / plain[i]! - 1) * 100)));
      };
      await variant('without device times', 'll (host times only)', 'as above, with the profile\'s device times left out (host enqueue times only)', (on) => { walk.profileDeviceEvents = on; });
      await variant('with events', 'll (timing events)', 'as above, every join bracketed by a timing-event pair instead of timing itself', (on) => { walk.profileSelfTimed = on; });
      // The same on the fast path, the step graph: there the events are nodes of the profiled
      // graphs, so the host pays nothing a join and what is left is the events on the device.
      const llGraph: DecodeConfig = { ...ll, stepGraph: true };
      await walk.prepare(llGraph);
      const plainSplit = await graphedSplit(walk, llGraph, 'decode ll, step graph, unprofiled', progress);
      const plainGraph = plainSplit?.host;
      const profiledGraph: DecodeConfig = { ...llGraph, profile: true };
      await walk.prepare(profiledGraph);
      const profiledSplit = await graphedSplit(walk, profiledGraph, 'decode ll, step graph, profiled', progress);
      const withProfileGraph = profiledSplit?.host;
      await walk.prepare(ll);
      if (plainGraph && withProfileGraph) {
        rows.push(row({ ...base, transport: 'll+graph+profile', method: `${method}; the step replayed from its profiled graph (the joins time themselves)` }, withProfileGraph));
        rows.push(row({ ...base, op: 'profile overhead', unit: '%', transport: 'll+graph', method: 'profiled step-graph step time / unprofiled step-graph step time at the same position, minus 1, in percent' }, withProfileGraph.map((v, i) => (v / plainGraph[i]! - 1) * 100)));
        rows.push(...splitRows(base, 'll+graph', plainSplit!), ...splitRows(base, 'll+graph+profile', profiledSplit!));
        // The same graph profile without device times: what the profiled graphs cost apart from
        // the stamps (two graphs alternating by step, the per-step reads).
        walk.profileDeviceEvents = false;
        await walk.prepare(profiledGraph);
        const hostOnlySplit = await graphedSplit(walk, profiledGraph, 'decode ll, step graph, profiled without device times', progress);
        walk.profileDeviceEvents = true;
        await walk.prepare(ll);
        if (hostOnlySplit) {
          rows.push(row({ ...base, op: 'profile overhead', unit: '%', transport: 'll+graph (host times only)', method: 'as above, with the profile\'s device times left out' }, hostOnlySplit.host.map((v, i) => (v / plainGraph[i]! - 1) * 100)));
          rows.push(...splitRows(base, 'll+graph+profile (host times only)', hostOnlySplit));
        }
        // Diagnosis of the profiled step graph's cost (decode-...-run7: 9.4% with host times only,
        // whose graph has the unprofiled one's nodes): the same profile replaying the unprofiled
        // graph itself, recording no joins. Near 0% says the second graph costs it; ~9% says the
        // host side does.
        walk.profileDeviceEvents = false;
        walk.profileOwnGraph = false;
        await walk.prepare(profiledGraph);
        const sharedSplit = await graphedSplit(walk, profiledGraph, 'decode ll, step graph, profiled, the unprofiled graph', progress);
        walk.profileDeviceEvents = true;
        walk.profileOwnGraph = true;
        await walk.prepare(ll);
        if (sharedSplit) {
          rows.push(row({ ...base, op: 'profile overhead', unit: '%', transport: 'll+graph (unprofiled graph, no joins)', method: 'as above, host times only, replaying the unprofiled step graph and recording no joins (a diagnosis)' }, sharedSplit.host.map((v, i) => (v / plainGraph[i]! - 1) * 100)));
          rows.push(...splitRows(base, 'll+graph+profile (unprofiled graph, no joins)', sharedSplit));
        }
      }
    } catch (e) {
      console.error(`decode: profile overhead: ${(e as Error).message}`);
    }
    for (const [name, dc] of variants) {
      try {
        await walk.prepare(dc);
        const s = (await timeSteps(walk, dc, `decode ${name}`, progress)).host;
        rows.push(row({ ...base, transport: name, method }, s));
        rows.push(row({ ...base, op: 'joins', transport: name, method: 'step time minus the no-joins step at the same position (paired by step index)' }, s.map((v, i) => v - bare[i]!)));
      } catch (e) {
        console.error(`decode: ${name}: ${(e as Error).message}`);
      }
    }
    // The same walk with each step replayed from its graph (config stepGraph): the host's enqueue
    // leaves the step, so what is left is the device's time; joins again by difference, against
    // the no-joins walk replayed the same way.
    const bareDc = { ...DEFAULT_CONFIG, stepGraph: true };
    await walk.prepare(bareDc, NO_JOINS);
    const bareGraph = await graphedSteps(walk, bareDc, 'decode no joins, step graph', progress);
    if (bareGraph) rows.push(row({ ...base, transport: 'no-joins+graph', method: `${method}; joins that move nothing, the step replayed from its graph` }, bareGraph));
    for (const [name, dc] of variants) {
      try {
        const graphed = { ...dc, stepGraph: true };
        await walk.prepare(graphed);
        const s = await graphedSteps(walk, graphed, `decode ${name}, step graph`, progress);
        if (!s) continue;
        rows.push(row({ ...base, transport: `${name}+graph`, method: `${method}; the step replayed from its graph` }, s));
        if (bareGraph) rows.push(row({ ...base, op: 'joins', transport: `${name}+graph`, method: 'step-graph step time minus the no-joins step-graph step at the same position' }, s.map((v, i) => v - bareGraph[i]!)));
      } catch (e) {
        console.error(`decode: ${name}, step graph: ${(e as Error).message}`);
      }
    }
  }, progress);
  return rows;
}

/** Timed steps through the step graph; undefined (and why, on stderr) when it was refused. */
async function graphedSteps(walk: DeviceWalk, dc: DecodeConfig, label: string, progress: Progress): Promise<number[] | undefined> {
  return (await graphedSplit(walk, dc, label, progress))?.host;
}

/** The same, with each step's enqueue and wait kept apart. */
async function graphedSplit(walk: DeviceWalk, dc: DecodeConfig, label: string, progress: Progress): Promise<StepTimes | undefined> {
  const times = await timeSteps(walk, dc, label, progress);
  const refused = walk.stepGraphStats().refused;
  if (refused.length > 0) { console.error(`decode: ${label}: refused: ${refused[0]!.reason}`); return undefined; }
  return times;
}

/**
 * Where a step's host time went: enqueueing it (step() until the completion signal is written)
 * and waiting for its completion counter; the rest is reading the tokens and ending the profile.
 */
function splitRows(base: Pick<Row, 'suite' | 'bytes' | 'preset' | 'metric'>, transport: string, t: StepTimes): Row[] {
  const b = { ...base, unit: 'us', transport };
  return [
    row({ ...b, op: 'step enqueue', method: 'main-thread time from step() until the step\'s completion signal is enqueued' }, t.enqueue),
    row({ ...b, op: 'step wait', method: 'main-thread time waiting for the step\'s completion counter after enqueueing it' }, t.wait),
  ];
}
