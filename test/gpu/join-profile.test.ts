/**
 * The join profile on two ranks (two GPUs, or in loopback on one: gpu-machine.ts), in both walks
 * (the seed walk's five hops a layer, the replicated walk's three): `ll` joins time themselves
 * (%globaltimer stored by the join's own kernel), and what they report agrees with a timing-event
 * pair around the same joins. Fails (does not skip) without a GPU.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { withShardedWalk } from '../support/sharded-walk.js';
import { PAIR, PAIR_NAME, gpuSuite } from '../support/gpu-machine.js';
import { presetByName } from '../../src/decode/model-config.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../../src/decode/decode-config.js';
import { REPLICATED_HOPS, SEED_HOPS, type Hop } from '../../src/profile/profile-data.js';

gpuSuite();

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

describe(`join profile on ${PAIR_NAME}`, function () {
  this.timeout(300_000);

  for (const [walkName, hops] of [
    ['seed', SEED_HOPS],
    ['replicated', REPLICATED_HOPS],
  ] as const)
    it(`${walkName} walk: ll joins time themselves, ${hops.length} a layer, within reach of a timing-event pair around the same joins`, async () => {
      const cfg = presetByName('small');
      await withShardedWalk(
        'cuda',
        cfg,
        async (walk) => {
          const dc: DecodeConfig = {
            ...DEFAULT_CONFIG,
            walk: walkName,
            transport: { default: 'll', layers: [] },
            profile: true,
          };
          await walk.prepare(dc);
          let pos = 0,
            tok = [randomInt(0, cfg.vocab)];
          const collect = async (steps: number): Promise<Map<Hop, number[]>> => {
            const byHop = new Map<Hop, number[]>(hops.map((h) => [h, []]));
            for (let i = 0; i < steps; i++) {
              const r = await walk.step(tok, [pos++], dc, false);
              tok = r.next;
              const joins = await r.joins!;
              assert.equal(joins.length, cfg.layers * hops.length);
              for (const j of joins) {
                assert.ok(
                  Number.isFinite(j.deviceUs) && j.deviceUs > 0 && j.deviceUs < 10_000,
                  `${j.hop} of layer ${j.layer}: ${j.deviceUs} µs`,
                );
                assert.ok(
                  j.deviceStartUs >= 0 && j.deviceStartUs < r.timing.wallUs,
                  `${j.hop} of layer ${j.layer} starts ${j.deviceStartUs} µs into the step`,
                );
                byHop.get(j.hop)!.push(j.deviceUs);
              }
            }
            return byHop;
          };
          await collect(4); // warm
          const self = await collect(24);
          walk.profileSwitches.selfTimed = false;
          const events = await collect(24);
          walk.profileSwitches.selfTimed = true;
          for (const hop of hops) {
            const a = median(self.get(hop)!),
              b = median(events.get(hop)!);
            console.log(
              `      ${hop}: self-timed ${a.toFixed(2)} µs, timing events ${b.toFixed(2)} µs (medians of ${self.get(hop)!.length})`,
            );
            // Events add their own cost to what they bracket; the stamps must not be off by a unit,
            // a join, or a step. In loopback both ranks share one card, so an event pair around a
            // join also holds whatever of the other rank's kernels the card ran meanwhile (a head
            // all-gather: self-timed 0.83 µs, events 12.9), and a self-timed join spins while its
            // twin waits for SMs, which the steps timed by events did not all see (an EP exchange's
            // medians: self-timed 30.6 µs, events 18.7; an EP return's 19.6 and 7.8): there the
            // stamps may only not pass twice the events and a few joins, far short of a unit's
            // thousandfold or a step's milliseconds.
            if (PAIR.loopback) assert.ok(a > 0 && a <= 2 * b + 20, `${hop}: self-timed ${a} µs against events ${b} µs`);
            else assert.ok(Math.abs(a - b) <= 0.5 * b + 5, `${hop}: self-timed ${a} µs against events ${b} µs`);
          }
        },
        PAIR,
      );
    });
});
