/**
 * The replicated walk on the GPU (two GPUs, or two ranks in loopback on one: gpu-machine.ts):
 * `small` and `bench`, greedy from fresh tokens at t = 1 and t = 4, bit-identical to the
 * unsharded walk (tokens and hidden state every step, and rank 1's copy of h) with every
 * transport (in loopback every one but nccl, which refuses there), eagerly and from the step
 * graph (ll: per-rank graphs; push: one multi-device graph); profiled from the step graph, three
 * joins a layer, each with a device time; the walk switched between steps; `wo: "allreduce"`
 * within rounding and the same bits on both ranks. Fails (does not skip) without a GPU.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { Session } from '../../src/decode/session.js';
import { presetByName } from '../../src/decode/model-config.js';
import { DEFAULT_CONFIG, type DecodeConfig } from '../../src/decode/decode-config.js';
import { TRANSPORTS, type TransportName } from '../../src/runtime/transports/transport.js';
import { REPLICATED_HOPS } from '../../src/profile/profile-data.js';
import { allreduceDraws, checkAllreduceDraws } from '../support/allreduce-draws.js';
import { expectRun, relL2, runSession, sameBits, type Run } from '../support/decode-run.js';
import { LOOPBACK, PAIR, PAIR_NAME, gpuSuite } from '../support/gpu-machine.js';

gpuSuite();

/** NCCL refuses loopback (link.ts); decode.test.ts checks that it does. */
const TRANSPORTS_HERE = TRANSPORTS.filter((t) => !(LOOPBACK && t === 'nccl'));
const ROWS = [1, 4] as const;

const replicated = (transport: TransportName, extra: Partial<DecodeConfig> = {}): DecodeConfig => ({
  ...DEFAULT_CONFIG,
  walk: 'replicated',
  transport: { default: transport, layers: [] },
  ...extra,
});

describe(`the replicated walk on the GPU (${PAIR_NAME})`, function () {
  this.timeout(900_000);

  for (const [preset, steps] of [
    ['small', 32],
    ['bench', 12],
  ] as const) {
    it(`${preset}, t = 1 and t = 4: ${steps} greedy tokens with ${LOOPBACK ? 'every transport but nccl' : 'every transport'}, eager and from the step graph, bit-identical to the unsharded walk (rank 1's h too); three joins a layer; the walk switched between steps; wo allreduce within rounding`, async () => {
      const cfg = presetByName(preset);
      const L = cfg.layers;
      const starts = ROWS.map((t) => Array.from({ length: t }, () => randomInt(0, cfg.vocab)));
      const oracle = await Session.open({ backend: 'cuda', model: preset, maxBatch: 4, layout: 'unsharded' });
      const refs: Run[] = [];
      try {
        for (const start of starts) refs.push(await runSession(oracle, start, steps));
      } finally {
        await oracle.close();
      }
      const s = await Session.open({
        backend: 'cuda',
        model: preset,
        maxBatch: 4,
        layout: 'sharded',
        runtime: PAIR,
        config: replicated('ll'),
      });
      try {
        const each = async (what: string, between?: (i: number) => Promise<string>): Promise<void> => {
          for (const [k, t] of ROWS.entries()) await expectRun(s, refs[k]!, starts[k]!, `${what} t=${t}`, between);
        };
        for (const tr of TRANSPORTS_HERE) {
          await s.setConfig(replicated(tr));
          await each(tr);
        }
        await s.setConfig({
          ...replicated('push'),
          transport: { default: 'push', layers: [{ from: 1, to: Math.max(1, L - 2), transport: 'oneshot' }] },
        });
        await each('push, oneshot inside');
        for (const tr of ['ll', 'push'] as const) {
          await s.setConfig(replicated(tr, { stepGraph: true }));
          const before = s.stepGraph();
          await each(`${tr} step graph`);
          const after = s.stepGraph();
          assert.deepEqual(after.refused, [], `${tr} step graph: refused`);
          assert.equal(after.captures - before.captures, ROWS.length, `${tr}: one capture per batch size`);
          assert.equal(after.launches - before.launches, ROWS.length * steps, `${tr}: a launch per step`);
        }
        // Profiled from the step graph: the same bits, and three joins a layer, each timed.
        await s.setConfig(replicated('ll', { stepGraph: true, profile: true }));
        s.reset();
        let cur = starts[0]!;
        for (let i = 0; i < Math.min(steps, 6); i++) {
          const r = await s.stepDetailed(cur, { hidden: true });
          assert.deepEqual(r.next, refs[0]!.next[i], `profiled step graph step ${i}: tokens`);
          assert.ok(sameBits(r.hidden!, refs[0]!.hidden[i]!), `profiled step graph step ${i}: hidden state`);
          const joins = await r.joins!;
          assert.deepEqual(
            joins.map((j) => j.hop),
            Array.from({ length: L }, () => REPLICATED_HOPS).flat(),
            `profiled step graph step ${i}: three joins a layer, in walk order`,
          );
          for (const j of joins)
            assert.ok(
              Number.isFinite(j.deviceUs) && j.deviceUs > 0 && j.deviceStartUs >= 0,
              `profiled step ${i}, layer ${j.layer} ${j.hop}: device ${j.deviceUs} µs from ${j.deviceStartUs}`,
            );
          cur = r.next;
        }
        // A walk at random every step, eager or graphed: the caches and h stay the unsharded walk's.
        await each('switched', async (i) => {
          const walk = i % 2 === 0 ? 'seed' : 'replicated';
          const stepGraph = randomInt(0, 2) === 1;
          await s.setConfig({ ...replicated('ll'), walk, stepGraph });
          return `${walk}${stepGraph ? ' step graph' : ''}`;
        });
        // wo allreduce: the rank-order sum gives both ranks the same bits; it rounds differently
        // from the unsharded walk (test/support/allreduce-draws.ts has the bounds and why). A
        // further draw's reference is the seed walk from the same start, bit-identical to the
        // unsharded one (held above, the walk switched between steps).
        const allreduceErrs = async (start: number[], want: Run): Promise<number[]> => {
          await s.setConfig(replicated('ll', { wo: 'allreduce' }));
          const force = [start, ...want.next.slice(0, -1)];
          s.reset();
          const errs: number[] = [];
          for (let i = 0; i < steps; i++) {
            const r = await s.stepDetailed(force[i]!, { hidden: true });
            errs.push(relL2(r.hidden!, want.hidden[i]!));
            const [h0, h1] = await s.residuals();
            assert.ok(sameBits(h1!, h0!), `wo allreduce step ${i}: the ranks' h differ`);
          }
          return errs;
        };
        const draws = [await allreduceErrs(starts[0]!, refs[0]!)];
        while (draws.length < allreduceDraws(preset)) {
          const fresh = [randomInt(0, cfg.vocab)];
          await s.setConfig({ ...replicated('ll'), walk: 'seed' });
          draws.push(await allreduceErrs(fresh, await runSession(s, fresh, steps)));
        }
        checkAllreduceDraws(preset, `${preset}: replicated`, draws);
        console.log(
          `      ${preset}: replicated, weights per rank ${s
            .weightBytes()
            .map((b) => (b / 2 ** 30).toFixed(2))
            .join(' / ')} GiB`,
        );
      } finally {
        await s.close();
      }
    });
  }
});
